"""Which prompts a Compare or Sweep runs over: a prompt set chosen by name, checked against the budget first.

One prompt is 10 to 20 iterations, too few for the differences between rules to stand out of
the noise; a set makes the prompt the unit (a mean over prompts, and for coupled runs paired
intervals, `components.tabs.compare_set`). The names:

* `prompt`: the prompt box alone (the default: calls that name no set keep working);
* `examples`: the pair's example prompts (a teaching pair: its examples and its own short prompts);
* `suite-5` .. `suite-120`: that many prompts of the paper-style suite the frontier bench uses
  (`spectr_gbv.prompt_sets.suite_prompts`: its five families in turn; a teaching pair's own
  prompts, cycled).

A name that is not one of these, or a set whose estimate (`components.wiring.admission.cost`) does not fit
the budget, is refused before any run, with the names and sizes that would fit.
"""

from __future__ import annotations

from typing import Callable

import gradio as gr

from spectr_gbv.prompt_sets import SET_NAMES, SINGLE, named_set

from ..serving import limits as limits_module
from .admission import cost
from .inputs import compare_choices, prepare
from .settings import shown

SET_INFO = ("prompt: the prompt box; examples: the pair's example prompts; suite-N: N prompts of the paper-style "
            "suite (a teaching pair: its own prompts)")


set_prompts = named_set  # the prompts of a set on a pair (the `prompt` set: the prompt box)


def set_size(name: str, pair_key: str) -> int:
    return 1 if name == SINGLE else len(set_prompts(name, pair_key, ""))


def check_set_name(name) -> str:
    """A known set name (an empty value: the prompt box alone, as a call that names no set)."""
    if name is None or name == "":
        return SINGLE
    if not isinstance(name, str) or name not in SET_NAMES:
        raise ValueError(f"unknown prompt set {shown(name)}: choose one of {', '.join(SET_NAMES)}")
    return name


def set_fits(pair_key, size: int, seconds_of: Callable[[int], float], plan_of: Callable[[int], list],
             tokens: int, limits=None) -> bool:
    """Whether a set of `size` prompts fits: its estimated seconds within cost.CAP_FRACTION of the time budget
    and its expected iterations (+ cost.SIGMAS sd) within the iteration budget."""
    limits = limits or limits_module.LIMITS
    return (cost.fits_seconds(seconds_of(size), cost.CAP_FRACTION, limits)
            and cost.fits_iterations(plan_of(size), tokens, pair_key, limits.iterations))


def fitting_sets(pair_key, seconds_of, plan_of, tokens: int, limits=None) -> list[tuple[str, int]]:
    """(name, size) of every set that fits these settings (`set_fits`), smallest first."""
    sized = sorted(((name, set_size(name, pair_key)) for name in SET_NAMES), key=lambda item: item[1])
    return [(name, size) for name, size in sized if set_fits(pair_key, size, seconds_of, plan_of, tokens, limits)]


def check_set_fits(name: str, pair_key, seconds_of, plan_of, tokens: int, limits=None) -> None:
    """Refuse, before any run, a set whose estimate does not fit; the message names the sets that would.

    `seconds_of(n)` and `plan_of(n)` are the view's estimate for n prompts: seconds, and its runs as
    (how many, L; 0 for AR) for `cost.fits_iterations`. The prompt box alone is the views' own check."""
    if name == SINGLE:
        return
    size = set_size(name, pair_key)
    if set_fits(pair_key, size, seconds_of, plan_of, tokens, limits):
        return
    fits = fitting_sets(pair_key, seconds_of, plan_of, tokens, limits)
    limits = limits or limits_module.LIMITS
    others = (", ".join(f"{n} ({s} prompt{'s' if s != 1 else ''})" for n, s in fits) if fits
              else "none at these settings: fewer methods, repeats or tokens")
    # Say which budget it misses: "21 s, over a budget of 180 s" read as a contradiction when it was the iterations.
    if cost.fits_seconds(seconds_of(size), cost.CAP_FRACTION, limits):
        over = (f"needs about {cost.expected_steps(plan_of(size), tokens, pair_key):.0f} decoding iterations, over "
                f"this server's budget of {limits.iterations} per request")
    else:
        over = (f"is estimated at {cost.about(seconds_of(size))}, over this server's budget of "
                f"{cost.budget_seconds(limits):.0f} s per request")
    raise ValueError(f"the prompt set {name} ({size} prompts) {over}, so nothing was started. Sets that fit "
                     f"these settings: {others}")


def prepare_set(pair_key, texts: list[str], progress=None):
    """(pair, token ids of each prompt), each prompt checked as the prompt box is (`inputs.prepare`)."""
    pair, first = prepare(pair_key, texts[0], progress)
    return pair, [first] + [prepare(pair_key, text)[1] for text in texts[1:]]


def set_controls(view: str, baseline: bool = True) -> tuple[gr.Dropdown, gr.Dropdown | None]:
    """The prompt set's dropdown under a view's controls and, for Compare, the baseline rule's."""
    with gr.Row():
        chosen = gr.Dropdown(list(SET_NAMES), value=SINGLE, label="Prompt set", info=SET_INFO,
                             elem_id=f"{view}-prompt-set")
        rule = (gr.Dropdown([("SpecTr if ticked, else the first ticked", ""), *compare_choices()], value="",
                            label="Baseline rule (over a set, coupled)",
                            info="every other rule's difference against it, with its paired 95 % interval",
                            elem_id=f"{view}-baseline") if baseline else None)
    return chosen, rule
