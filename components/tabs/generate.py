"""The Generate tab: one method's output streamed iteration by iteration, tokens coloured by provenance.

When the run ends (or the budget or Stop ends it) the session's RunState holds it and the
explorer shows its first iteration."""

from __future__ import annotations

import time
from dataclasses import dataclass

import gradio as gr

from spectr_gbv.engine import decode_iterations, run_record
from spectr_gbv.models import server_note
from spectr_gbv.models.compiled import serving_mode
from spectr_gbv.pairs import is_teaching

from ..serving import gpu, visitors
from ..serving.limits import Budget, BudgetSpent
from ..serving.request import GENERATE
from . import explorer
from ..wiring import private
from ..wiring.admission import fix_buttons, pre_start
from ..wiring.admission.budget_stops import budget_stop
from ..wiring.errors import translate_error, user_errors
from ..wiring.explorer_js import OUTPUT_JS
from ..wiring.inputs import DEFAULT_K, DEFAULT_L, DEFAULT_METHOD, DEFAULT_T, DEFAULT_TOKENS, EXAMPLES, draft_for, prepare
from ..wiring.outputs import NamedOutputs, skip
from ..wiring.run_events import back_to_idle, run_events
from ..wiring.run_state import RunState
from ..wiring.runs import PRESSED_STOP, STOPS, Stop, header_line, ignored_settings, method_name
from ..wiring.settings import check_method, check_pair_key, number, settings
from ..render.text import UNTIMED_NOTE, metrics_line, output_text, provenance_html
from ..render.words import how_to_read


UPDATE_EVERY_S = 0.1  # streamed updates are coalesced to at most one per this (the last one always comes)


@dataclass
class Generated(NamedOutputs):
    output: object = skip()  # the text, coloured by provenance
    metrics_line: object = skip()
    data: object = skip()  # the run's summary (JSON)
    state: object = skip()  # the session's RunState
    iteration: object = skip()  # the explorer's slider
    grid: object = skip()
    figure: object = skip()
    details: object = skip()


@dataclass
class Refilled(NamedOutputs):
    metrics_line: object = skip()
    iteration: object = skip()
    grid: object = skip()
    figure: object = skip()
    details: object = skip()


def _add_display_strings(texts: dict[int, str], it, token_text) -> dict[int, str]:
    """Add the display strings of every token id the explorer can show for iteration `it` (drafts, final, top list)."""
    ids = {it.final_token, *(top.token for top in it.final_top), *(t for row in it.draft_tokens for t in row)}
    new = sorted(ids - texts.keys())
    texts.update(zip(new, token_text(new)) if new else ())
    return texts


@visitors.served(translate_error, GENERATE, estimate=fix_buttons.line_estimate("generate"))
@gpu.on_gpu(gpu.generate_cost)
@user_errors
def generate_stream(pair_key, prompt, method, num_drafts, draft_length, temperature, max_new_tokens, seed,
                    progress=gr.Progress(), request: gr.Request = None):
    """Stream the output iteration by iteration; at the end, or when the budget or Stop ends it, fill the explorer.

    Every step also stores the run so far (run_state), so a Stop that cancels the run (ZeroGPU)
    can fill the explorer from it."""
    run = GENERATE.request((pair_key, prompt, method, num_drafts, draft_length, temperature, max_new_tokens, seed))
    session = getattr(request, "session_hash", None)
    STOPS.take(session)  # a Stop pressed before this run does not end it
    method = check_method(run.method)
    base = settings(*run.settings_values())
    pre_start.check(pre_start.Plan("generate", check_pair_key(run.pair_key), (method,), base.num_drafts,
                                   base.draft_length, base.max_new_tokens))  # before any model call
    pair, prompt_ids = prepare(run.pair_key, run.prompt, progress)
    config = base.config(method)
    heading = {"pair_key": pair.info.key, "methods": [method], "num_drafts": base.num_drafts,
               "draft_length": base.draft_length, "temperature": base.temperature, "seed": base.seed,
               "served": serving_mode(pair.target)}  # read as the run starts: its sessions keep that mode
    iterations, produced, budget, texts, stop = [], 0, Budget(), {}, None
    shown = time.monotonic()  # when the output was last updated (the first update after UPDATE_EVERY_S)
    timed = not pair.info.teaching  # the teaching pairs are lookup tables: their timings mean nothing
    progress(0, desc="decoding")
    try:
        for it in decode_iterations(pair.target, draft_for(pair, method), prompt_ids, config):
            budget.tick()
            iterations.append(it)
            produced += len(it.emitted)
            _add_display_strings(texts, it, pair.token_text)
            if time.monotonic() - shown >= UPDATE_EVERY_S:  # at most ~10 updates a second: each is drawn and sent
                progress(produced / config.max_new_tokens, desc=f"{produced} / {config.max_new_tokens} tokens")
                partial = run_record(config, prompt_ids, iterations, pair.target.eos_token_id)
                state = RunState(pair.info.key, partial, texts, heading, config.max_new_tokens)
                yield Generated(output=provenance_html(partial, pair.spelled),
                                metrics_line=header_line(**heading) + metrics_line(partial, timed), state=state)
                shown = time.monotonic()
            reason = STOPS.take(session)
            if reason:
                stop = Stop(produced, config.max_new_tokens, "tokens", reason)
                break
    except BudgetSpent as error:  # raised by the tick after an iteration: `it` has finished
        if not iterations:  # the first iteration ran past the budget: it is what finished, so it is shown
            iterations.append(it)
            produced = len(it.emitted)
            _add_display_strings(texts, it, pair.token_text)
        stop = budget_stop("generate", produced, config.max_new_tokens, "tokens", error)
    record = run_record(config, prompt_ids, iterations, pair.target.eos_token_id)
    state = RunState(pair.info.key, record, texts, heading, config.max_new_tokens,
                     output_text(pair.spelled([token for it in record.iterations for token in it.emitted])))
    summary = record.summary() | ({} if timed else {"wall_time_s": UNTIMED_NOTE, "tokens_per_second": UNTIMED_NOTE})
    summary |= {"pair": state.pair, "text": pair.text(record.tokens),
                                  "stopped": stop.text() if stop else None, "server": server_note(pair.target)}
    yield Generated(provenance_html(record, pair.spelled), header_line(**heading, stop=stop) + metrics_line(record, timed),
                    summary, state, *explorer.start(state))


def plan_line(method, num_drafts, draft_length, temperature, max_new_tokens) -> str:
    """One line beside the button: what Generate will run with the sidebar's current settings (the
    settings the method ignores left out)."""
    method = check_method(method)
    base = settings(num_drafts, draft_length, temperature, max_new_tokens, 0)
    ignored = ignored_settings([method])
    parts = [f"{name} = {value}" for name, value in (("K", base.num_drafts), ("L", base.draft_length))
             if name not in ignored]
    parts += [f"T = {base.temperature:g}", f"{base.max_new_tokens} new tokens"]
    return f"Generate runs **{method_name(method)}**, {', '.join(parts)} (the sidebar's settings)"


def load_example(index) -> tuple[dict, dict]:
    """A click on an example: its pair and prompt into the sidebar (the dataset sends the example's index)."""
    pair_key, prompt = EXAMPLES[number("the example", index, 0, len(EXAMPLES) - 1)]
    return gr.update(value=pair_key), gr.update(value=prompt)


def ask_to_stop(request: gr.Request = None):
    """Stop: this session's streaming run ends at its next iteration, with the explorer filled."""
    STOPS.ask(getattr(request, "session_hash", None))


def fill_explorer_on_stop(state) -> Refilled:
    """After Stop: the explorer gets the iterations decoded so far, and the metrics line says where it stopped."""
    if not state:
        return Refilled(gr.skip(), gr.skip(), *explorer.shown(state, 1))
    stop = Stop(len(state.record.tokens), state.total, "tokens", PRESSED_STOP)
    timed = not is_teaching(state.pair)
    return Refilled(header_line(**state.heading, stop=stop) + metrics_line(state.record, timed), *explorer.start(state))


@dataclass
class GenerateTab:
    button: gr.Button
    stop_button: gr.Button
    output: gr.HTML
    metrics_line: gr.Markdown
    data: gr.JSON
    examples: gr.Dataset
    plan: gr.Markdown  # what the button will run
    fixes: fix_buttons.FixRow | None = None  # the pre-start check's note and one-click fixes


def build(page) -> None:
    with gr.Tab("Generate", id="generate"):
        with gr.Row():
            button = gr.Button("Generate", variant="primary", elem_id="generate-button", scale=3)
            # secondary, not Gradio's red "stop": red means lossy, and nothing else, in this app
            stop_button = gr.Button("Stop", variant="secondary", elem_id="stop-button", scale=1)
        plan = gr.Markdown(plan_line(DEFAULT_METHOD, DEFAULT_K, DEFAULT_L, DEFAULT_T, DEFAULT_TOKENS),
                           elem_id="generate-plan")
        fixes = fix_buttons.build("generate")
        output = gr.HTML("<i>The output appears here, token by token. Click a token to open its iteration "
                         "in the explorer.</i>", elem_id="generate-output", js_on_load=OUTPUT_JS)
        line = gr.Markdown(elem_id="generate-metrics")
        how_to_read("generate")
        how_to_read("metrics")
        data = gr.JSON(label="Run data (block efficiency and acceptance are hardware-free; tokens/s is this server's)")
        # An example sets the pair and prompt, then runs Generate with the sidebar's settings (wire_events).
        # A dataset and an event of our own, not gr.Examples: its event is callable over the API and
        # preprocessed by Gradio, which answers junk with a traceback (components.wiring.private).
        # Gradio cuts a Textbox's example at 60 characters ("... whether a number is pri..."); a Dropdown's
        # example shows its choice's label whole, so the prompts are shown through one, never on the page.
        prompts = gr.Dropdown([(text, text) for _, text in EXAMPLES], render=False)
        examples = gr.Dataset(components=[page.sidebar.pair, prompts], samples=EXAMPLES, elem_id="generate-examples",
                              label="Examples (run with the sidebar's settings)")
    page.tab_handles.generate = GenerateTab(button, stop_button, output, line, data, examples, plan, fixes)


def wire_events(page) -> None:
    tab: GenerateTab = page.tab_handles.generate
    view: explorer.ExplorerTab = page.tab_handles.explorer
    s = page.sidebar
    inputs = [s.pair, page.prompt, s.method, *page.settings_inputs]
    outputs = {"output": tab.output, "metrics_line": tab.metrics_line, "data": tab.data, "state": page.run_state,
               "iteration": view.iteration, **view.panels()}
    # The public events skip Gradio's preprocessing (preprocess=False): a value of any type
    # reaches components.wiring.settings, whose messages name the setting (Gradio's would be "Error").
    # The button reads "Running…" and is disabled while a run goes; a failed run's message replaces
    # the text, the metrics line and the data (components.wiring.run_events).
    plan_inputs = [s.method, s.num_drafts, s.draft_length, s.temperature, s.max_new_tokens]
    for control in plan_inputs:
        private.on(control.change, plan_line, plan_inputs, tab.plan, queue=False, show_progress="hidden")
    failed = dict(message="output", clear=("metrics_line", "data"))
    generating = run_events(tab.button.click, tab.button, generate_stream, inputs, outputs, **failed,
                            api_name="generate", concurrency_id="models", preprocess=False)
    example = private.on(tab.examples.click, load_example, tab.examples, [s.pair, page.prompt], queue=False,
                         show_progress="hidden")
    from_example = run_events(example.then, tab.button, generate_stream, inputs, outputs, **failed,
                              concurrency_id="models", preprocess=False, api_visibility="private")
    sidebar = dict(pair_key=s.pair, method=s.method, num_drafts=s.num_drafts, draft_length=s.draft_length,
                   max_new_tokens=s.max_new_tokens)
    fix_buttons.wire(tab.fixes, sidebar, {name: sidebar[name] for name in fix_buttons.FIXABLE["generate"]},
                     tab.button)
    # Stop ends this session's streaming run only (the session stays usable), and the explorer
    # shows the iterations decoded so far. Here the run sees the request at its next iteration
    # and ends itself; a run in a ZeroGPU worker cannot, so there the event is cancelled and
    # the explorer filled from the last stored state.
    if gpu.ON_ZEROGPU:
        refilled = {"metrics_line": tab.metrics_line, "iteration": view.iteration, **view.panels()}
        stopped = private.on(tab.stop_button.click, fill_explorer_on_stop, [page.run_state], refilled,
                             cancels=[generating, from_example])
        back_to_idle(stopped.then, tab.button)
    else:
        private.on(tab.stop_button.click, ask_to_stop, None, None, queue=False)
