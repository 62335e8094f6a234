"""SpecTr-GBV Explorer: the Gradio app.

Views: Generate (streamed, tokens coloured by provenance), Iteration explorer (the K draft
blocks of each iteration, the accepted sub-block, the residual), Compare (methods side by
side, optionally coupled on the same drafts and draws), Sweep (K, L or T), Fidelity
(empirical against exact law) and About.

Handlers are thin: UI values are checked by `components.views.settings`, the library
(`spectr_gbv`) produces run records, and pure functions in `components` turn records into
HTML and Plotly figures. Public API endpoints: /generate, /compare, /sweep, /fidelity.
"""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported
# Gradio notices a closed event stream when it next wakes up, at least every heartbeat: then a
# request whose visitor left stops at its next budget tick (components.visitors).
os.environ.setdefault("GRADIO_HEARTBEAT_INTERVAL", "2")

from components.serving import gpu  # first: it imports ZeroGPU's `spaces` (when present) before anything touches CUDA

import contextlib
import dataclasses
import functools
import html
import logging
import math
from pathlib import Path

import gradio as gr

from components.views import caps, figures, screens, share

from components.serving import visitors
from components.views.about import about_markdown
from components.views.band_figures import sweep_band_figures
from components.views.caps import MAX_SWEEP_VALUES
from components.views.compare_view import CompareView
from components.views.explorer_js import GRID_JS, OUTPUT_JS, PRESENTATION_JS
from components.views.grid import draft_grid_html
from components.views.lesson import build_lesson
from components.serving.limits import LIMITS, Budget, BudgetSpent, ClientGone, check_fits, check_prompt_tokens, fewest_iterations
from components.views.playground import build_playground
from components.views.runs import MAX_REPEATS, STOPS, Stop, header_line, sweep_point
from components.views.settings import (
    MAX_DRAFT_LENGTH, MAX_DRAFTS, MAX_NEW_TOKENS, MAX_TEMPERATURE, check_choice, check_flag, check_method, check_methods,
    check_pair_key, check_prompt, number, settings, shown,
)
from components.views.text import LOSSY_NOTE, metrics_line, provenance_html
from components.views.words import how_to_read, shown_expected, shown_h
from spectr_gbv import AUTOREGRESSIVE, METHODS
from spectr_gbv.coupled import CoupledRun, coupled_steps
from spectr_gbv.engine import decode_iterations, generate_config, run_record
from spectr_gbv.fidelity import fidelity_result, fidelity_sample
from spectr_gbv.pairs import DEFAULT_KEY, PAIRS, TOY_KEY, TWO_TOKEN_KEY, get_pair
from spectr_gbv.records import RunRecord
from spectr_gbv.sweep import AXES, iter_sweep

ASSETS = Path(__file__).parent / "assets"
LOG = logging.getLogger("spectr_gbv.app")
PAIR_CHOICES = [(info.label, key) for key, info in PAIRS.items()]
METHOD_CHOICES = [("AR (plain target sampling)", AUTOREGRESSIVE)] + [(spec.label, name) for name, spec in METHODS.items()]
COMPARE_CHOICES = [(spec.label, name) for name, spec in METHODS.items()]
DEFAULT_COMPARE = ["sd", "spectr", "gbv", "spectr_gbv", "as_bv", "as_bv_handoff", "spectr_gbv_released"]
# The exact multi-draft rule with the highest measured E[tau | drafts] at the app's default
# K = 2, L = 4, T = 0.7 on the default pair (python -m spectr_gbv.bench.frontier, coupled, 60
# paper-suite prompts x 16 tokens, assets/results/frontier_handoff: AS-BV+H 0.95623, AS-BV
# 0.95615, SpecTr-GBV 0.944, SpecTr 0.886; README "The exact frontier"). AS-BV+H is never below
# AS-BV given the same drafts (it only adds the hand-off), and at K = 2 they nearly tie.
# Chosen per configuration, never per iteration from the drafts (that would not be exact).
DEFAULT_METHOD = "as_bv_handoff"
EXAMPLES = [
    [DEFAULT_KEY, "Write a Python function that checks whether a number is prime."],
    [DEFAULT_KEY, "A train travels 120 km in 1.5 hours. What is its average speed?"],
    [DEFAULT_KEY, "Write a short story about a robot who learns to paint."],
    [DEFAULT_KEY, "Give three tips for staying focused while studying."],
    [TOY_KEY, "the cat"],
    [TWO_TOKEN_KEY, "A"],
]
MAX_UPLOAD_BYTES = 1  # the app has no file input: Gradio's upload route refuses anything bigger


def user_errors(fn):
    """Bad input, exhausted resources and internal faults become a message to this user.

    Nothing escapes as a crash: the server keeps serving this and every other session, and
    memory is released after an out-of-memory error."""

    if _is_generator(fn):
        @functools.wraps(fn)
        def generator_wrapper(*args, **kwargs):
            with _as_user_error(fn.__name__):
                yield from fn(*args, **kwargs)
        return generator_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _as_user_error(fn.__name__):
            return fn(*args, **kwargs)
    return wrapper


@contextlib.contextmanager
def _as_user_error(handler: str = "request"):
    try:
        yield
    except gr.Error:
        raise
    except Exception as error:  # noqa: BLE001 - every fault becomes a message
        raise translate_error(error, handler) from None  # the log has what an operator needs (see translate_error)


def _is_out_of_memory(error: BaseException) -> bool:
    import torch

    text = str(error).lower()
    return isinstance(error, (MemoryError, torch.OutOfMemoryError)) or (
        isinstance(error, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text))


def translate_error(error: BaseException, handler: str = "request") -> gr.Error:
    """The user's message (plain text) and one log line; a traceback only for a real internal error."""
    if isinstance(error, ClientGone):  # nobody reads the message: the log says why the work stopped
        LOG.info("%s stopped: %s", handler, error)
        return user_error(str(error))
    if isinstance(error, ValueError):  # the library's and the settings' own messages: made for users
        LOG.info("%s refused: %s", handler, _plain(str(error)))
        return user_error(str(error))
    if _is_out_of_memory(error):
        LOG.warning("%s ran out of memory: %s", handler, _plain(str(error)))
        _release_memory()
        return user_error("out of memory: lower K, L, max new tokens or the number of runs, and try again")
    LOG.error("internal error in %s", handler, exc_info=error)
    _release_memory()
    return user_error(f"internal error ({type(error).__name__}: {error}); the server is fine: try other settings, "
                      "and report it if it persists")


def user_error(message: str) -> gr.Error:
    """A toast that shows the message as text: Gradio renders a gr.Error's message as HTML, so
    markup from the input is escaped, and nothing is printed (the caller logs one line)."""
    return gr.Error(html.escape(_plain(message), quote=False), print_exception=False)


def _plain(text: str) -> str:
    """Text a log line and JSON can carry: a lone surrogate from the input becomes its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _is_generator(fn) -> bool:
    import inspect

    return inspect.isgeneratorfunction(fn)


def _release_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


LOADING_NOTE = "loading the model (about a minute the first time)"


def _prepare(pair_key, prompt, progress=None):
    key = check_pair_key(pair_key)
    if progress is not None and not caps.is_teaching_pair(key):  # a model pair may load now: say so while it does
        progress(0, desc=LOADING_NOTE)
    pair = get_pair(key, allow_custom=LIMITS.allow_any_model)
    prompt_ids = pair.encode(check_prompt(prompt))
    check_prompt_tokens(len(prompt_ids))
    return pair, prompt_ids


def _draft_for(pair, method):
    return None if method == AUTOREGRESSIVE else pair.draft


# ------------------------------------------------------------------------------------ Generate


def _explorer_outputs(state: dict | None, index) -> tuple:
    """(grid HTML, distribution figure, iteration JSON) for iteration `index` (1-based) of the stored run."""
    if not state:
        return "<i>Generate something first: every iteration of the last run appears here.</i>", None, None
    record: RunRecord = state["record"]
    texts = state["texts"]  # no model here: on ZeroGPU this runs outside the GPU worker

    def token_text(ids):
        return [texts[i] for i in ids]

    i = min(max(int(index or 1), 1), len(record.iterations)) - 1
    it = record.iterations[i]
    top_text = token_text([t.token for t in it.final_top])
    figure = figures.distribution_figure(it.final_top, top_text, it.final_kind, it.final_token, record.config.method)
    details = {
        "iteration": i + 1, "tau": it.num_accepted, "winning_draft": None if it.winning_draft is None else it.winning_draft + 1,
        "final_kind": it.final_kind, "final_token": token_text([it.final_token])[0],
        "expected_tau": shown_expected(it.expected_accepted),
        "tests": [{"draft": t.draft + 1, "sub_block": [t.start + 1, t.start + t.length], "h": shown_h(t.accept_prob),
                   "uniform": t.uniform, "accepted": t.accepted} for t in it.tests],
    }
    return draft_grid_html(it, token_text, record.config.method), figure, details


def _add_display_strings(texts: dict[int, str], it, token_text) -> dict[int, str]:
    """Add the display strings of every token id the explorer can show for iteration `it` (drafts, final, top list)."""
    ids = {it.final_token, *(top.token for top in it.final_top), *(t for row in it.draft_tokens for t in row)}
    new = sorted(ids - texts.keys())
    texts.update(zip(new, token_text(new)) if new else ())
    return texts


@visitors.served(translate_error)
@gpu.on_gpu(gpu.generate_cost)
@user_errors
def generate_stream(pair_key, prompt, method, num_drafts, draft_length, temperature, max_new_tokens, seed,
                    progress=gr.Progress(), request: gr.Request = None):
    """Stream the output iteration by iteration; at the end, or when the budget or Stop ends it, fill the explorer.

    Every step also stores the run so far (run_state), so a Stop that cancels the run (ZeroGPU)
    can fill the explorer from it."""
    session = getattr(request, "session_hash", None)
    STOPS.take(session)  # a Stop pressed before this run does not end it
    pair, prompt_ids = _prepare(pair_key, prompt, progress)
    method = check_method(method)
    base = settings(num_drafts, draft_length, temperature, max_new_tokens, seed)
    config = base.config(method)
    heading = {"pair_key": pair.info.key, "methods": [method], "num_drafts": base.num_drafts,
               "draft_length": base.draft_length, "temperature": base.temperature, "seed": base.seed}
    iterations, produced, budget, texts, stop = [], 0, Budget(), {}, None
    progress(0, desc="decoding")
    try:
        for it in decode_iterations(pair.target, _draft_for(pair, method), prompt_ids, config):
            budget.tick()
            iterations.append(it)
            produced += len(it.emitted)
            _add_display_strings(texts, it, pair.token_text)
            progress(produced / config.max_new_tokens, desc=f"{produced} / {config.max_new_tokens} tokens")
            partial = run_record(config, prompt_ids, iterations, pair.target.eos_token_id)
            state = {"pair": pair.info.key, "record": partial, "texts": texts, "heading": heading,
                     "total": config.max_new_tokens}
            yield (provenance_html(partial, pair.token_text), header_line(**heading) + metrics_line(partial),
                   gr.skip(), state, gr.skip(), gr.skip(), gr.skip(), gr.skip())
            if STOPS.take(session):
                stop = Stop(produced, config.max_new_tokens, "tokens", "you pressed Stop")
                break
    except BudgetSpent as error:
        if not iterations:
            raise
        stop = Stop(produced, config.max_new_tokens, "tokens", str(error))
    record = run_record(config, prompt_ids, iterations, pair.target.eos_token_id)
    state = {"pair": pair.info.key, "record": record, "texts": texts, "heading": heading, "total": config.max_new_tokens}
    summary = record.summary() | {"pair": state["pair"], "text": pair.text(record.tokens),
                                  "stopped": stop.text() if stop else None}
    slider, grid, figure, details = _explorer_start(state)
    yield (provenance_html(record, pair.token_text), header_line(**heading, stop=stop) + metrics_line(record), summary,
           state, slider, grid, figure, details)


def _explorer_start(state: dict | None) -> tuple:
    """(slider update, grid, figure, details) showing iteration 1 of the stored run."""
    n = len(state["record"].iterations) if state else 0
    slider = gr.update(minimum=1, maximum=max(n, 2), value=1, step=1, interactive=n > 1)
    return slider, *_explorer_outputs(state, 1)


def ask_to_stop(request: gr.Request = None):
    """Stop: this session's streaming run ends at its next iteration, with the explorer filled."""
    STOPS.ask(getattr(request, "session_hash", None))


def fill_explorer_on_stop(state):
    """After Stop: the explorer gets the iterations decoded so far, and the metrics line says where it stopped."""
    if not state:
        return gr.skip(), gr.skip(), *_explorer_outputs(state, 1)
    record = state["record"]
    stop = Stop(len(record.tokens), state["total"], "tokens", "you pressed Stop")
    slider, grid, figure, details = _explorer_start(state)
    return header_line(**state["heading"], stop=stop) + metrics_line(record), slider, grid, figure, details


def show_iteration(state, index):
    return _explorer_outputs(state, index)


@user_errors
def open_iteration(state, event: gr.SelectData):
    """A click on a token of the Generate output: its iteration, in the explorer tab."""
    record, texts = (state["record"], state["texts"]) if state else (None, {})
    if record is None or (isinstance(event.value, str) and event.value != "".join(texts[t] for t in record.tokens)):
        # a run is stored when it ends: this output is still streaming, or an example's
        raise user_error("this output is not a finished Generate run yet: the explorer opens the iterations of the "
                         "last Generate run once it has finished (examples are not stored)")
    index = min(number("the iteration", event.index or 1, 1, 10**9), len(record.iterations))
    return gr.Tabs(selected="explorer"), gr.update(value=index), *_explorer_outputs(state, index)


PLAY_SECONDS = 1.5  # one iteration per tick: time to read the grid's caption


def toggle_play(state, index, playing):
    """Play / pause the autoplay through the iterations; Play at the last iteration starts over."""
    playing = bool(playing) and bool(state)
    if playing or not state:
        return False, gr.Timer(active=False), gr.Button(value="▶ Play"), gr.update()
    n = len(state["record"].iterations)
    start = gr.update(value=1) if int(index or 1) >= n else gr.update()
    return True, gr.Timer(active=True), gr.Button(value="⏸ Pause"), start


def play_tick(state, index):
    """The next iteration; the timer stops itself after the last one."""
    if not state:
        return gr.update(), False, gr.Timer(active=False), gr.Button(value="▶ Play"), *_explorer_outputs(state, 1)
    n = len(state["record"].iterations)
    index = min(int(index or 1) + 1, n)
    running = index < n
    return (gr.update(value=index), running, gr.Timer(active=running), gr.Button(value="⏸ Pause" if running else "▶ Play"),
            *_explorer_outputs(state, index))


def step_iteration(state, index, delta):
    if not state:
        return gr.update(), *_explorer_outputs(state, 1)
    n = len(state["record"].iterations)
    index = min(max(int(index or 1) + delta, 1), n)
    return gr.update(value=index), *_explorer_outputs(state, index)


# ------------------------------------------------------------------------------------- Compare


@visitors.served(translate_error)
@gpu.on_gpu(gpu.compare_cost)
@user_errors
def compare(pair_key, prompt, methods, num_drafts, draft_length, temperature, max_new_tokens, seed, coupled,
            repeats=1, progress=gr.Progress()):
    """Every selected method on the same prompt and settings; AR timed in the same request.

    Streams: the outputs after the AR baseline and after each method (texts and independent-run
    charts), then the coupled runs' charts. `repeats` runs every method (and the coupled run)
    with seeds seed, seed + 1, ...: the efficiency chart shows their mean and 95 % band. When the
    budget stops the request, what finished stays, and the header says what was stopped."""
    pair, prompt_ids = _prepare(pair_key, prompt, progress)
    methods, coupled = check_methods(methods), check_flag("coupled", coupled)
    base = settings(num_drafts, draft_length, temperature, max_new_tokens, seed)
    repeats = number("repeats", repeats, 1, MAX_REPEATS)
    ar_runs, drafted_runs = (1 if pair.words else 2), (len(methods) + coupled) * repeats
    _check_fits(pair, [(ar_runs, 0), (drafted_runs, base.draft_length)], base.max_new_tokens,
                f"{ar_runs + drafted_runs} runs of {base.max_new_tokens} tokens")
    tick = _ticker(Budget())
    timed = not pair.words  # the teaching pairs are lookup tables: their timings mean nothing
    seeds = [base.seed + r for r in range(repeats)]
    view = CompareView(pair, prompt_ids, methods, base, bool(coupled), seeds, timed)
    steps = len(methods) * repeats + (repeats if coupled else 0) + 1 + timed
    try:
        progress(0, desc="AR baseline")
        view.ar.append(generate_config(pair.target, None, prompt_ids, base.config(AUTOREGRESSIVE, with_theory=False), tick))
        for i, method in enumerate(methods):
            for r, one_seed in enumerate(seeds):
                progress((1 + i * repeats + r) / steps, desc=f"{METHODS[method].label}, seed {one_seed}")
                config = dataclasses.replace(base.config(method), seed=one_seed)
                view.runs.setdefault(method, []).append(generate_config(pair.target, pair.draft, prompt_ids, config, tick))
            yield view.outputs()
        if timed:  # AR again after the methods: a machine that drifted during the request shows in both
            progress((steps - repeats * coupled - 1) / steps, desc="AR baseline, again")
            view.ar.append(generate_config(pair.target, None, prompt_ids, base.config(AUTOREGRESSIVE, with_theory=False),
                                           tick))
        if coupled:
            leader = "spectr_gbv" if "spectr_gbv" in methods else next((m for m in methods if METHODS[m].exact), methods[0])
            for r, one_seed in enumerate(seeds):
                progress((steps - repeats + r) / steps, desc=f"coupled run, seed {one_seed} (same drafts and draws)")
                run = CoupledRun(dataclasses.replace(base.config(leader), seed=one_seed), methods, prompt_ids)
                for step in coupled_steps(pair.target, pair.draft, prompt_ids, methods, run.config):
                    tick(step)
                    run.steps.append(step)
                view.coupled_runs.append(run)
    except BudgetSpent as error:
        if not view.runs:
            raise
        view.stop = Stop(view.finished(), view.planned(), "runs", str(error))
    yield view.outputs(final=True)


def _ticker(budget: Budget):
    return lambda _record: budget.tick()


def _check_fits(pair, runs: list[tuple[int, int]], tokens: int, what: str, extra: int = 0) -> None:
    """Refuse up front what cannot fit: `runs` is (how many, L; 0 for AR) runs of `tokens` tokens each."""
    early = pair.target.eos_token_id is not None
    check_fits(sum(n * fewest_iterations(tokens, length, early) for n, length in runs) + extra, what)


# --------------------------------------------------------------------------------------- Sweep


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


@visitors.served(translate_error)
@gpu.on_gpu(gpu.sweep_cost)
@user_errors
def run_sweep(pair_key, prompt, methods, axis, values, num_drafts, draft_length, temperature, max_new_tokens, seed,
              repeats=1, progress=gr.Progress()):
    """Every method at every swept value, `repeats` seeds per point; streamed point by point, and
    when the budget stops it, the points that finished stay, with the header saying so."""
    pair, prompt_ids = _prepare(pair_key, prompt, progress)
    methods = check_methods(methods)
    base = settings(num_drafts, draft_length, temperature, max_new_tokens, seed)
    swept = parse_values(axis, values)
    repeats = number("repeats", repeats, 1, MAX_REPEATS)
    if len(methods) * len(swept) > LIMITS.sweep_runs:
        raise ValueError(f"{len(methods)} methods x {len(swept)} values = {len(methods) * len(swept)} runs is over this "
                         f"server's limit of {LIMITS.sweep_runs} (SPECTR_GBV_MAX_SWEEP_RUNS): fewer methods or values")
    for value in swept:  # every swept K x L must fit the memory limit too
        if axis in ("K", "L"):
            settings(value if axis == "K" else num_drafts, value if axis == "L" else draft_length, temperature,
                     max_new_tokens, seed)
    lengths = swept if axis == "L" else [base.draft_length] * len(swept)
    _check_fits(pair, [(len(set(swept)) if axis == "T" else 1, 0)] + [(len(methods) * repeats, int(v)) for v in lengths],
                base.max_new_tokens, f"{len(methods)} methods x {len(swept)} values x {repeats} seeds and AR, "
                f"{base.max_new_tokens} tokens each")
    extra = [f"{repeats} seeds ({base.seed} to {base.seed + repeats - 1})" if repeats > 1 else "",
             f"{base.max_new_tokens} tokens"]
    heading = functools.partial(header_line, pair.info.key, methods, base.num_drafts, base.draft_length, base.temperature,
                                base.seed, [e for e in extra if e], swept=axis)
    points, total, stop = [], len(methods) * len(swept), None
    progress(0, desc=f"{axis} = {swept[0]:g}")
    try:
        for row in iter_sweep(pair.target, pair.draft, prompt_ids, methods, axis, swept, base.config(methods[0]),
                              on_iteration=_ticker(Budget()), repeats=repeats):
            points.append(sweep_point(row))
            progress(len(points) / total, desc=f"{len(points)} / {total} points")
            if len(points) < total:
                yield (heading() + f"running: {len(points)} of {total} points done",
                       *sweep_band_figures(points, timed=not pair.words), _sweep_data(pair, axis, points, None))
    except BudgetSpent as error:
        if not points:
            raise
        stop = Stop(len(points), total, "points", str(error))
    yield heading(stop=stop), *sweep_band_figures(points, timed=not pair.words), _sweep_data(pair, axis, points, stop)


def _sweep_data(pair, axis, points, stop) -> dict:
    return {"pair": pair.info.key, "axis": axis, "rows": points, "stopped": stop.text() if stop else None}


# ------------------------------------------------------------------------------------ Fidelity

FIDELITY_CHUNKS = 5  # the law is compared (and shown) after every fifth of the runs


@visitors.served(translate_error)
@gpu.on_gpu(gpu.fidelity_cost)
@user_errors
def run_fidelity(pair_key, prompt, method, num_drafts, draft_length, temperature, num_runs, num_tokens,
                 progress=gr.Progress()):
    """N runs, compared with the exact law after every chunk of runs (streamed); when the budget stops
    it, the comparison over the runs that finished stays, with the header saying so."""
    pair, prompt_ids = _prepare(pair_key, prompt, progress)
    method = check_method(method)
    base = settings(num_drafts, draft_length, temperature, 1, 0)
    most = LIMITS.fidelity_runs if pair.words else LIMITS.fidelity_runs_llm
    variable = "SPECTR_GBV_MAX_FIDELITY_RUNS" + ("" if pair.words else "_LLM")
    runs = number(f"number of runs N (this server's limit for this pair: {variable})", num_runs, 10, most)
    tokens = number("tokens per run", num_tokens, 1, 3)
    _check_fits(pair, [(runs, 0 if method == AUTOREGRESSIVE else base.draft_length)], tokens,
                f"{runs} runs of {tokens} tokens, then the exact law", extra=1)
    budget = _ticker(Budget())  # both phases: the runs, then the exact law's scoring calls
    config = base.config(method, with_theory=False)
    heading = functools.partial(header_line, pair.info.key, [method], base.num_drafts, base.draft_length,
                                base.temperature, None, [f"N = {runs} runs (seeds 0 to {runs - 1})", f"first {tokens} token(s)"])
    samples, scored, result, stop = [], {}, None, None
    chunk = max(10, math.ceil(runs / FIDELITY_CHUNKS))
    try:
        while len(samples) < runs:
            for run_seed in range(len(samples), min(runs, len(samples) + chunk)):
                samples.append(fidelity_sample(pair.target, _draft_for(pair, method), prompt_ids, config, run_seed, tokens,
                                               budget))
            progress(len(samples) / runs, desc=f"{len(samples)} / {runs} runs, then the exact law")
            result = fidelity_result(pair.target, prompt_ids, config, samples, tokens, on_scoring=budget,
                                     conditionals=scored)
            if len(samples) < runs:
                yield heading() + f"running: {len(samples)} of {runs} runs compared", *_fidelity_outputs(pair, result, None)
    except BudgetSpent as error:
        if result is None:
            raise
        stop = Stop(result.num_runs, runs, "runs", str(error))
    yield heading(stop=stop), *_fidelity_outputs(pair, result, stop)


def _fidelity_outputs(pair, result, stop) -> tuple:
    outcome_text = [" ".join(repr(t)[1:-1] if t.strip() != t else t for t in pair.token_text(list(r.outcome)))
                    for r in result.rows]
    data = result.summary() | {"pair": pair.info.key, "stopped": stop.text() if stop else None, "outcomes": [
        {"tokens": text, "count": r.count, "empirical": r.empirical, "exact": r.exact} for text, r in zip(outcome_text, result.rows)]}
    return figures.fidelity_figure(result, outcome_text), data


# ------------------------------------------------------------------------------------------ UI


def build_demo(default_pair: str = DEFAULT_KEY, default_prompt: str = EXAMPLES[0][1]) -> gr.Blocks:
    """The whole app; the defaults let tests (and operators) open it on another pair."""
    with gr.Blocks(title="SpecTr-GBV Explorer") as demo:
        gr.Markdown("# SpecTr-GBV Explorer\nSpeculative decoding, one iteration at a time: "
                    "SD, RRS, SpecTr, GBV and SpecTr-GBV on real models, side by side.")
        gr.Markdown(LOSSY_NOTE, elem_classes=["lossy-note"])
        link_note = gr.Markdown(visible=False, elem_id="link-note")  # what a shared link could not set
        run_state = gr.State(None, time_to_live=LIMITS.state_seconds)
        with gr.Sidebar(open=True, width=320) as sidebar:
            pair = gr.Dropdown(PAIR_CHOICES, value=default_pair, label="Model pair",
                               allow_custom_value=LIMITS.allow_any_model,
                               info="Hub pairs need the Hugging Face Hub; the others work offline."
                               + (" This server also accepts 'TARGET, DRAFT' (hub ids or folders)." if LIMITS.allow_any_model else ""))
            method = gr.Dropdown(METHOD_CHOICES, value=DEFAULT_METHOD, label="Method (Generate, Fidelity)")
            num_drafts = gr.Slider(1, MAX_DRAFTS, value=2, step=1, label="K (drafts)",  # make bench: K = 2, L = 4 pays on a CPU
                                   info=caps.ignored_info(DEFAULT_METHOD, "K"), elem_id="num-drafts")
            draft_length = gr.Slider(1, caps.max_draft_length(2), value=4, step=1, label="L (draft length)",
                                     info=caps.draft_length_info(2, DEFAULT_METHOD), elem_id="draft-length")
            temperature = gr.Slider(0, MAX_TEMPERATURE, value=0.7, step=0.05, label="T (temperature)", info="0 = greedy")
            max_new_tokens = gr.Slider(1, MAX_NEW_TOKENS, value=40, step=1, label="Max new tokens")
            seed = gr.Number(value=0, precision=0, minimum=0, label="Seed", info="Same settings + seed = same tokens")
            methods = gr.CheckboxGroup(COMPARE_CHOICES, value=DEFAULT_COMPARE, label="Methods (Compare, Sweep)")
            presentation = gr.Checkbox(False, label="Presentation mode (larger text, for a projector)",
                                       elem_id="presentation-mode")
            link_controls = share.build_link_controls()
        prompt = gr.Textbox(label="Prompt", value=default_prompt, lines=2,
                            info="Toy world: words the cat dog sat ran on mat . | Two-token example: A B")
        with gr.Tabs(overflow_behavior="wrap", elem_id="main-tabs") as tabs:  # every tab visible by name
            with gr.Tab("Generate", id="generate"):
                with gr.Row():
                    generate_button = gr.Button("Generate", variant="primary", elem_id="generate-button", scale=3)
                    # secondary, not Gradio's red "stop": red means lossy, and nothing else, in this app
                    stop_button = gr.Button("Stop", variant="secondary", elem_id="stop-button", scale=1)
                output = gr.HTML("<i>The output appears here, token by token. Click a token to open its iteration "
                                 "in the explorer.</i>", elem_id="generate-output", js_on_load=OUTPUT_JS)
                metrics_md = gr.Markdown(elem_id="generate-metrics")
                how_to_read("generate")
                how_to_read("metrics")
                metrics = gr.JSON(label="Run data (block efficiency and acceptance are hardware-free; tokens/s is this server's)")
                # An example sets the pair and prompt, then runs Generate with the sidebar's settings (below).
                examples = gr.Examples(EXAMPLES, inputs=[pair, prompt], label="Examples (run with the sidebar's settings)")
            with gr.Tab("Iteration explorer", id="explorer"):
                with gr.Row(elem_id="explorer-controls"):
                    previous_button = gr.Button("◀ previous", size="sm", elem_id="explorer-previous", scale=0, min_width=110)
                    play_button = gr.Button("▶ Play", size="sm", elem_id="explorer-play", scale=0, min_width=100)
                    iteration = gr.Slider(1, 2, value=1, step=1, label="Iteration", interactive=False,
                                          elem_id="explorer-iteration",
                                          info="type a number, drag, or use the ← → keys (p / n) to step")
                    next_button = gr.Button("next ▶", size="sm", elem_id="explorer-next", scale=0, min_width=110)
                playing = gr.State(False)
                play_timer = gr.Timer(PLAY_SECONDS, active=False)
                # Grid (with its click-to-pin detail panel) and chart side by side down to a 1024 px screen.
                with gr.Row(elem_id="explorer-main", equal_height=False, elem_classes=["chart-row"]):
                    with gr.Column(scale=3, min_width=340):
                        grid = gr.HTML("<i>Generate something first: every iteration of the last run appears here.</i>",
                                       elem_id="draft-grid", js_on_load=GRID_JS, apply_default_css=False)
                    with gr.Column(scale=2, min_width=240):
                        distribution = gr.Plot(label="Distributions at the final position", elem_id="distribution-plot")
                how_to_read("explorer")
                iteration_json = gr.JSON(label="This iteration's acceptance tests")
            with gr.Tab("Compare", id="compare"):
                with gr.Row():
                    coupled = gr.Checkbox(value=True, label="Coupled: same drafts and same random draws for every verifier",
                                          info="Isolates the rule from sampling noise (charts); the texts and speedups are independent runs.")
                    compare_repeats = gr.Number(value=1, precision=0, minimum=1, maximum=MAX_REPEATS, label="Repeats (seeds)",
                                                info="seed, seed + 1, ...: the chart shows their mean and 95 % band",
                                                elem_id="compare-repeats")
                    compare_button = gr.Button("Compare", variant="primary", elem_id="compare-button")
                side_by_side = gr.HTML(elem_id="compare-outputs")
                with gr.Row(elem_classes=["chart-row"]):
                    efficiency_plot = gr.Plot(label="Block efficiency", elem_id="compare-efficiency")
                    histogram_plot = gr.Plot(label="Accepted-length histogram")
                with gr.Row(elem_classes=["chart-row"]):
                    position_plot = gr.Plot(label="Per-position acceptance")
                    calls_plot = gr.Plot(label="Target calls per token")
                with gr.Row(elem_classes=["chart-row"]):
                    speedup_plot = gr.Plot(label="Wall-clock speedup (hardware-dependent)")
                    theory_plot = gr.Plot(label="Theory against measured")
                how_to_read("compare")
                compare_json = gr.JSON(label="Compare data")
            with gr.Tab("Sweep", id="sweep"):
                with gr.Row():
                    axis = gr.Radio(list(AXES), value="K", label="Sweep over")
                    values = gr.Textbox(value="1, 2, 4, 8", label=caps.sweep_values_label(len(DEFAULT_COMPARE)),
                                        elem_id="sweep-values")
                    sweep_repeats = gr.Number(value=1, precision=0, minimum=1, maximum=MAX_REPEATS, label="Repeats (seeds)",
                                              info="seeds per point: mean and 95 % band", elem_id="sweep-repeats")
                    sweep_button = gr.Button("Sweep", variant="primary", elem_id="sweep-button")
                sweep_header = gr.Markdown(elem_id="sweep-header")
                with gr.Row(elem_classes=["chart-row"]):
                    sweep_efficiency = gr.Plot(label="Block efficiency")
                    sweep_speed = gr.Plot(label="Speedup vs AR (hardware-dependent)")
                how_to_read("sweep")
                sweep_json = gr.JSON(label="Sweep data")
            with gr.Tab("Fidelity", id="fidelity"):
                gr.Markdown("Runs the chosen method N times from the same prompt (seeds 0..N-1) and compares the law of "
                            "the first tokens with the target's exact law. Exact methods stay inside the sampling-noise "
                            "band; try the released SpecTr-GBV rule on the two-token example.")
                with gr.Row():
                    most_runs = caps.max_fidelity_runs(default_pair, DEFAULT_METHOD, 4, 3)
                    num_runs = gr.Slider(caps.FIDELITY_MIN_RUNS, most_runs, value=min(500, most_runs), step=1,
                                         label="Runs N", info=caps.fidelity_runs_info(most_runs), elem_id="fidelity-runs")
                    num_tokens = gr.Slider(1, 3, value=3, step=1, label="First tokens compared")
                    fidelity_button = gr.Button("Check fidelity", variant="primary", elem_id="fidelity-button")
                fidelity_header = gr.Markdown(elem_id="fidelity-header")
                fidelity_plot = gr.Plot(label="Empirical against exact law")
                how_to_read("fidelity")
                fidelity_json = gr.JSON(label="Fidelity data")
            controls = {"pair": pair, "prompt": prompt, "method": method, "K": num_drafts, "L": draft_length,
                        "T": temperature, "seed": seed}
            with gr.Tab("Lesson", id="lesson"):
                build_lesson(controls, tabs)
            with gr.Tab("Playground", id="playground"):
                build_playground()
            with gr.Tab("About", id="about"):
                gr.HTML((ASSETS / "speculative_iteration.svg").read_text(), elem_id="about-picture")
                gr.Markdown(about_markdown())

        share.wire(demo, tabs, link_note, controls, *link_controls)  # ?pair=toy&K=2&tab=compare restores them
        screens.wire(demo, sidebar)
        settings_inputs = [num_drafts, draft_length, temperature, max_new_tokens, seed]
        # The public events skip Gradio's preprocessing (preprocess=False): a value of any type
        # reaches components.settings, whose messages name the setting (Gradio's would be "Error").
        explorer_outputs = [grid, distribution, iteration_json]
        generating = generate_button.click(
            generate_stream, [pair, prompt, method, *settings_inputs],
            [output, metrics_md, metrics, run_state, iteration, *explorer_outputs],
            api_name="generate", concurrency_id="models", preprocess=False,
        )
        generate_outputs = [output, metrics_md, metrics, run_state, iteration, *explorer_outputs]
        from_example = examples.load_input_event.then(
            generate_stream, [pair, prompt, method, *settings_inputs], generate_outputs,
            concurrency_id="models", preprocess=False, api_visibility="private")
        # Stop ends this session's streaming run only (the session stays usable), and the explorer
        # shows the iterations decoded so far. Here the run sees the request at its next iteration
        # and ends itself; a run in a ZeroGPU worker cannot, so there the event is cancelled and
        # the explorer filled from the last stored state.
        if gpu.ON_ZEROGPU:
            stop_button.click(fill_explorer_on_stop, [run_state], [metrics_md, iteration, *explorer_outputs],
                              cancels=[generating, from_example], api_visibility="private")
        else:
            stop_button.click(ask_to_stop, None, None, queue=False, api_visibility="private")
        caps.cap_controls(pair, method, num_drafts, draft_length, methods, values, num_runs, num_tokens)
        # change, not release: typing a number, the arrow keys and a programmatic step all redraw the grid.
        iteration.change(show_iteration, [run_state, iteration], explorer_outputs, api_visibility="private",
                         trigger_mode="always_last")
        output.select(open_iteration, [run_state], [tabs, iteration, *explorer_outputs], api_visibility="private")
        play_button.click(toggle_play, [run_state, iteration, playing], [playing, play_timer, play_button, iteration],
                          api_visibility="private")
        play_timer.tick(play_tick, [run_state, iteration], [iteration, playing, play_timer, play_button, *explorer_outputs],
                        api_visibility="private")
        presentation.change(None, presentation, None, js=PRESENTATION_JS, api_visibility="private")
        previous_button.click(functools.partial(step_iteration, delta=-1), [run_state, iteration], [iteration, *explorer_outputs],
                              api_visibility="private")
        next_button.click(functools.partial(step_iteration, delta=1), [run_state, iteration], [iteration, *explorer_outputs],
                          api_visibility="private")
        compare_button.click(
            compare, [pair, prompt, methods, *settings_inputs, coupled, compare_repeats],
            [side_by_side, efficiency_plot, histogram_plot, position_plot, calls_plot, speedup_plot, theory_plot, compare_json],
            api_name="compare", concurrency_id="models", preprocess=False,
        )
        sweep_button.click(
            run_sweep, [pair, prompt, methods, axis, values, *settings_inputs, sweep_repeats],
            [sweep_header, sweep_efficiency, sweep_speed, sweep_json],
            api_name="sweep", concurrency_id="models", preprocess=False,
        )
        fidelity_button.click(
            run_fidelity, [pair, prompt, method, num_drafts, draft_length, temperature, num_runs, num_tokens],
            [fidelity_header, fidelity_plot, fidelity_json], api_name="fidelity", concurrency_id="models", preprocess=False,
        )
    return demo


def launch(demo: gr.Blocks, concurrency: int | None = None, queue_size: int | None = None,
           fairness: visitors.Fairness | None = None, **kwargs):
    """Serve, with at most `concurrency` model runs at once and `queue_size` waiting (components.visitors).

    Gradio's queue starts every request at once (a worker per slot and waiting place of the
    lines), and the lines decide whose turn it is. Memory is bounded: at most LIMITS.sessions
    sessions keep state, a run state lives LIMITS.state_seconds, uploads are refused, and
    /monitoring is off unless the operator turns it on."""
    fair = fairness or visitors.FAIR
    fair = visitors.configure(dataclasses.replace(fair, model_slots=concurrency or fair.model_slots,
                                                  model_waiting=queue_size or fair.model_waiting))
    return demo.queue(default_concurrency_limit=fair.gradio_workers, max_size=fair.gradio_workers).launch(
        theme=gr.themes.Soft(), css_paths=[ASSETS / "app.css"], footer_links=["api", "gradio"],
        allowed_paths=[], max_file_size=MAX_UPLOAD_BYTES, state_session_capacity=LIMITS.sessions,
        enable_monitoring=LIMITS.monitoring, max_threads=fair.gradio_workers + 8, **kwargs)


# On ZeroGPU the default pair is loaded (onto cuda) now, for ZeroGPU to pack and hand to its GPU workers.
gpu.at_start(lambda: get_pair(DEFAULT_KEY))

if __name__ == "__main__":
    launch(build_demo())
