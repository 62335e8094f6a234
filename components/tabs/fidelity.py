"""The Fidelity tab: N runs of one method from the same prompt, their law of the first tokens against the exact law."""

from __future__ import annotations

import functools
import math
from collections import Counter
from dataclasses import dataclass

import gradio as gr

import torch

from spectr_gbv import AUTOREGRESSIVE, METHODS
from spectr_gbv.bench.view import command_line, fidelity_rows
from spectr_gbv.bench.view import outcome_text as outcome_text_of
from spectr_gbv.exact import first_tokens_law_after, target_law_after, total_variation_to_target
from spectr_gbv.fidelity import fidelity_result, fidelity_sample, verdict
from spectr_gbv.pairs import PAIRS, TOY_KEY, TWO_TOKEN_KEY, get_pair, is_teaching
from spectr_gbv.probs import logits_to_probs
from spectr_gbv.toy import WORDS

from ..serving import gpu, visitors
from ..serving import limits
from ..serving.limits import BudgetSpent
from ..serving.request import FIDELITY
from ..wiring import stop_button
from ..wiring.admission import caps, cost, fix_buttons, pre_start
from ..wiring.downloads import download_components, wire_downloads
from ..render import figures
from ..render.chart_layout import method_label
from ..wiring.admission.budget_stops import Ticker, budget_stop, what_fits
from ..wiring.errors import translate_error, user_errors
from ..wiring.inputs import DEFAULT_METHOD, draft_for, prepare
from ..wiring.outputs import NamedOutputs, skip
from ..wiring.run_events import run_events
from ..wiring.runs import STOPS, header_line
from ..render.text import visible_token
from ..wiring import private
from ..wiring.settings import MAX_DRAFT_LENGTH, MAX_DRAFTS, check_method, check_pair_key, number, settings
from ..render.words import how_to_read

FIDELITY_CHUNKS = 5  # the law is compared (and shown) after every fifth of the runs
MAX_ENUMERATED_DRAFTS = 256  # the bias is computed exactly (known_bias) over at most this many K-tuples of drafts
MAX_ENUMERATED = 600  # ... per context, and this many over every context the law of the first tokens visits
# How the teaching pairs' laws depend on the context (spectr_gbv.exact.first_tokens_law_after's `state`): the
# two-token example's not at all, the Toy world's (a bigram world) on its last word only.
ENUMERABLE = {TWO_TOKEN_KEY: (lambda context: (), 1), TOY_KEY: (lambda context: context[-1:], len(WORDS))}
# The button that sets the example where the lossy rule fails visibly (`lossy_example`).
LOSSY_EXAMPLE = "Show the lossy rule"


@dataclass
class Checked(NamedOutputs):
    header: object = skip()
    figure: object = skip()
    data: object = skip()


@visitors.served(translate_error, FIDELITY, estimate=fix_buttons.line_estimate("fidelity"))
@gpu.on_gpu(gpu.fidelity_cost)
@user_errors
def run_fidelity(pair_key, prompt, method, num_drafts, draft_length, temperature, num_runs, num_tokens,
                 progress=gr.Progress(), request: gr.Request = None):
    """N runs, compared with the exact law after every chunk of runs (streamed); when the budget stops
    it, the comparison over the runs that finished stays, with the header saying so (before the
    first comparison: the runs so far, not compared, and what would fit). Stop ends it at its next
    step, the same way. Settings whose estimate does not fit the budget are refused before any model
    call (components.wiring.admission.pre_start)."""
    run = FIDELITY.request((pair_key, prompt, method, num_drafts, draft_length, temperature, num_runs, num_tokens))
    session = getattr(request, "session_hash", None)
    STOPS.take(session)  # a Stop pressed before this run does not end it
    key, method = check_pair_key(run.pair_key), check_method(run.method)
    base = settings(run.num_drafts, run.draft_length, run.temperature, 1, 0)
    most = limits.LIMITS.fidelity_runs if is_teaching(key) else limits.LIMITS.fidelity_runs_llm
    runs = number("number of runs N (this server's limit for this pair)", run.num_runs, 10, most)
    tokens = number("tokens per run", run.num_tokens, 1, caps.FIDELITY_MAX_TOKENS)
    pre_start.check(pre_start.Plan("fidelity", key, (method,), base.num_drafts, base.draft_length, 0, num_runs=runs,
                                   num_tokens=tokens))
    pair, prompt_ids = prepare(run.pair_key, run.prompt, progress)
    check_fidelity_fits(pair.info.key, method, base, runs, tokens)
    tick = Ticker(session=session)  # both phases: the runs, then the exact law's scoring calls
    config = base.config(method, with_theory=False)
    heading = functools.partial(header_line, pair.info.key, [method], base.num_drafts, base.draft_length,
                                base.temperature, None, [f"N = {runs} runs (seeds 0 to {runs - 1})", f"first {tokens} token(s)"])
    command = command_line("fidelity", pair.info.key, run.prompt, method=method, num_drafts=base.num_drafts,
                           draft_length=base.draft_length, temperature=base.temperature, runs=runs, tokens=tokens)
    table = functools.partial(fidelity_rows, pair.info.key, run.prompt, num_drafts=base.num_drafts,
                              draft_length=base.draft_length, temperature=base.temperature)
    samples, scored, result, stop = [], {}, None, None
    bias = known_bias(pair.info.key, method, base, tokens, prompt_ids)
    words = functools.partial(fidelity_verdict, pair.info.key, method, base, bias)
    chunk = max(10, math.ceil(runs / FIDELITY_CHUNKS))
    try:
        while len(samples) < runs:
            for run_seed in range(len(samples), min(runs, len(samples) + chunk)):
                samples.append(fidelity_sample(pair.target, draft_for(pair, method), prompt_ids, config, run_seed, tokens,
                                               tick))
            progress(len(samples) / runs, desc=f"{len(samples)} / {runs} runs, then the exact law")
            result = fidelity_result(pair.target, prompt_ids, config, samples, tokens, on_scoring=tick,
                                     conditionals=scored)
            if len(samples) < runs:
                yield Checked(heading() + band_note(words(result)) + f"running: {len(samples)} of {runs} runs compared",
                              *_outputs(pair, result, None, table, command, words(result)))
    except BudgetSpent as error:
        if result is None:  # nothing compared yet: the runs so far, and what would fit
            stop = budget_stop("fidelity", 0, runs, "runs compared", error, _nothing_compared(
                tick, pair.info.key, method, base.draft_length, runs, tokens, len(samples)))
            yield Checked(heading(stop=stop), None, _samples_data(pair, method, samples, tokens, stop))
            return
        stop = budget_stop("fidelity", result.num_runs, runs, "runs", error)
    yield Checked(heading(stop=stop) + band_note(words(result)), *_outputs(pair, result, stop, table, command,
                                                                           words(result)))


def known_bias(pair_key: str, method: str, base, tokens: int, prompt_ids=()) -> float | None:
    """The exact TV between this method's law of the first `tokens` tokens and the target's, where it is
    known: 0 for an exact rule (every pair: the registry's exactness, proven by enumeration in the tests);
    for a lossy rule, computed by enumeration (spectr_gbv.exact) on a teaching pair (`ENUMERABLE`)
    after `prompt_ids` where every context's draft K-tuples are at most MAX_ENUMERATED_DRAFTS and all
    of them at most MAX_ENUMERATED. None elsewhere (`bias_unknown_because` says why)."""
    spec = METHODS.get(method)
    if spec is None or spec.exact:
        return 0.0
    if bias_unknown_because(pair_key, method, base):
        return None
    return _enumerated_bias(pair_key, method, base.num_drafts if spec.multi_draft else 1, base.draft_length, tokens,
                            float(base.temperature), tuple(prompt_ids))


def bias_unknown_because(pair_key: str, method: str, base) -> str:
    """Why a lossy rule's exact bias is not computed here ("" where it is)."""
    spec = METHODS.get(method)
    if spec is None or spec.exact:
        return ""
    if pair_key not in ENUMERABLE:
        return "a model pair's law cannot be enumerated"
    k = base.num_drafts if spec.multi_draft else 1
    tuples = PAIRS[pair_key].vocabulary ** (k * base.draft_length)
    states = ENUMERABLE[pair_key][1]
    if tuples > MAX_ENUMERATED_DRAFTS or tuples * states > MAX_ENUMERATED:
        return (f"{tuples:,} draft tuples at K = {k}, L = {base.draft_length}, too many to enumerate here; a "
                "smaller K or L is computed")
    return ""


@functools.lru_cache(maxsize=64)
def _enumerated_bias(pair_key: str, method: str, num_drafts: int, draft_length: int, tokens: int, temperature: float,
                     prompt_ids: tuple[int, ...]) -> float:
    pair = get_pair(pair_key)

    def processed(model):
        return lambda context: logits_to_probs(torch.log(model.next_token_probs(list(context))).double(),
                                               temperature)

    target, draft = processed(pair.target), processed(pair.draft)
    state = ENUMERABLE[pair_key][0]
    law = first_tokens_law_after(METHODS[method], target, draft, num_drafts, draft_length, tokens, prompt_ids, state)
    return total_variation_to_target(law, target_law_after(target, tokens, prompt_ids))


def fidelity_verdict(pair_key: str, method: str, base, bias: float | None, result):
    """The verdict on a result (spectr_gbv.fidelity.verdict): an exact rule's measured TV as noise against its band,
    a lossy rule's exact TV where known, else what this N can and cannot detect."""
    spec = METHODS.get(method)
    exact_rule = spec is None or spec.exact  # plain decoding samples the target itself
    label = method_label(method)
    return verdict(result, label, exact_rule, bias, bias_unknown_because(pair_key, method, base))


def band_note(words) -> str:
    """The header's line of the verdict (its note), a paragraph of its own."""
    return f"{words.note}\n\n" if words is not None else ""


def _nothing_compared(tick, pair_key, method, draft_length, runs: int, tokens: int, done: int) -> str:
    """What would fit: N runs' expected iterations and the exact law's scoring calls (cost.scoring_bound)."""
    length = 0 if method == AUTOREGRESSIVE else draft_length

    def steps(n: int) -> float:
        return cost.expected_steps([(n, length)], tokens, pair_key) + cost.scoring_bound(pair_key, n, tokens)

    return what_fits(tick, "no comparison with the exact law", "run", steps, runs - 1, least=caps.FIDELITY_MIN_RUNS,
                     so_far=f"{done} of {runs} runs had finished", otherwise=": fewer tokens compared, or a teaching pair")


def _samples_data(pair, method: str, samples: list, tokens: int, stop) -> dict:
    """The runs a budget stopped before their first comparison: their outcomes counted, no exact law."""
    counts = Counter(samples).most_common()
    return {"method": method, "runs": len(samples), "tokens": tokens, "pair": pair.info.key, "compared": False,
            "stopped": stop.text(), "outcomes": [
                {"tokens": _outcome_text(pair, outcome), "count": count, "empirical": count / len(samples)}
                for outcome, count in counts]}


def _outcome_text(pair, outcome) -> str:
    return " ".join(visible_token(t) for t in pair.spelled(list(outcome)))


def check_fidelity_fits(pair_key, method, base, runs: int, tokens: int) -> None:
    """Refuse, before any run, an N over what this pair's estimate fits (caps.max_fidelity_runs, the slider's cap)."""
    most = caps.max_fidelity_runs(pair_key, method, base.draft_length, tokens, num_drafts=base.num_drafts)
    if runs > most:
        seconds = cost.fidelity_seconds(pair_key, method, base.num_drafts, base.draft_length, runs, tokens)
        raise ValueError(
            f"N = {runs} runs of {tokens} token(s) is over what fits this request's budget on this pair (at most "
            f"{most}: {limits.LIMITS.iterations} decoding iterations and "
            f"{limits.LIMITS.seconds} s per request; estimated {cost.about(seconds)}), so it was not "
            "started: lower N or the tokens compared")


def _outputs(pair, result, stop, table=None, command=None, words=None) -> tuple:
    """(figure, data) of a fidelity result; with `table` (rows from the result) and `command`, the data carries
    what the downloads offer (components.wiring.downloads); `words`, the verdict, titles the figure."""
    outcome_text = [_outcome_text(pair, r.outcome) for r in result.rows]
    said = {} if words is None else {"verdict": words.title, "verdict_line": words.line}
    data = result.summary() | said | {"pair": pair.info.key, "stopped": stop.text() if stop else None, "outcomes": [
        {"tokens": text, "count": r.count, "empirical": r.empirical, "exact": r.exact} for text, r in zip(outcome_text, result.rows)]}
    if table is not None:
        data |= {"table": table(result, [outcome_text_of(pair, r.outcome) for r in result.rows]), "command": command}
    return figures.fidelity_figure(result, outcome_text, words), data


def default_runs(pair_key, method=DEFAULT_METHOD, num_drafts=2, draft_length=4, tokens=3) -> int:
    """N when the page opens (or the pair changes): what the estimate fits in cost.DEFAULT_FRACTION of the budget."""
    most = min(cost.FIDELITY_DEFAULT_RUNS, caps.max_fidelity_runs(pair_key, method, draft_length, tokens,
                                                                   num_drafts=num_drafts))
    return max(caps.FIDELITY_MIN_RUNS, cost.fidelity_runs(pair_key, method, num_drafts, draft_length, tokens,
                                                           cost.DEFAULT_FRACTION, most))


def runs_for_pair(pair_key, method, draft_length, num_tokens, num_drafts):
    """Fidelity's N slider when the pair changes: that pair's own default N at these settings (not the
    previous pair's N, which for a small one was too few to see the released rule's bias), and its cap."""
    key, method = check_pair_key(pair_key), check_method(method)
    length = number("L (draft length)", draft_length, 1, MAX_DRAFT_LENGTH)
    tokens = number("tokens per run", num_tokens, 1, caps.FIDELITY_MAX_TOKENS)
    k = number("K (drafts)", num_drafts, 1, MAX_DRAFTS)
    most = caps.max_fidelity_runs(key, method, length, tokens, num_drafts=k)
    return gr.update(maximum=most, value=min(default_runs(key, method, k, length, tokens), most),
                     info=caps.fidelity_runs_info(most))


@dataclass
class FidelityTab:
    num_runs: gr.Slider
    num_tokens: gr.Slider
    button: gr.Button
    outputs: dict[str, gr.components.Component]  # by the names run_fidelity's outputs carry
    downloads: tuple = ()  # (files, command), made from the data after each run (components.wiring.downloads)
    stop: gr.Button | None = None  # ends the run at its next step (components.wiring.stop_button)
    fixes: fix_buttons.FixRow | None = None  # the pre-start check's note and one-click fixes
    lossy: gr.Button | None = None  # sets the two-token example where the lossy rule fails visibly, and runs it


def build(page, default_pair: str) -> None:
    with gr.Tab("Fidelity", id="fidelity"):
        gr.Markdown("Runs the chosen method N times from the same prompt (seeds 0..N-1) and compares the law of "
                    "the first tokens with the target's exact law. Exact methods stay inside the sampling-noise "
                    "band; try the released SpecTr-GBV rule on the two-token example (the button below sets it up).")
        with gr.Row():
            most_runs = caps.max_fidelity_runs(default_pair, DEFAULT_METHOD, 4, 3)
            num_runs = gr.Slider(caps.FIDELITY_MIN_RUNS, most_runs, value=default_runs(default_pair), step=1,
                                 label="Runs N", info=caps.fidelity_runs_info(most_runs), elem_id="fidelity-runs")
            num_tokens = gr.Slider(1, caps.FIDELITY_MAX_TOKENS, value=caps.FIDELITY_MAX_TOKENS, step=1,
                                   label="First tokens compared")
            button = gr.Button("Check fidelity", variant="primary", elem_id="fidelity-button")
            stop = stop_button.build("fidelity")
        lossy = gr.Button(LOSSY_EXAMPLE, variant="secondary", size="sm", elem_id="fidelity-lossy-example")
        fixes = fix_buttons.build("fidelity")
        header = gr.Markdown(elem_id="fidelity-header")
        figure = gr.Plot(label="Empirical against exact law", elem_id="fidelity-figure",
                         show_label=False)  # its title names it; the label sat over the title
        how_to_read("fidelity")
        files, command = download_components("fidelity")
        data = gr.JSON(label="Fidelity data")
    page.tab_handles.fidelity = FidelityTab(num_runs, num_tokens, button, outputs=dict(header=header, figure=figure,
                                                                                         data=data),
                                            downloads=(files, command), stop=stop, fixes=fixes, lossy=lossy)


def wire_events(page) -> None:
    tab, s = page.tab_handles.fidelity, page.sidebar
    private.on(s.pair.change, runs_for_pair, [s.pair, s.method, s.draft_length, tab.num_tokens, s.num_drafts],
               tab.num_runs, queue=False, show_progress="hidden")
    run = run_events(tab.button.click, tab.button, run_fidelity,
                     [s.pair, page.prompt, s.method, s.num_drafts, s.draft_length, s.temperature, tab.num_runs,
                      tab.num_tokens],
                     tab.outputs, message="header", clear=("figure", "data"), api_name="fidelity",
                     concurrency_id="models", preprocess=False)
    wire_downloads(run, tab.outputs["data"], *tab.downloads)
    stop_button.wire(tab.stop, tab.button, run)
    fix_buttons.wire(tab.fixes, dict(pair_key=s.pair, method=s.method, num_drafts=s.num_drafts,
                                     draft_length=s.draft_length, num_runs=tab.num_runs, num_tokens=tab.num_tokens),
                     dict(num_runs=tab.num_runs, num_tokens=tab.num_tokens, draft_length=s.draft_length,
                          num_drafts=s.num_drafts), tab.button)
    wire_lossy_example(page)


def lossy_example() -> dict:
    """What "Show the lossy rule" sets, by control name: the two-token example, the released rule, K = 1, L = 2, T = 1,
    the first 3 tokens, and an N whose noise band is narrower than the rule's exact TV there (the lesson's step 5)."""
    from . import lesson_try  # it imports this module

    return dict(lesson_try.try_its()[lesson_try.RELEASED_STEP].values)


def wire_lossy_example(page) -> None:
    """The button sets the example's values (the sidebar's pair, prompt, method, K, L, T, and N and the tokens
    compared), then presses Check fidelity in the page: the run is the tab's own."""
    from . import lesson_try
    from .lesson import PRESS_JS

    tab = page.tab_handles.fidelity
    plan = lesson_try.try_its()[lesson_try.RELEASED_STEP]
    controls = lesson_try.controls(page)
    event = tab.lossy.click(lambda: lesson_try.updates(plan), None, [controls[name] for name in plan.values],
                            api_visibility="private", queue=False)
    event.then(None, None, None, js=PRESS_JS.format(button="fidelity-button"), api_visibility="private")
