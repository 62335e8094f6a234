"""The page's side of the pre-start check: a note and one-click fixes under a view's button.

As the settings change, the note says when the view's run would be refused (its estimate
does not fit the budget: components.wiring.admission.pre_start), and a button per fix sets one setting to
the largest value that fits ("53 tokens per run", "2 repeats", "L = 2", "the first 2 values").
The server refuses such a run anyway, before any model call; the note says so before the click,
and the run button is disabled while it shows (a click would only bring the refusal's toast).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import gradio as gr

from .. import private
from ..errors import user_errors
from ..run_events import RUNNING
from ..runs import MAX_REPEATS
from ..settings import (MAX_DRAFT_LENGTH, MAX_DRAFTS, MAX_NEW_TOKENS, check_choice, check_method, check_methods,
                        check_pair_key, number)
from . import cost, pre_start

# The settings each view can fix, in the order the buttons stand (the controls a visitor reaches for first).
FIXABLE = {
    "generate": ("max_new_tokens", "draft_length", "num_drafts"),
    "race": ("max_new_tokens", "draft_length", "num_drafts"),
    "compare": ("max_new_tokens", "repeats", "draft_length", "num_drafts"),
    "sweep": ("max_new_tokens", "repeats", "values", "draft_length", "num_drafts"),
    "fidelity": ("num_runs", "num_tokens", "draft_length", "num_drafts"),
}


@dataclass
class FixRow:
    view: str
    note: gr.Markdown  # empty while the run fits
    buttons: dict[str, gr.Button]  # by the setting each sets; hidden unless that fix exists


def build(view: str) -> FixRow:
    """The note and the (hidden) fix buttons, where the view's run button is."""
    note = gr.Markdown(elem_id=f"{view}-pre-start")
    with gr.Row(elem_classes=["fix-row"]):
        buttons = {setting: gr.Button(visible=False, variant="secondary", size="sm", min_width=0,
                                      elem_id=f"{view}-fix-{setting.replace('_', '-')}")
                   for setting in FIXABLE[view]}
    return FixRow(view, note, buttons)


def plan_of(view: str, raw: Mapping[str, object], parse_values: Callable | None = None) -> pre_start.Plan:
    """The Plan of a view's raw inputs (by RunRequest's names), checked as the handler checks them."""
    key = check_pair_key(raw["pair_key"])
    k = number("K (drafts)", raw["num_drafts"], 1, MAX_DRAFTS)
    length = number("L (draft length)", raw["draft_length"], 1, MAX_DRAFT_LENGTH)
    if "methods" in raw:
        methods = tuple(check_methods(raw["methods"]))
    else:
        methods = (check_method(raw["method"], allow_ar=view != "race"),)
    tokens = number("max new tokens", raw.get("max_new_tokens", 1), 1, MAX_NEW_TOKENS)
    extra = {}
    if view in ("compare", "sweep"):
        extra["repeats"] = number("repeats", raw["repeats"], 1, MAX_REPEATS)
    if view == "compare":
        extra["coupled"] = bool(raw["coupled"])
    if view == "sweep":
        extra["axis"] = check_choice("the sweep axis", raw["axis"], ("K", "L", "T"))
        extra["values"] = tuple(parse_values(extra["axis"], raw["values"]))
    if view == "fidelity":
        extra |= dict(num_runs=number("N", raw["num_runs"], 1, 10**6),
                      num_tokens=number("tokens compared", raw["num_tokens"], 1, 10))
    return pre_start.Plan(view, key, methods, k, length, tokens, **extra)


def note_text(plan: pre_start.Plan, fixes: list[pre_start.Fix]) -> str:
    allowed = cost.CAP_FRACTION * cost.budget_seconds()
    hint = pre_start.fewest_methods_hint(plan)
    fits = ("Each button below alone makes it fit" if fixes else "No smaller value of one setting fits: fewer methods, "
            "or a teaching pair") + (f"; so would {hint}" if hint else "")
    return (f"**Would not start:** estimated at {cost.about(plan.seconds())}, more than the {allowed:.0f} s a run may "
            f"take here. {fits}.")


def updates(view: str, raw: Mapping[str, object], parse_values: Callable | None = None) -> list:
    """The note and every button for these inputs: all hidden while the run fits (or an input is not valid yet:
    the run's own message says what is wrong)."""
    try:
        plan = plan_of(view, raw, parse_values)
        fits = plan.fits()
    except ValueError:
        plan, fits = None, True
    if fits:
        return [""] + [gr.update(visible=False) for _ in FIXABLE[view]]
    fixes = pre_start.fixes(plan)
    found = {fix.setting: fix for fix in fixes}
    buttons = [gr.update(value=found[s].text, visible=True) if s in found else gr.update(visible=False)
               for s in FIXABLE[view]]
    return [note_text(plan, fixes)] + buttons


def button_update(note: str, label: str):
    """The run button under the note: disabled while the note says the run would not start, enabled once it
    fits; left alone while its run goes ("Running…": run_events owns it then)."""
    return gr.skip() if label == RUNNING else gr.update(interactive=not note)


def wire(row: FixRow, inputs: Mapping[str, gr.components.Component], targets: Mapping[str, gr.components.Component],
         run_button: gr.Button, parse_values: Callable | None = None) -> None:
    """The note follows `inputs` (by RunRequest's names), and the run button is disabled while it shows; each fix
    button sets its target control (`targets`, by setting) to the value that fits now."""
    names, components = list(inputs), list(inputs.values())
    outputs = [row.note, *row.buttons.values()]
    quick = dict(queue=False, show_progress="hidden")

    def refresh(*values):
        return updates(row.view, dict(zip(names, values)), parse_values)

    def refresh_with_button(*values):
        *values, label = values
        shown = refresh(*values)
        return [*shown, button_update(shown[0], label)]

    # A visitor's own edits (`input`), not every `change`: with several quick handlers on one slider's change,
    # Gradio's slider re-sent its change after each of their updates, and the page looped on the server.
    # A fix applied by a button refreshes the note itself (its `then`). The run's own click refreshes the
    # note but leaves the button to run_events (which makes it busy at the same moment).
    for listener in [c.input for c in components]:
        private.on(listener, refresh_with_button, [*components, run_button], [*outputs, run_button], **quick)
    private.on(run_button.click, refresh, components, outputs, **quick)
    for setting, button in row.buttons.items():
        applied = private.on(button.click, _applier(row.view, names, setting, parse_values), components,
                             targets[setting], **quick)
        applied.then(user_errors(refresh_with_button), [*components, run_button], [*outputs, run_button],
                     preprocess=False, api_visibility="private", **quick)


def _applier(view: str, names: list[str], setting: str, parse_values: Callable | None):
    def apply(*values):
        """The fix's value into its control (recomputed from the inputs now: they may have changed since)."""
        plan = plan_of(view, dict(zip(names, values)), parse_values)
        fix = next((f for f in pre_start.fixes(plan) if f.setting == setting), None)
        return gr.skip() if fix is None or plan.fits() else fix.value

    apply.__name__ = f"fix_{view}_{setting}"
    return apply



def line_estimate(view: str, parse_values: Callable | None = None) -> Callable:
    """A request's expected seconds as it arrives, for its place in line (components.serving.visitors.served): the
    pre-start check's estimate of its raw inputs, at most the server's time budget (a run is stopped there)."""

    def seconds(run) -> float:
        return min(plan_of(view, vars(run), parse_values).seconds(), cost.budget_seconds())

    return seconds
