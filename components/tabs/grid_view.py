"""The Grid tab: a K x L grid at one T in one run, the app's form of the README's frontier table.

At every (K, L), one coupled run per prompt (`spectr_gbv.bench.frontier.measure`: the same drafts
and draws for every rule, seeds 0, 1, ... one per prompt of the frontier's prompt set), then a
heatmap of the best exact rule's E[tau | drafts] or of one rule's gain over another, each cell named
by its rule, the paired 95 % intervals on hover, "~" where the best ties the runner-up, "=" where it
shows no gain over the baseline, and a grey veil where too few prompts rank the rules
(`spectr_gbv.bench.grid_cells`, `components.render.kl_heatmap`). The grid is sized by the cost estimate before it starts
(`components.wiring.admission.grid_size`), streams a frame per configuration, and stops with Generate's
Stop. Its downloads are the cells it drew; the commands under it (`python -m
spectr_gbv.bench.frontier ...`, then `python -m spectr_gbv.bench.grid_cells ...`) make the same
rows and print the same cells.
"""

from __future__ import annotations

import functools
import shlex
import statistics
from dataclasses import dataclass

import gradio as gr

from spectr_gbv import METHODS
from spectr_gbv.bench import frontier
from spectr_gbv.bench.grid_cells import BEST, CELL_VALUES, DEFAULT_BASELINE, EXPECTED, cell_row, grid_cells
from spectr_gbv.bench.grid_cells import prompts_to_rank as cell_prompts_to_rank
from spectr_gbv.pairs import get_pair, is_teaching, pair_key_of

from ..render.chart_layout import MIN_WIDTH
from ..render.kl_heatmap import kl_heatmap
from ..render.words import how_to_read
from ..serving import gpu, limits, visitors
from ..serving.limits import Budget, BudgetSpent, check_prompt_tokens
from ..serving.request import GRID
from ..wiring import private
from ..wiring.admission import grid_size
from ..wiring.admission.budget_stops import budget_stop
from ..wiring.downloads import download_components, wire_downloads
from ..wiring.errors import translate_error, user_errors
from ..wiring.inputs import LOADING_NOTE, check_runs_fit, clamp_in_page, default_compare
from ..wiring.outputs import NamedOutputs, skip
from ..wiring.run_events import back_to_idle, run_events
from ..wiring.runs import STOPS, Stop, pair_label
from ..wiring.settings import (MAX_DRAFT_LENGTH, MAX_DRAFTS, MAX_NEW_TOKENS, MAX_TEMPERATURE, check_choice,
                               check_methods, check_pair_key, number, settings, shown)
from . import generate, grid_saved

OUT_FOLDER = "kl-grid"  # where the shown command writes frontier.json and frontier.md
MIN_PROMPTS = 2  # a paired interval needs two prompts
CELL_CHOICES = [("Best exact rule's E[tau | drafts]", EXPECTED), ("Gain of a rule over a baseline", "gain")]


def exact_rules() -> list[str]:
    return [name for name, spec in METHODS.items() if spec.exact]


def rule_choices() -> list[tuple[str, str]]:
    return [("the best exact rule in each cell", BEST)] + [(METHODS[m].label, m) for m in exact_rules()]


def baseline_choices() -> list[tuple[str, str]]:
    return [(METHODS[m].label, m) for m in exact_rules()]


def parse_sizes(name: str, values, high: int) -> list[int]:
    """K or L values: text such as '1 2 4' (or '1, 2, 4') or a list of whole numbers, each in [1, high]."""
    if isinstance(values, (list, tuple)):
        parts = list(values)
    elif isinstance(values, str):
        parts = values.replace(",", " ").replace(";", " ").split()
    else:
        raise ValueError(f"the {name} values must be text such as '1 2 4', got {type(values).__name__} {shown(values)}")
    if not parts:
        raise ValueError(f"give the {name} values, for example 1 2 4")
    if len(parts) > grid_size.MOST_VALUES:
        raise ValueError(f"at most {grid_size.MOST_VALUES} {name} values, got {len(parts)}")
    return sorted({number(f"a {name} value", part, 1, high) for part in parts})


def check_rule(name: str, value, allow_best: bool) -> str:
    """A rule of the grid: an exact rule (the lossy one has no E[tau | drafts]), or "best" where allowed."""
    allowed = ([BEST] if allow_best else []) + exact_rules()
    if value in METHODS and not METHODS[value].exact:
        raise ValueError(f"the {name} must be an exact rule: {METHODS[value].label} has no E[tau | drafts] "
                         f"(choose one of: {', '.join(allowed)})")
    return check_choice(f"the {name}", value, allowed)


def measured_rules(ticked: list[str], rule: str, baseline: str) -> list[str]:
    """The rules the grid runs: the ticked exact ones with the rule and the baseline, in the registry's order."""
    wanted = {m for m in ticked if METHODS[m].exact} | {baseline} | ({rule} if rule != BEST else set())
    return [m for m in METHODS if m in wanted]


def command_line(pair_key: str, prompts: int, drafts, lengths, temperature: float, methods, tokens: int,
                 cell_value: str, rule: str, baseline: str) -> str:
    """Two commands: the frontier run that makes this grid's rows (written to OUT_FOLDER/frontier.json), then the
    cells of those rows, printed as the rows the downloads offer."""
    run = ["python -m spectr_gbv.bench.frontier", "--pair", shlex.quote(pair_key), "--prompts", str(prompts),
           "--drafts", *map(str, drafts), "--lengths", *map(str, lengths), "--temperatures", repr(float(temperature)),
           "--methods", *methods, "--max-new-tokens", str(tokens), "--out", OUT_FOLDER]
    cells = ["python -m spectr_gbv.bench.grid_cells", f"{OUT_FOLDER}/frontier.json", "--value", cell_value, "--rule",
             rule, "--baseline", baseline]
    return " ".join(run) + "\n" + " ".join(cells)


@dataclass
class Gridded(NamedOutputs):
    header: object = skip()  # what ran, how far it got, the estimate
    heatmap: object = skip()
    data: object = skip()  # the cells, the frontier rows, the table the downloads offer, the command


class StopPressed(Exception):
    """The visitor pressed Stop: the grid ends after the coupled step in progress."""


@dataclass
class GridPlan:
    pair_key: str
    drafts: list[int]
    lengths: list[int]
    temperature: float
    prompts: int
    tokens: int
    methods: list[str]
    cell_value: str
    rule: str
    baseline: str

    @property
    def configurations(self) -> list[tuple[int, int]]:
        return [(k, length) for k in self.drafts for length in self.lengths]

    def command(self) -> str:
        return command_line(self.pair_key, self.prompts, self.drafts, self.lengths, self.temperature, self.methods,
                            self.tokens, self.cell_value, self.rule, self.baseline)

    def header(self, done: int, estimate: str, stop: Stop | None = None, note: str = "") -> str:
        leader = METHODS[frontier.leader_of(self.methods)].label  # its tokens advance the shared context
        prompt_set = ("the teaching prompts" if is_teaching(self.pair_key)
                      else "the paper suite, its five families in turn")
        line = (f"**{pair_label(self.pair_key)}** · K {', '.join(map(str, self.drafts))} x L "
                f"{', '.join(map(str, self.lengths))} · T = {self.temperature:g} · {self.prompts} prompts of "
                f"{prompt_set}, seeds 0 to {self.prompts - 1}, {self.tokens} tokens each · coupled runs of "
                f"{', '.join(METHODS[m].label for m in self.methods)} (drafts from {leader}) · estimate {estimate}")
        total = len(self.configurations)
        if stop is not None:
            line += f"  \n**{stop.text()}**. The configurations that finished are shown."
        elif done < total:
            line += f"  \nrunning: {done} of {total} configurations done"
        return line + (f"  \n{note}" if note else "")

    def outputs(self, rows: list[dict], done: int, estimate: str, stop: Stop | None = None, note: str = "",
                final: bool = False) -> Gridded:
        cells = grid_cells(rows, self.cell_value, self.rule, self.baseline, self.temperature) if rows else []
        table = [{"view": "grid", "pair": self.pair_key, **cell_row(c, self.cell_value),
                  "max_new_tokens": self.tokens, "seeds": f"0-{self.prompts - 1}",
                  **{f"expected_accepted_{m}": v for m, v in c.values.items()}} for c in cells]
        data = frontier.without_nan({
            "pair": self.pair_key, "T": self.temperature, "drafts": self.drafts, "lengths": self.lengths,
            "prompts": self.prompts, "prompt_texts": frontier.prompt_texts(self.pair_key, self.prompts),
            "max_new_tokens": self.tokens, "methods": self.methods, "drafts_from": frontier.leader_of(self.methods),
            "cell_value": self.cell_value, "rule": self.rule, "baseline": self.baseline,
            "configurations_done": done, "configurations": len(self.configurations),
            "stopped": stop.text() if stop else None, "table": table, "rows": rows, "command": self.command()})
        figure = kl_heatmap(cells, self.cell_value, self.rule, self.baseline,
                            note="" if final or not cells else f"{done} of {len(self.configurations)} configurations")
        return Gridded(self.header(done, estimate, stop, note), figure, data)


def plan_of(run) -> GridPlan:
    """The request checked, every value named in its message; nothing is loaded yet."""
    key = check_pair_key(run.pair_key)
    ticked = check_methods(run.methods, at_least_one=False)
    drafts = parse_sizes("K", run.grid_drafts, MAX_DRAFTS)
    lengths = parse_sizes("L", run.grid_lengths, MAX_DRAFT_LENGTH)
    temperature = number("T (temperature)", run.temperature, 0, MAX_TEMPERATURE, integer=False)
    prompts = number("prompts", run.num_prompts, MIN_PROMPTS, grid_size.MOST_PROMPTS)
    tokens = number("tokens per prompt", run.grid_tokens, 1, MAX_NEW_TOKENS)
    cell_value = check_choice("the cell value", run.cell_value, CELL_VALUES)
    rule = check_rule("rule", run.rule, allow_best=True)
    baseline = check_rule("baseline", run.baseline, allow_best=False)
    if cell_value != EXPECTED and rule == baseline:
        raise ValueError(f"the rule and the baseline are both {METHODS[rule].label}: choose two different rules")
    for k in drafts:  # every K x L must fit the server's block limit
        for length in lengths:
            settings(k, length, temperature, tokens, 0)
    return GridPlan(key, drafts, lengths, temperature, prompts, tokens, measured_rules(ticked, rule, baseline),
                    cell_value, rule, baseline)


def grid_seconds_of(plan: GridPlan) -> float:
    """The grid's expected seconds (its place in line), at most the server's time budget."""
    seconds = grid_size.grid_seconds(plan.pair_key, plan.drafts, plan.lengths, plan.tokens, plan.prompts,
                                     max(len(plan.methods), 1))
    return min(seconds, float(limits.LIMITS.seconds))


@visitors.served(translate_error, GRID, estimate=lambda run: grid_seconds_of(plan_of(run)))
@gpu.on_gpu(gpu.grid_cost)
@user_errors
def run_grid(pair_key, methods, grid_drafts, grid_lengths, temperature, num_prompts, grid_tokens, cell_value, rule,
             baseline, progress=gr.Progress(), request: gr.Request = None):
    """A K x L grid of coupled runs at one T, a frame after every configuration; Stop or the budget keep what finished.

    Refused before anything loads when its estimate is over the budget (`grid_size.check_grid_fits`)."""
    run = GRID.request((pair_key, methods, grid_drafts, grid_lengths, temperature, num_prompts, grid_tokens,
                        cell_value, rule, baseline))
    session = getattr(request, "session_hash", None)
    STOPS.take(session)  # a Stop pressed before this run does not end it
    plan = plan_of(run)
    estimate = grid_size.cost.about(grid_size.check_grid_fits(plan.pair_key, plan.drafts, plan.lengths, plan.tokens,
                                                              plan.prompts, len(plan.methods)))
    if not is_teaching(plan.pair_key):
        progress(0, desc=LOADING_NOTE)
    pair = get_pair(plan.pair_key, allow_custom=limits.LIMITS.allow_any_model)
    prompt_ids = [pair.encode(text) for text in frontier.prompt_texts(plan.pair_key, plan.prompts)]
    for ids in prompt_ids:
        check_prompt_tokens(len(ids))
    check_runs_fit(pair, grid_size.grid_runs(plan.drafts, plan.lengths, plan.prompts), plan.tokens,
                   f"{len(plan.configurations)} configurations x {plan.prompts} prompts of {plan.tokens} tokens")
    budget, rows, stop, done = Budget(), [], None, 0
    total = len(plan.configurations)

    def step(_coupled_step) -> None:
        budget.tick()
        reason = STOPS.take(session)
        if reason:
            raise StopPressed(reason)

    yield plan.outputs(rows, done, estimate)
    try:
        for k, length in plan.configurations:
            progress(done / total, desc=f"K = {k}, L = {length} ({done + 1} of {total}; all: {estimate})")
            rows += frontier.measure(pair, prompt_ids, plan.methods, k, length, plan.temperature, plan.tokens,
                                     on_step=step)
            done += 1
            if done < total:
                yield plan.outputs(rows, done, estimate)
    except StopPressed as pressed:
        stop = Stop(done, total, "configurations", str(pressed))
    except BudgetSpent as error:
        stop = budget_stop("grid", done, total, "configurations", error,
                           "fewer prompts, tokens or K and L values would fit")
    yield plan.outputs(rows, done, estimate, stop, final=True)


def default_rules(ticked) -> int:
    """How many rules a grid of the ticked methods runs at the default rule and baseline."""
    return len(measured_rules(ticked, BEST, DEFAULT_BASELINE))


PROMPTS_INFO = "sized to the budget when the pair changes"


@functools.cache
def prompts_to_rank(pair_key: str) -> tuple[int, int, int, str] | None:
    """(fewest, median, most) prompts a cell of this pair's saved grid needed for its best rule to separate from
    the runner-up (`grid_cells.prompts_to_rank`, the cells where it can), and that result's label; None without a
    saved result of this pair. The default saved result first: the README's, at the app's default T."""
    by_result: dict = {}
    for result, cell in grid_saved.saved_cells(pair_key):
        by_result.setdefault(result, []).append(cell)
    for result, cells in by_result.items():
        needs = sorted(n for n in map(cell_prompts_to_rank, cells) if n is not None)
        if needs:
            return needs[0], int(statistics.median(needs)), needs[-1], result.label
    return None


def prompts_info(pair_key: str) -> str:
    """The prompts box's note: said before the run, what a grid of this pair needs to rank its cells."""
    known = prompts_to_rank(pair_key_of(pair_key))
    if known is None:
        return PROMPTS_INFO
    fewest, median, most, where = known
    return (f"{PROMPTS_INFO}. In the saved grid {where} a cell needed {fewest:,} to {most:,} prompts (median "
            f"{median:,}) to rank its best rule: fewer than {fewest:,} rank no cell")


def sizes_for_pair(pair_key, methods) -> tuple[dict, int]:
    """The prompts and tokens boxes when the pair changes: the tokens for the pair, and the most prompts whose grid
    fits its share of the budget at the Grid's default K and L, with the note on what ranks (the pair and ticked
    methods checked: raw input)."""
    key = check_pair_key(pair_key)
    rules = default_rules(check_methods(methods, at_least_one=False))
    return (gr.update(value=grid_size.default_prompts(key, rules), info=prompts_info(key)),
            grid_size.default_tokens(key))


def fit_prompts(pair_key, methods, grid_drafts, grid_lengths, num_prompts, grid_tokens, rule, baseline) -> int:
    """'Fit to the budget': the most prompts (at least 2) whose grid at these K, L, tokens and rules the server would
    start; the box's own value when it fits already (the settings checked as a run checks them)."""
    key = check_pair_key(pair_key)
    drafts = parse_sizes("K", grid_drafts, MAX_DRAFTS)
    lengths = parse_sizes("L", grid_lengths, MAX_DRAFT_LENGTH)
    tokens = number("tokens per prompt", grid_tokens, 1, MAX_NEW_TOKENS)
    rules = len(measured_rules(check_methods(methods, at_least_one=False), check_rule("rule", rule, allow_best=True),
                               check_rule("baseline", baseline, allow_best=False)))
    allowed = grid_size.cost.CAP_FRACTION * grid_size.cost.budget_seconds()
    most = grid_size.prompts_that_fit(key, drafts, lengths, tokens, rules, allowed)
    if most < MIN_PROMPTS:
        raise ValueError("not even 2 prompts fit at these K, L and tokens: fewer K or L values, or fewer tokens per "
                         "prompt")
    try:
        asked = number("prompts", num_prompts, MIN_PROMPTS, grid_size.MOST_PROMPTS)
    except ValueError:
        return most
    return min(asked, most)


@dataclass
class GridTab:
    button: gr.Button
    stop_button: gr.Button
    fit_button: gr.Button
    inputs: dict[str, gr.components.Component]  # the tab's own controls, by RunRequest field
    outputs: dict[str, gr.components.Component]
    downloads: tuple = ()
    saved: grid_saved.SavedControls | None = None  # a saved frontier result, drawn without a run


def build(page) -> None:
    with gr.Tab("Grid", id="grid"):
        gr.Markdown("Every (K, L) at the sidebar's T, one coupled run per prompt: each rule judges the same drafts "
                    "with the same random draws, so a cell's differences are the rules' alone. A prompt is the unit "
                    "of the paired 95 % intervals (hover). Each cell names its best rule; **~**: the best ties the "
                    "runner-up (their interval covers 0); **=**: no gain over the baseline (that interval covers 0); "
                    "grey: too few prompts to rank. The ticked methods (sidebar) "
                    "are run, with the rule and the baseline below; the lossy rule has no E[tau | drafts] and is left "
                    "out.", elem_id="grid-intro")
        with gr.Row():
            drafts = gr.Textbox(" ".join(map(str, grid_size.DEFAULT_DRAFTS)), label="K values (rows)",
                                elem_id="grid-drafts")
            lengths = gr.Textbox(" ".join(map(str, grid_size.DEFAULT_LENGTHS)), label="L values (columns)",
                                 elem_id="grid-lengths")
            pair = page.sidebar.pair.value
            prompts = gr.Number(grid_size.default_prompts(pair, default_rules(default_compare())), precision=0,
                                minimum=MIN_PROMPTS, maximum=grid_size.MOST_PROMPTS, label="Prompts",
                                info=prompts_info(pair), elem_id="grid-prompts")
            tokens = gr.Number(grid_size.default_tokens(pair), precision=0, minimum=1, maximum=MAX_NEW_TOKENS,
                               label="Tokens per prompt", elem_id="grid-tokens")
            clamp_in_page(prompts)
            clamp_in_page(tokens)
        with gr.Row():
            cell_value = gr.Radio(CELL_CHOICES, value=EXPECTED, label="Cell value", elem_id="grid-cell-value")
            rule = gr.Dropdown(rule_choices(), value=BEST, label="Rule (of a gain)", elem_id="grid-rule")
            baseline = gr.Dropdown(baseline_choices(), value=DEFAULT_BASELINE, label="Baseline (of a gain and of the "
                                   "hover's interval)", elem_id="grid-baseline")
        with gr.Row():
            button = gr.Button("Run the grid", variant="primary", elem_id="grid-button", scale=3)
            # secondary, not Gradio's red "stop": red means lossy in this app
            stop_button = gr.Button("Stop", variant="secondary", elem_id="grid-stop-button", scale=1)
            fit_button = gr.Button("Fit the prompts to the budget", variant="secondary", elem_id="grid-fit-button",
                                   scale=1)
        saved = grid_saved.controls()
        header = gr.Markdown(elem_id="grid-header")
        heatmap = gr.Plot(label="K x L grid", elem_id="grid-heatmap", show_label=False, min_width=MIN_WIDTH)
        how_to_read("grid")
        files, command = download_components("grid")
        data = gr.JSON(label="Grid data (hardware-free: E[tau | drafts] and block efficiency)")
    page.tab_handles.grid = GridTab(
        button, stop_button, fit_button, inputs=dict(grid_drafts=drafts, grid_lengths=lengths, num_prompts=prompts,
                                         grid_tokens=tokens, cell_value=cell_value, rule=rule, baseline=baseline),
        outputs=dict(header=header, heatmap=heatmap, data=data), downloads=(files, command), saved=saved)


def wire_events(page) -> None:
    tab: GridTab = page.tab_handles.grid
    s = page.sidebar
    i = tab.inputs
    private.on(s.pair.change, sizes_for_pair, [s.pair, s.methods], [i["num_prompts"], i["grid_tokens"]], queue=False,
               show_progress="hidden")
    inputs = [s.pair, s.methods, i["grid_drafts"], i["grid_lengths"], s.temperature, i["num_prompts"],
              i["grid_tokens"], i["cell_value"], i["rule"], i["baseline"]]
    # One click fixes a grid the server would refuse: the prompts cut to what fits at the other settings.
    private.on(tab.fit_button.click, fit_prompts, [s.pair, s.methods, i["grid_drafts"], i["grid_lengths"],
                                                   i["num_prompts"], i["grid_tokens"], i["rule"], i["baseline"]],
               i["num_prompts"], queue=False, show_progress="hidden")
    running = run_events(tab.button.click, tab.button, run_grid, inputs, tab.outputs, message="header",
                         clear=("heatmap", "data"), api_name="grid", concurrency_id="models", preprocess=False)
    wire_downloads(running, tab.outputs["data"], *tab.downloads)
    shown = run_events(tab.saved.button.click, tab.saved.button, grid_saved.show_saved,
                       [tab.saved.chosen, i["cell_value"], i["rule"], i["baseline"]], tab.outputs, message="header",
                       clear=("heatmap", "data"), api_name="grid_saved", preprocess=False)
    wire_downloads(shown, tab.outputs["data"], *tab.downloads)
    # Stop, as Generate's: the grid sees it after its coupled step in progress and keeps what finished; in a
    # ZeroGPU worker it cannot, so there the event is cancelled.
    if gpu.ON_ZEROGPU:
        stopped = private.on(tab.stop_button.click, lambda: None, None, None, cancels=[running])
        back_to_idle(stopped.then, tab.button)
    else:
        private.on(tab.stop_button.click, generate.ask_to_stop, None, None, queue=False)
