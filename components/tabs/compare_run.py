"""Compare's results so far and the outputs they make, for a streaming handler (components.tabs.compare).

The texts, metric lines and speedups come from independent runs (the first seed's); the
charts from the coupled runs when there are any (all seeds, or the seeds whose coupled run
finished before a budget stop), else from the independent runs; the outputs say which. A
budget stop before any method finished shows the tokens of the run in progress instead, and
says what would fit (components.wiring.admission.budget_stops).
"""

from __future__ import annotations

import dataclasses
import html
from dataclasses import dataclass

from spectr_gbv import AUTOREGRESSIVE, METHODS
from spectr_gbv.bench.view import command_line, compare_rows
from spectr_gbv.ceiling import run_ceiling
from spectr_gbv.config import DecodeConfig
from spectr_gbv.coupled import CoupledRun, coupled_steps
from spectr_gbv.engine import generate_config, run_record
from spectr_gbv.models import server_note
from spectr_gbv.models.compiled import serving_mode
from spectr_gbv.records import RunRecord

from ..serving.limits import BudgetSpent
from ..wiring.admission import cost
from ..render import figures
from ..wiring.admission.budget_stops import budget_stop, counted, what_fits
from ..wiring.outputs import NamedOutputs, skip
from ..render.band_figures import efficiency_band_figure
from ..render.marks import mark_coinciding, tied_with_leader
from ..render.speedup_figure import speedup_figure
from ..wiring.runs import Speedup, Stop, header_html, header_line, point_from_summaries, speedup_of, titled
from ..render.text import metrics_line, provenance_html, side_by_side_html


@dataclass
class Compared(NamedOutputs):
    texts: object = skip()  # the header and the methods' texts side by side
    efficiency: object = skip()
    histogram: object = skip()
    per_position: object = skip()
    calls: object = skip()
    speedup: object = skip()
    theory: object = skip()
    data: object = skip()


class CompareView:
    """Compare's results so far and the outputs they make (texts: independent runs; charts: coupled ones when there)."""

    def __init__(self, pair, prompt_ids, methods, base, coupled, seeds, timed, prompt: str = "",
                 set_offer: tuple[str, int] | None = None):
        self.pair, self.prompt_ids, self.methods, self.base, self.prompt = pair, prompt_ids, methods, base, prompt
        self.set_offer = set_offer  # (name, prompts) of the largest prompt set that fits, offered when nothing ranks
        self.coupled, self.seeds, self.timed = coupled, seeds, timed
        self.ar: list[RunRecord] = []
        self.runs: dict[str, list[RunRecord]] = {}  # per method, one run per seed
        self.coupled_runs: list[CoupledRun] = []  # one per seed
        self.stop: Stop | None = None
        self.running: tuple[str, DecodeConfig] | None = None  # (what, its settings) of the run in progress
        self.partial: tuple[str, RunRecord] | None = None  # a budget stop before any method finished: that run so far

    def run(self, tick, progress, estimate: str, leader: str):
        """Every run, in Compare's order, yielding the outputs after each piece of work (components.tabs.compare).

        AR, then each method (AR again after it on a timed pair), with the coupled runs right after
        the first method; a budget stop keeps what finished and says so in the header."""
        pair, prompt_ids, base = self.pair, self.prompt_ids, self.base
        steps, step = self.planned(), iter(range(self.planned()))

        def ar(desc: str) -> None:
            progress(next(step) / steps, desc=f"{desc} (all runs: {estimate})")
            self.running = ("the AR baseline", base.config(AUTOREGRESSIVE, with_theory=False))
            self.ar.append(generate_config(pair.target, None, prompt_ids, self.running[1], tick))

        try:
            ar("AR baseline")
            for i, method in enumerate(self.methods):
                for one_seed in self.seeds:
                    progress(next(step) / steps, desc=f"{METHODS[method].label}, seed {one_seed}")
                    config = dataclasses.replace(base.config(method), seed=one_seed)
                    self.running = (f"{METHODS[method].label}, seed {one_seed}", config)
                    self.runs.setdefault(method, []).append(generate_config(pair.target, pair.draft, prompt_ids, config,
                                                                            tick))
                if self.timed:  # AR after every method: each speedup is against the AR runs around it
                    ar(f"AR baseline, again ({i + 2} of {len(self.methods) + 1})")
                yield self.outputs()
                if i == 0 and self.coupled:
                    for one_seed in self.seeds:
                        progress(next(step) / steps, desc=f"coupled run, seed {one_seed} (same drafts and draws)")
                        run = CoupledRun(dataclasses.replace(base.config(leader), seed=one_seed), self.methods, prompt_ids)
                        for coupled_step in coupled_steps(pair.target, pair.draft, prompt_ids, self.methods, run.config):
                            tick(coupled_step)
                            run.steps.append(coupled_step)
                        self.coupled_runs.append(run)
                    yield self.outputs()
        except BudgetSpent as error:
            note = "" if any(self.runs.values()) else self.nothing_finished(tick)  # runs[m] is made before its run
            self.stop = budget_stop("compare", self.finished(), self.planned(), "runs", error, note)
        yield self.outputs(final=True)

    def nothing_finished(self, tick) -> str:
        """Keep the run in progress (`self.partial`); the note: what would fit, and how far that run got."""
        label, config = self.running
        self.partial = (label, run_record(config, self.prompt_ids, tick.current, self.pair.target.eos_token_id))
        return what_fits(tick, "no method", "token per run",
                         lambda n: cost.expected_steps(self.plan(), n, self.pair.info.key),
                         self.base.max_new_tokens - 1, so_far=tick.in_progress(label, self.base.max_new_tokens),
                         otherwise=": fewer methods or repeats")

    def plan(self) -> list[tuple[int, int]]:
        """The runs a Compare makes, as (how many, L; 0 for AR): AR first (and after every method when timed),
        every method and the coupled run once per seed."""
        ar_runs = 1 + (len(self.methods) if self.timed else 0)
        return [(ar_runs, 0), ((len(self.methods) + self.coupled) * len(self.seeds), self.base.draft_length)]

    def planned(self) -> int:
        return sum(count for count, _ in self.plan())

    def finished(self) -> int:
        return len(self.ar) + sum(map(len, self.runs.values())) + len(self.coupled_runs)

    def done(self) -> list[str]:
        """The methods whose runs (every seed) have finished, in the order asked for."""
        return [m for m in self.methods if len(self.runs.get(m, [])) == len(self.seeds)]

    def charted(self, done: list[str]) -> list[str]:
        """The methods on the charts: every method once the coupled runs finished (they judge them all), else `done`."""
        return list(self.methods) if self.coupled_runs else done

    def chart_summaries(self, done: list[str]) -> dict[str, list[dict]]:
        """Per method, one summary per seed: of the coupled runs when there are any, else of the independent runs."""
        if self.coupled_runs:
            return {m: [run.summary(m) for run in self.coupled_runs] for m in done}
        return {m: [run.summary() | {"accepted_length_histogram": run.accepted_length_histogram}
                    for run in self.runs[m]] for m in done}

    def theory_series(self, done: list[str]) -> dict:
        """Measured and expected accepted counts per iteration, of the first seed's run (for the theory chart)."""
        if self.coupled_runs:
            return {m: (self.coupled_runs[0].accepted(m), self.coupled_runs[0].expected(m)) for m in done}
        first = {m: self.runs[m][0] for m in done}
        return {m: ([it.num_accepted for it in first[m].iterations],
                    None if first[m].mean_expected_accepted is None
                    else [it.expected_accepted for it in first[m].iterations]) for m in done}

    def ceiling(self, done: list[str]) -> float | None:
        """The best E[tau] any exact rule could reach, averaged over the iterations of every run on the charts
        (teaching pairs only): the contexts of each seed's coupled run, else of the first method's runs."""
        runs = ([[s.emitted for s in run.steps] for run in self.coupled_runs] if self.coupled_runs
                else [[it.emitted for it in run.iterations] for run in self.runs[done[0]]])
        config = self.base.config(done[0])
        values = [(run_ceiling(self.pair.info.key, self.prompt_ids, emitted, config), len(emitted)) for emitted in runs
                  if emitted]
        if not values or any(v is None for v, _ in values):
            return None
        return sum(v * n for v, n in values) / sum(n for _, n in values)

    def speedups(self, done: list[str]) -> dict[str, Speedup]:
        """Per method, its runs' tokens/s over those of the AR runs just before and after them (`speedup_of`):
        method i ran between AR runs i and i + 1 (only the one before, until the one after has run)."""
        if not self.ar or not self.timed:
            return {}
        return {m: speedup_of([run.tokens_per_second for run in self.runs[m]],
                              [run.tokens_per_second for run in self.ar[i:i + 2]])
                for i, m in enumerate(self.methods) if m in done and i < len(self.ar)}

    def header(self, done: list[str], final: bool) -> str:
        seeds = [f"{len(self.seeds)} seeds ({self.seeds[0]} to {self.seeds[-1]})"] if len(self.seeds) > 1 else []
        line = header_line(self.pair.info.key, self.methods, self.base.num_drafts, self.base.draft_length,
                           self.base.temperature, self.base.seed, seeds + [f"{self.base.max_new_tokens} tokens"],
                           self.stop, served=serving_mode(self.pair.target))
        if not final:
            line += f"running: {len(done)} of {len(self.methods)} methods done"
        sources = ("Texts and speedups: independent runs (texts: the first seed; speedups: the median over the seeds, "
                   "each run against the AR runs just before and after its method). Charts: "
                   + ("coupled runs, the same drafts and random draws for every method." if self.coupled_runs
                      else "independent runs."))
        note = server_note(self.pair.target)
        if note and self.timed:  # why speculation pays on this machine, or does not
            sources += f" Speedups on {html.escape(note)}."
        return header_html(line) + f'<div class="compare-sources">{sources}</div>'

    def table(self, charted: list[str], repeats: dict[str, list[dict]], speedups: dict[str, Speedup]) -> list[dict]:
        """What the charts drew, one row per method and seed (`spectr_gbv.bench.view.compare_rows`)."""
        seeds = [run.config.seed for run in self.coupled_runs] if self.coupled_runs else self.seeds
        timed = {m: {"median": s.median, "low": s.low, "high": s.high} for m, s in speedups.items() if s.runs > 1}
        b = self.base
        return compare_rows(self.pair.info.key, self.prompt, repeats, seeds, b.num_drafts, b.draft_length, b.temperature,
                            b.max_new_tokens, bool(self.coupled_runs), timed or None)

    def command(self) -> str:
        """The command line that prints this run's rows (`python -m spectr_gbv.bench.view compare ...`)."""
        b = self.base
        return command_line("compare", self.pair.info.key, self.prompt, methods=self.methods, num_drafts=b.num_drafts,
                            draft_length=b.draft_length, temperature=b.temperature, max_new_tokens=b.max_new_tokens,
                            seeds=self.seeds, coupled=self.coupled)

    def partial_summary(self) -> dict | None:
        """The run in progress a budget stopped before any method finished: its summary and text."""
        if self.partial is None:
            return None
        label, record = self.partial
        return record.summary() | {"run": label, "text": self.pair.text(record.tokens)}

    def partial_html(self) -> str:
        """The tokens of the run a budget stopped before any method finished (nothing else to show)."""
        if self.partial is None:
            return ""
        label, record = self.partial
        tokens = provenance_html(record, self.pair.spelled, legend=False)
        return (f'<div class="compare-partial"><h4>{html.escape(label)}: the run in progress, stopped after '
                f'{counted(len(record.tokens), "token")}</h4>{tokens}</div>')

    def cannot_separate(self, points: dict[str, dict]) -> bool:
        """Every method's 95 % band overlaps the top one's: this prompt ranks none of them (needs 2 seeds)."""
        banded = [m for m, p in points.items() if p.get("band_low") is not None]
        return len(banded) >= 2 and len(tied_with_leader(points)) == len(banded)

    def separation_html(self, points: dict[str, dict]) -> str:
        """What to do when one prompt cannot rank the rules: a prompt set, the largest that fits."""
        if self.set_offer is None:
            offer = " No prompt set fits this server's budget at these settings: fewer methods or tokens."
        else:
            name, size = self.set_offer
            offer = (f" Over a prompt set the prompt is the unit, and paired differences separate rules that one "
                     f"prompt cannot: {name} ({size} prompts) fits this server's budget at these settings.")
        return ('<div class="compare-cannot-separate"><b>One prompt cannot separate these rules:</b> every 95 % '
                f"band of block efficiency overlaps the top one's, so the order of the bars is noise.{offer}</div>")

    def outputs(self, final: bool = False) -> "Compared":
        """Compare's eight outputs: side by side texts, six charts, the data."""
        pair, done, coupled = self.pair, self.done(), bool(self.coupled_runs)
        charted = self.charted(done)
        first = {m: self.runs[m][0] for m in done}
        repeats = self.chart_summaries(charted)
        shown = [repeats[m][0] for m in charted]  # the charts of distributions: the first seed's run
        points = {m: point_from_summaries(repeats[m]) for m in charted}
        ceiling = self.ceiling(charted) if final and charted else None
        speedups = self.speedups(done)
        separate_not = final and len(charted) == len(self.methods) and self.cannot_separate(points)
        phases = ({AUTOREGRESSIVE: self.ar[0].phase_ms_per_token} if self.ar else {}) | {m: first[m].phase_ms_per_token for m in done}
        device = str(getattr(pair.target, "device", "cpu"))
        data = {
            "pair": pair.info.key, "methods": self.methods, "coupled": self.coupled, "device": device,
            "server": server_note(pair.target),
            "seeds": self.seeds, "stopped": self.stop.text() if self.stop else None, "finished_methods": done,
            AUTOREGRESSIVE: self.ar[0].summary() if self.ar else None,
            "independent": [first[m].summary() | {"accepted_length_histogram": first[m].accepted_length_histogram}
                            for m in done],
            "speedup_vs_ar": {m: s.summary() for m, s in speedups.items()} if self.timed else None,
            "ar_tokens_per_second": [run.tokens_per_second for run in self.ar] if self.timed else None,
            "ms_per_token_by_phase": phases if self.timed else None,
            "coupled_runs": [self.coupled_runs[0].summary(m) for m in charted] if coupled else None,
            "coupled_seeds": [run.config.seed for run in self.coupled_runs] if coupled else None,
            "drafts_from": self.coupled_runs[0].config.method if coupled else None,  # every rule judges its drafts
            "block_efficiency_over_seeds": points,
            "ceiling_expected_accepted": ceiling,  # best any exact rule can do (teaching pairs only)
            "partial_run": self.partial_summary(),
            "cannot_separate": separate_not,
            "set_offer": self.set_offer[0] if separate_not and self.set_offer else None,
            "table": self.table(charted, repeats, speedups),  # the rows the downloads offer (spectr_gbv.bench.view)
            "command": self.command(),
        }
        texts = {m: provenance_html(first[m], pair.spelled, legend=False) for m in done}
        return Compared(
            self.header(done, final) + (self.separation_html(points) if separate_not else "") + self.partial_html()
            + side_by_side_html(texts, {m: metrics_line(first[m], self.timed) for m in done}),
            efficiency_band_figure(points, coupled=coupled, ceiling=ceiling),
            titled(figures.histogram_figure(shown), coupled),
            mark_coinciding(titled(figures.per_position_figure(shown), coupled)),  # identical lines: said so
            titled(figures.calls_per_token_figure(shown), coupled),
            speedup_figure(speedups, device, phases, timed=self.timed),
            mark_coinciding(titled(figures.theory_figure(self.theory_series(charted)), coupled)),
            data,
        )
