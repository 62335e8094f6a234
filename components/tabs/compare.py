"""The Compare tab: every selected method on the same prompt and settings, AR timed in the same request.

Texts and speedups come from independent runs; the charts from a coupled run (the same drafts
and random draws for every verifier) when Coupled is ticked (components.tabs.compare_run)."""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from spectr_gbv.bench.view import compare_order, coupled_leader  # the views' and the command's order and leader

from ..serving import gpu, visitors
from ..serving.request import COMPARE
from ..wiring.admission.budget_stops import Ticker
from . import compare_ranking
from .compare_run import CompareView
from .compare_set import compare_over_set, set_estimate
from ..wiring.prompt_set_choice import SET_NAMES, SINGLE, check_set_name, fitting_sets, set_controls, set_size
from ..wiring.errors import translate_error, user_errors
from ..wiring import private, stop_button
from ..wiring.admission import cost, fix_buttons, pre_start
from ..wiring.downloads import download_components, wire_downloads
from ..render.chart_layout import MIN_WIDTH
from ..wiring.inputs import DEFAULT_SETTINGS, check_runs_fit, clamp_in_page, default_compare, prepare
from ..wiring.run_events import QUICK, run_events
from ..wiring.runs import MAX_REPEATS, STOPS
from ..wiring.settings import check_flag, check_methods, check_pair_key, number, settings
from ..render.words import how_to_read


PRESS_COMPARE = "() => { document.querySelector('#compare-button').click(); return []; }"


run_order = compare_order  # the methods in Compare's order (the command runs them in the same)


@visitors.served(translate_error, COMPARE, estimate=fix_buttons.line_estimate("compare"))
@gpu.on_gpu(gpu.compare_cost)
@user_errors
def compare(pair_key, prompt, methods, num_drafts, draft_length, temperature, max_new_tokens, seed, coupled,
            repeats=1, prompt_set=None, baseline=None, progress=gr.Progress(), request: gr.Request = None):
    """Every selected method on the same prompt and settings; AR timed in the same request.

    Runs, in this order: AR, the default method, the coupled runs (every method on the same
    drafts and draws), then each other method, with AR again after every method on a timed
    pair, so each method's speedup is measured against the AR runs just before and after it
    (`runs.speedup_of`). Streams the outputs after each piece. `repeats` runs every method (and
    the coupled run) with seeds seed, seed + 1, ...: the charts show their mean and 95 % band,
    the speedup their median and range. When the budget stops the request, what finished
    stays, and the header says what was stopped (before any method finished: the tokens of the
    run in progress, and what would fit). Stop ends it at its next step, the same way. Settings whose
    estimate does not fit the budget are refused before any model call (components.wiring.admission.pre_start).

    `prompt_set` names a set of prompts to run over instead of the prompt alone
    (components.wiring.prompt_set_choice; coupled: means and paired intervals against `baseline`,
    components.tabs.compare_set; a set too large for the budget is refused there, before any run)."""
    run = COMPARE.request((pair_key, prompt, methods, num_drafts, draft_length, temperature, max_new_tokens, seed,
                           coupled, repeats, prompt_set, baseline))
    session = getattr(request, "session_hash", None)
    STOPS.take(session)  # a Stop pressed before this run does not end it
    if check_set_name(run.prompt_set) != SINGLE:
        yield from compare_over_set(run, progress, run_order)
        return
    methods, coupled = run_order(check_methods(run.methods)), check_flag("coupled", run.coupled)
    base = settings(*run.settings_values())
    repeats = number("repeats", run.repeats, 1, MAX_REPEATS)
    pre_start.check(pre_start.Plan("compare", check_pair_key(run.pair_key), tuple(methods), base.num_drafts,
                                   base.draft_length, base.max_new_tokens, repeats=repeats, coupled=bool(coupled)))
    pair, prompt_ids = prepare(run.pair_key, run.prompt, progress)
    timed = not pair.info.teaching  # the teaching pairs are lookup tables: their timings mean nothing
    seeds = [base.seed + r for r in range(repeats)]
    view = CompareView(pair, prompt_ids, methods, base, bool(coupled), seeds, timed, prompt=run.prompt,
                       set_offer=largest_set(pair.info.key, methods, base))
    check_runs_fit(pair, view.plan(), base.max_new_tokens, f"{view.planned()} runs of {base.max_new_tokens} tokens",
                   advice="fewer tokens, methods or repeats, or a longer L")
    tick = Ticker(session=session)
    estimate = cost.about(cost.compare_seconds(pair.info.key, len(methods), base.num_drafts, base.draft_length,
                                               base.max_new_tokens, repeats, coupled))
    yield from view.run(tick, progress, estimate, coupled_leader(methods))


def largest_set(pair_key: str, methods: list[str], base) -> tuple[str, int] | None:
    """(name, prompts) of the largest prompt set a coupled Compare of one repeat runs within the budget at these
    settings (`compare_set.set_estimate`), offered when one prompt ranks nothing; None when none fits."""
    fits = fitting_sets(pair_key, *set_estimate(pair_key, len(methods), base.num_drafts, base.draft_length,
                                                base.max_new_tokens, 1, True), base.max_new_tokens)
    fits = [(name, size) for name, size in fits if size > 1]
    return fits[-1] if fits else None


def offered_set(data) -> tuple[str, int]:
    """The prompt set a finished Compare offered (its data's `set_offer`) and one repeat, as the offer was sized:
    for the dropdown and the Repeats box."""
    if not isinstance(data, dict) or not data.get("set_offer"):
        raise ValueError("no prompt set is offered: run Compare first")
    return check_set_name(data["set_offer"]), 1


def offer_button(data):
    """The one-click offer under the header: shown with the set's name after a run that ranked nothing."""
    name = data.get("set_offer") if isinstance(data, dict) else None
    if not isinstance(name, str) or name not in SET_NAMES:
        return gr.update(visible=False)
    return gr.update(visible=True, value=f"Run over {name} ({set_size(name, data.get('pair') or '')} prompts, one repeat)")


def default_repeats(pair_key, num_methods: int | None = None) -> int:
    """Repeats when the page opens or the pair changes: the most (up to 3) whose estimate fits at the sidebar's
    defaults (components.wiring.admission.cost), so the first click finishes and its speedups are medians."""
    count = len(default_compare()) if num_methods is None else num_methods
    return cost.compare_repeats(pair_key, max(count, 1), *DEFAULT_SETTINGS, coupled=True)


def repeats_for_pair(pair_key, methods) -> int:
    """The repeats box when the pair changes (the page's pair and ticked methods, checked: the event takes them raw)."""
    return default_repeats(check_pair_key(pair_key), len(check_methods(methods, at_least_one=False)))


@dataclass
class CompareTab:
    button: gr.Button
    coupled: gr.Checkbox
    repeats: gr.Number
    outputs: dict[str, gr.components.Component]  # by the names compare's Compared outputs carry
    downloads: tuple = ()  # (files, command), made from the data after each run (components.wiring.downloads)
    prompt_set: gr.Dropdown | None = None  # components.wiring.prompt_set_choice
    baseline: gr.Dropdown | None = None
    stop: gr.Button | None = None  # ends the run at its next step (components.wiring.stop_button)
    offer: gr.Button | None = None  # runs the largest prompt set that fits, when one prompt ranked nothing
    ranking: gr.Markdown | None = None  # before the run: can this prompt or set rank the rules (compare_ranking)
    fixes: fix_buttons.FixRow | None = None  # the pre-start check's note and one-click fixes


def build(page) -> None:
    with gr.Tab("Compare", id="compare"):
        with gr.Row():
            coupled = gr.Checkbox(value=True, label="Coupled: same drafts and same random draws for every verifier",
                                  info="Isolates the rule from sampling noise (charts); the texts and speedups are independent runs.")
            repeats = gr.Number(value=default_repeats(page.sidebar.pair.value), precision=0, minimum=1, maximum=MAX_REPEATS,
                                label="Repeats (seeds)",
                                info="seed, seed + 1, ...: charts show their mean and 95 % band, speedups their median",
                                elem_id="compare-repeats")
            clamp_in_page(repeats)
            button = gr.Button("Compare", variant="primary", elem_id="compare-button")
            stop = stop_button.build("compare")
        fixes = fix_buttons.build("compare")
        prompt_set, baseline = set_controls("compare")
        ranking = compare_ranking.build(page.sidebar.pair.value)
        texts = gr.HTML(elem_id="compare-outputs")
        offer = gr.Button(visible=False, variant="secondary", size="sm", elem_id="compare-use-set")
        chart = dict(show_label=False, min_width=MIN_WIDTH)  # the chart's own title names it; the label is for readers
        with gr.Row(elem_classes=["chart-row", "result-charts"]):
            efficiency = gr.Plot(label="Block efficiency", elem_id="compare-efficiency", **chart)
            histogram = gr.Plot(label="Accepted-length histogram", elem_id="compare-histogram", **chart)
        with gr.Row(elem_classes=["chart-row", "result-charts"]):
            per_position = gr.Plot(label="Per-position acceptance", elem_id="compare-per-position", **chart)
            calls = gr.Plot(label="Target calls per token", elem_id="compare-calls", **chart)
        with gr.Row(elem_classes=["chart-row", "result-charts"]):
            speedup = gr.Plot(label="Wall-clock speedup (hardware-dependent)", elem_id="compare-speedup", **chart)
            theory = gr.Plot(label="Theory against measured", elem_id="compare-theory", **chart)
        how_to_read("compare")
        files, command = download_components("compare")
        data = gr.JSON(label="Compare data")
    page.tab_handles.compare = CompareTab(button, coupled, repeats, outputs=dict(
        texts=texts, efficiency=efficiency, histogram=histogram, per_position=per_position, calls=calls,
        speedup=speedup, theory=theory, data=data), downloads=(files, command), prompt_set=prompt_set,
        baseline=baseline, stop=stop, fixes=fixes, offer=offer, ranking=ranking)


def wire_events(page) -> None:
    tab = page.tab_handles.compare
    s = page.sidebar
    private.on(s.pair.change, repeats_for_pair, [s.pair, s.methods], tab.repeats, queue=False, show_progress="hidden")
    charts = ("efficiency", "histogram", "per_position", "calls", "speedup", "theory", "data")
    run = run_events(tab.button.click, tab.button, compare,
                     [s.pair, page.prompt, s.methods, *page.settings_inputs, tab.coupled, tab.repeats, tab.prompt_set,
                      tab.baseline],
                     tab.outputs, message="texts", clear=charts, api_name="compare", concurrency_id="models",
                     preprocess=False)
    wire_downloads(run, tab.outputs["data"], *tab.downloads)
    compare_ranking.wire(tab.ranking, s, tab.prompt_set)
    run.then(offer_button, tab.outputs["data"], tab.offer, **QUICK)
    run.failure(lambda: gr.update(visible=False), None, tab.offer, **QUICK)
    # One click: the offered set in the dropdown, then Compare pressed as a visitor would (same checks, same line).
    private.on(tab.offer.click, offered_set, [tab.outputs["data"]], [tab.prompt_set, tab.repeats], queue=False,
               show_progress="hidden").then(None, None, None, js=PRESS_COMPARE, **QUICK)
    stop_button.wire(tab.stop, tab.button, run)
    sidebar = dict(pair_key=s.pair, methods=s.methods, num_drafts=s.num_drafts, draft_length=s.draft_length,
                   max_new_tokens=s.max_new_tokens)
    fix_buttons.wire(tab.fixes, sidebar | dict(repeats=tab.repeats, coupled=tab.coupled),
                     dict(max_new_tokens=s.max_new_tokens, repeats=tab.repeats, draft_length=s.draft_length,
                          num_drafts=s.num_drafts), tab.button)
