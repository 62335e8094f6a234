"""The Sweep tab: every selected method at every value of K, L or T, with repeats, streamed point by point."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import gradio as gr

from spectr_gbv.bench.view import command_line, set_label, sweep_rows
from spectr_gbv.pairs import is_teaching
from spectr_gbv.sweep import AXES, iter_set_sweep, iter_sweep

from ..serving import gpu, visitors
from ..serving import limits
from ..serving.limits import BudgetSpent
from ..serving.request import SWEEP
from ..wiring import private, stop_button
from ..wiring.admission import caps, cost, fix_buttons, pre_start
from ..wiring.downloads import download_components, wire_downloads
from ..render.band_figures import sweep_band_figures
from ..wiring.admission.budget_stops import Ticker, budget_stop, what_fits
from ..wiring.admission.caps import MAX_SWEEP_VALUES
from ..render.chart_layout import MIN_WIDTH
from ..wiring.errors import translate_error, user_errors
from ..wiring.inputs import DEFAULT_SETTINGS, check_runs_fit, clamp_in_page, default_compare, prepare
from ..wiring.prompt_set_choice import SINGLE, check_set_fits, check_set_name, prepare_set, set_controls, set_prompts
from ..wiring.outputs import NamedOutputs, skip
from ..wiring.run_events import run_events
from ..wiring.runs import MAX_REPEATS, STOPS, header_line, method_name, sweep_point
from ..wiring.settings import (MAX_DRAFT_LENGTH, MAX_DRAFTS, MAX_TEMPERATURE, check_choice, check_methods, check_pair_key,
                       number, settings, shown)
from ..render.words import how_to_read


@dataclass
class Swept(NamedOutputs):
    header: object = skip()
    efficiency: object = skip()
    speed: object = skip()
    data: object = skip()


def parse_values(axis: str, text) -> list[float]:
    check_choice("the sweep axis", axis, AXES)
    if not isinstance(text, (str, int, float)) or isinstance(text, bool):
        raise ValueError(f"the sweep values must be text such as '1, 2, 4', got {type(text).__name__} {shown(text)}")
    parts = [p for p in str(text or "").replace(";", ",").replace(" ", ",").split(",") if p]
    if not parts:
        raise ValueError("give the values to sweep, for example 1, 2, 4, 8")
    if len(parts) > MAX_SWEEP_VALUES:
        raise ValueError(f"at most {MAX_SWEEP_VALUES} sweep values, got {len(parts)}")
    limits = {"K": (1, MAX_DRAFTS, True), "L": (1, MAX_DRAFT_LENGTH, True), "T": (0, MAX_TEMPERATURE, False)}
    low, high, integer = limits[axis]
    return [number(f"sweep value for {axis}", p, low, high, integer) for p in parts]


@visitors.served(translate_error, SWEEP, estimate=lambda run: fix_buttons.line_estimate("sweep", parse_values)(run))
@gpu.on_gpu(gpu.sweep_cost)
@user_errors
def run_sweep(pair_key, prompt, methods, axis, values, num_drafts, draft_length, temperature, max_new_tokens, seed,
              repeats=1, prompt_set=None, progress=gr.Progress(), request: gr.Request = None):
    """Every method at every swept value, `repeats` seeds per point; streamed point by point, and
    when the budget stops it, the points that finished stay, with the header saying so (before the
    first point finished: how far the run in progress got, and what would fit).

    With Repeats > 1 on a model pair, AR is timed just before and after every method's runs at
    every point, as in Compare, and a point's speedup is the median of its runs against them, with
    their range (`runs.sweep_point`); with one run per point the chart leaves the speedups out.

    Stop ends it at its next step, as the budget does. Settings whose estimate does not fit the
    budget are refused before any model call (components.wiring.admission.pre_start).

    `prompt_set` names a set of prompts to run every point over instead of the prompt alone
    (components.wiring.prompt_set_choice; `spectr_gbv.sweep.iter_set_sweep`): a point's runs are
    then every (prompt, seed) pair; a set too large for the budget is refused before it loads."""
    run = SWEEP.request((pair_key, prompt, methods, axis, values, num_drafts, draft_length, temperature, max_new_tokens,
                         seed, repeats, prompt_set))
    session = getattr(request, "session_hash", None)
    STOPS.take(session)  # a Stop pressed before this run does not end it
    set_name, key = check_set_name(run.prompt_set), check_pair_key(run.pair_key)
    texts = set_prompts(set_name, key, run.prompt)
    count, pair = len(texts), None
    methods = check_methods(run.methods)
    base = settings(*run.settings_values())
    axis, swept = run.axis, parse_values(run.axis, run.values)
    repeats = number("repeats", run.repeats, 1, MAX_REPEATS)
    if len(methods) * len(swept) > limits.LIMITS.sweep_runs:
        raise ValueError(f"{len(methods)} methods x {len(swept)} values = {len(methods) * len(swept)} runs is over this "
                         f"server's limit of {limits.LIMITS.sweep_runs} runs (methods x values): fewer methods or values")
    for value in swept:  # every swept K x L must fit the memory limit too
        if axis in ("K", "L"):
            settings(value if axis == "K" else run.num_drafts, value if axis == "L" else run.draft_length,
                     run.temperature, run.max_new_tokens, run.seed)
    if set_name == SINGLE:  # one prompt: the pre-start check, then the prompt box; a set is sized below
        pre_start.check(pre_start.Plan("sweep", key, tuple(methods), base.num_drafts, base.draft_length,
                                       base.max_new_tokens, repeats=repeats, axis=axis, values=tuple(swept)))
        pair, prompt_ids = prepare(key, run.prompt, progress)
        set_ids = [prompt_ids]
    lengths = swept if axis == "L" else [base.draft_length] * len(swept)
    teaching = pair.info.teaching if pair is not None else is_teaching(key)
    interleave = not teaching and repeats > 1  # AR around every method's runs (cost.sweep_interleaves_ar)
    ar_runs = cost.sweep_ar_runs(axis, swept, len(methods), interleave)
    plan = [(ar_runs * count, 0)] + [(len(methods) * repeats * count, int(v)) for v in lengths]
    check_set_fits(set_name, key,
                   lambda n: n * cost.sweep_seconds(key, len(methods), axis, swept, base.num_drafts,
                                                    base.draft_length, base.max_new_tokens, repeats),
                   lambda n: [(c * n // count, length) for c, length in plan], base.max_new_tokens)
    if pair is None:
        pair, set_ids = prepare_set(key, texts, progress)
        prompt_ids = set_ids[0]
    check_runs_fit(pair, plan, base.max_new_tokens, f"{len(methods)} methods x {len(swept)} values x {repeats} seeds "
                   f"and {ar_runs} AR runs" + (f", over {count} prompts" if count > 1 else "")
                   + f", {base.max_new_tokens} tokens each", advice="fewer tokens, methods, values or repeats, or a longer L")
    extra = [f"{repeats} seeds ({base.seed} to {base.seed + repeats - 1})" if repeats > 1 else "",
             f"prompt set {set_name} ({count} prompts)" if set_name != SINGLE else "", f"{base.max_new_tokens} tokens"]
    heading = functools.partial(header_line, pair.info.key, methods, base.num_drafts, base.draft_length, base.temperature,
                                base.seed, [e for e in extra if e], swept=axis)
    command = command_line("sweep", pair.info.key, run.prompt, methods=methods, num_drafts=base.num_drafts,
                           draft_length=base.draft_length, temperature=base.temperature,
                           max_new_tokens=base.max_new_tokens, seeds=range(base.seed, base.seed + repeats), axis=axis,
                           values=swept, prompt_set=set_name)
    shown_prompt = run.prompt if set_name == SINGLE else set_label(set_name, count)
    table = functools.partial(sweep_rows, pair.info.key, shown_prompt, num_drafts=base.num_drafts,
                              draft_length=base.draft_length, temperature=base.temperature,
                              max_new_tokens=base.max_new_tokens, timed=not pair.info.teaching)
    points, total, stop, partial, tick = [], len(methods) * len(swept), None, None, Ticker(session=session)
    progress(0, desc=f"{axis} = {swept[0]:g}")
    try:
        rows = (iter_sweep(pair.target, pair.draft, prompt_ids, methods, axis, swept, base.config(methods[0]),
                           on_iteration=tick, repeats=repeats, interleave_ar=interleave) if set_name == SINGLE else
                iter_set_sweep(pair.target, pair.draft, set_ids, methods, axis, swept, base.config(methods[0]),
                               on_iteration=tick, repeats=repeats, interleave_ar=interleave))
        for row in rows:
            points.append(sweep_point(row))
            progress(len(points) / total, desc=f"{len(points)} / {total} points")
            if len(points) < total:
                yield Swept(heading() + f"running: {len(points)} of {total} points done",
                            *sweep_band_figures(points, timed=not pair.info.teaching),
                            _sweep_data(pair, axis, points, None) | {"table": table(points), "command": command})
    except BudgetSpent as error:
        note = ""
        if not points:  # the budget saw the first point's runs only: AR, then the first method's seeds
            label = ("the AR baseline" if tick.runs <= 1
                     else f"run {tick.runs} of the first point (AR timed around each method's runs)" if interleave
                     else f"{method_name(methods[0])} at {axis} = {swept[0]:g}, seed {base.seed + tick.runs - 2}")
            partial = tick.partial_run(label, pair.text)
            note = what_fits(tick, "no point", "token per run", lambda n: cost.expected_steps(plan, n, pair.info.key),
                             base.max_new_tokens - 1, so_far=tick.in_progress(label, base.max_new_tokens),
                             otherwise=": fewer methods, values or seeds")
        stop = budget_stop("sweep", len(points), total, "points", error, note)
    yield Swept(heading(stop=stop), *sweep_band_figures(points, timed=not pair.info.teaching),
                _sweep_data(pair, axis, points, stop) | {"partial_run": partial, "table": table(points), "command": command})


def _sweep_data(pair, axis, points, stop) -> dict:
    return {"pair": pair.info.key, "axis": axis, "rows": points, "stopped": stop.text() if stop else None}


# Seeds per point a Sweep opens with: a 95 % band per point, and on a model pair a speed chart (a median of two
# timed runs); one seed draws neither, and its points cannot rank the rules.
DEFAULT_REPEATS = 2


def default_values(pair_key, axis: str, num_methods: int) -> str:
    """The values box when the page opens, or the pair or axis changes: as many of 1, 2, 4, 8 (K, L) or
    0, 0.35, 0.7, 1 (T) as the server's limit on runs allows and the estimate fits (components.wiring.admission.cost):
    at DEFAULT_REPEATS seeds within the budget's cap when two or more values fit so, else at one seed within
    half of it (a slow pair: `default_repeats` is then 1)."""
    count = max(int(num_methods or 1), 1)
    most = caps.max_sweep_values(count)
    values = cost.sweep_values(pair_key, count, axis, *DEFAULT_SETTINGS, most_values=most, repeats=DEFAULT_REPEATS,
                               fraction=cost.CAP_FRACTION)
    if len(values) < 2:
        values = cost.sweep_values(pair_key, count, axis, *DEFAULT_SETTINGS, most_values=most)
    return ", ".join(f"{v:g}" for v in values)


def default_repeats(pair_key, axis: str, num_methods: int) -> int:
    """The Repeats box when the page opens: DEFAULT_REPEATS where it fits with `default_values`, else 1."""
    from .repeats_sizing import most_sweep_repeats  # it imports this module's parser

    count = max(int(num_methods or 1), 1)
    values = parse_values(axis, default_values(pair_key, axis, count))
    most = most_sweep_repeats(pair_key, count, axis, values, *DEFAULT_SETTINGS, SINGLE)
    return DEFAULT_REPEATS if most >= DEFAULT_REPEATS and len(values) > 1 else 1


def values_for_axis(pair_key, axis, methods) -> str:
    """The values box when the pair or axis changes (the page's values, checked: the event takes them raw)."""
    return default_values(check_pair_key(pair_key), check_choice("the sweep axis", axis, AXES),
                          len(check_methods(methods, at_least_one=False)))


@dataclass
class SweepTab:
    axis: gr.Radio
    values: gr.Textbox
    repeats: gr.Number
    button: gr.Button
    outputs: dict[str, gr.components.Component]  # by the names run_sweep's Swept outputs carry
    downloads: tuple = ()  # (files, command), made from the data after each run (components.wiring.downloads)
    prompt_set: gr.Dropdown | None = None  # components.wiring.prompt_set_choice
    stop: gr.Button | None = None  # ends the run at its next step (components.wiring.stop_button)
    fixes: fix_buttons.FixRow | None = None  # the pre-start check's note and one-click fixes


def build(page) -> None:
    with gr.Tab("Sweep", id="sweep"):
        with gr.Row():
            axis = gr.Radio(list(AXES), value="K", label="Sweep over")
            values = gr.Textbox(value=default_values(page.sidebar.pair.value, "K", len(default_compare())),
                                label=caps.sweep_values_label(len(default_compare())), elem_id="sweep-values")
            repeats = gr.Number(value=default_repeats(page.sidebar.pair.value, "K", len(default_compare())), precision=0,
                                minimum=1, maximum=MAX_REPEATS, label="Repeats (seeds)",
                                info="seeds per point: mean and 95 % band", elem_id="sweep-repeats")
            clamp_in_page(repeats)
            button = gr.Button("Sweep", variant="primary", elem_id="sweep-button")
            stop = stop_button.build("sweep")
        fixes = fix_buttons.build("sweep")
        prompt_set, _ = set_controls("sweep", baseline=False)
        header = gr.Markdown(elem_id="sweep-header")
        with gr.Row(elem_classes=["chart-row", "result-charts"]):
            chart = dict(show_label=False, min_width=MIN_WIDTH)  # the chart's own title names it
            efficiency = gr.Plot(label="Block efficiency", elem_id="sweep-efficiency", **chart)
            speed = gr.Plot(label="Speedup vs AR (hardware-dependent)", elem_id="sweep-speed", **chart)
        how_to_read("sweep")
        files, command = download_components("sweep")
        data = gr.JSON(label="Sweep data")
    page.tab_handles.sweep = SweepTab(axis, values, repeats, button,
                                      outputs=dict(header=header, efficiency=efficiency, speed=speed, data=data),
                                      downloads=(files, command), prompt_set=prompt_set, stop=stop, fixes=fixes)


def wire_events(page) -> None:
    tab, s = page.tab_handles.sweep, page.sidebar
    for control in (s.pair, tab.axis):
        private.on(control.change, values_for_axis, [s.pair, tab.axis, s.methods], tab.values, queue=False,
                   show_progress="hidden")
    run = run_events(tab.button.click, tab.button, run_sweep,
                     [s.pair, page.prompt, s.methods, tab.axis, tab.values, *page.settings_inputs, tab.repeats,
                      tab.prompt_set],
                     tab.outputs, message="header", clear=("efficiency", "speed", "data"), api_name="sweep",
                     concurrency_id="models", preprocess=False)
    wire_downloads(run, tab.outputs["data"], *tab.downloads)
    stop_button.wire(tab.stop, tab.button, run)
    fix_buttons.wire(tab.fixes, dict(pair_key=s.pair, methods=s.methods, num_drafts=s.num_drafts,
                                     draft_length=s.draft_length, max_new_tokens=s.max_new_tokens, repeats=tab.repeats,
                                     axis=tab.axis, values=tab.values),
                     dict(max_new_tokens=s.max_new_tokens, repeats=tab.repeats, values=tab.values,
                          draft_length=s.draft_length, num_drafts=s.num_drafts), tab.button, parse_values)
