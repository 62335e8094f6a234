"""Compare over a prompt set (components.wiring.prompt_set_choice): the prompt is the unit, not the iteration.

The runs and their rows are the library's (`spectr_gbv.bench.set_compare.SetCompare`: coupled
means with paired intervals against a baseline rule, or independent seeds' medians), so the
command the page prints (`python -m spectr_gbv.bench.view compare --prompt-set ...`) prints the
rows the page offers. This module sizes the set against the budget, streams the outputs after
each prompt, and keeps the prompts that finished when the budget stops it.
"""

from __future__ import annotations

import html
import math

from spectr_gbv import AUTOREGRESSIVE, METHODS
from spectr_gbv.pairs import is_teaching
from spectr_gbv.bench.frontier import without_nan
from spectr_gbv.bench.set_compare import SetCompare, baseline_of, seed_summary
from spectr_gbv.bench.view import command_line, coupled_leader

from ..render.set_figures import (paired_difference_figure, seeds_figure, set_means_figure, set_speed_figure,
                                  tied_with_baseline)
from ..serving.limits import BudgetSpent
from ..wiring.admission import cost
from ..wiring.admission.budget_stops import Ticker, budget_stop
from ..wiring.prompt_set_choice import check_set_fits, check_set_name, prepare_set, set_prompts
from ..wiring.runs import MAX_REPEATS, Stop, header_html, header_line
from ..wiring.settings import check_flag, check_methods, check_pair_key, number, settings, shown
from .compare_run import Compared


def check_baseline(baseline, methods: list[str]) -> str:
    """The rule the differences are taken against: one of the ticked methods (empty: the registry's
    `compare_baseline` (SpecTr) if ticked, else the first ticked)."""
    if baseline is None or baseline == "":
        return baseline_of(methods)
    if not isinstance(baseline, str) or baseline not in methods:
        raise ValueError(f"the baseline rule must be one of the ticked methods ({', '.join(methods)}), "
                         f"got {shown(baseline)}")
    return baseline


def set_timed(pair_key, coupled: bool) -> bool:
    """Whether a Compare over a set times its rules: independent runs on a model pair (AR around each prompt)."""
    return not coupled and not is_teaching(pair_key)


def set_seconds(pair_key, num_methods: int, K: int, L: int, tokens: int, repeats: int, coupled: bool,
                prompts: int) -> float:
    """A Compare over `prompts` prompts: one coupled run per prompt and repeat, or every method's (and, timed,
    two AR runs per prompt)."""
    one = cost.run_seconds(pair_key, "drafted", K, L, tokens)
    per_prompt = one * cost.COUPLED_OVERHEAD if coupled else one * num_methods
    ar = 2 * cost.run_seconds(pair_key, AUTOREGRESSIVE, K, L, tokens) if set_timed(pair_key, coupled) else 0.0
    return prompts * (repeats * per_prompt + ar)


def set_plan(num_methods: int, L: int, repeats: int, coupled: bool, prompts: int,
             timed: bool = False) -> list[tuple[int, int]]:
    """Its runs as (how many, L; 0 for AR) for the iteration estimate."""
    return [(prompts * repeats * (1 if coupled else num_methods), L)] + ([(2 * prompts, 0)] if timed else [])


def set_estimate(pair_key, num_methods: int, K: int, L: int, tokens: int, repeats: int, coupled: bool):
    """(seconds of n prompts, runs of n prompts): the two estimates a set is sized by
    (components.wiring.prompt_set_choice.set_fits), for the same settings."""
    timed = set_timed(pair_key, coupled)
    return (lambda n: set_seconds(pair_key, num_methods, K, L, tokens, repeats, coupled, n),
            lambda n: set_plan(num_methods, L, repeats, coupled, n, timed))


class SetCompareView:
    """A Compare over several prompts; `outputs` fills Compare's outputs in the set's form (module docstring)."""

    def __init__(self, pair, prompts: list[str], runs: SetCompare):
        self.pair, self.prompts, self.runs = pair, prompts, runs
        self.stop: Stop | None = None

    def run(self, tick, progress):
        runs = self.runs
        try:
            for _ in runs.run(self.pair.target, self.pair.draft, tick, lambda f, desc: progress(f, desc=desc)):
                yield self.outputs()
        except BudgetSpent as error:
            self.stop = budget_stop("compare", runs.prompts_done(), len(self.prompts), "prompts", error)
        yield self.outputs(final=True)

    def command(self) -> str:
        """The command that prints this run's rows (`python -m spectr_gbv.bench.view compare --prompt-set ...`)."""
        r, b = self.runs, self.runs.base
        return command_line("compare", self.pair.info.key, "",  # a set's name stands for its prompts
                            methods=r.methods, num_drafts=b.num_drafts, draft_length=b.draft_length,
                            temperature=b.temperature, max_new_tokens=b.max_new_tokens, seeds=[b.seed],
                            coupled=r.coupled, prompt_set=r.set_name, repeats=r.repeats,
                            baseline=r.baseline if r.coupled else None)

    def summary_html(self, rows: list[dict]) -> str:
        """The numbers behind the charts, in a small table: means, and each difference with its interval."""
        r = self.runs
        if r.coupled:
            head = ("<tr><th>rule</th><th>mean E[tau | drafts]</th><th>block efficiency</th>"
                    f"<th>E[tau] − {html.escape(METHODS[r.baseline].label)} (95 %)</th></tr>")
            body = []
            for row in rows:
                mean, low, high = row[f"vs_{r.baseline}"]["expected_accepted"]
                diff = ("baseline" if row["method"] == r.baseline else "–" if math.isnan(mean)
                        else f"{mean:+.3f}" if math.isnan(low) else f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]")
                expected = "–" if math.isnan(row["expected_accepted"]) else f"{row['expected_accepted']:.3f}"
                body.append(f"<tr><td>{html.escape(row['label'])}</td><td>{expected}</td>"
                            f"<td>{row['block_efficiency']:.3f}</td><td>{diff}</td></tr>")
        else:
            head = "<tr><th>rule</th><th>median block efficiency over seeds</th><th>range</th></tr>"
            body = []
            for method, values in r.per_seed.items():
                s = seed_summary(values)
                body.append(f"<tr><td>{html.escape(METHODS[method].label)}</td><td>{s['median']:.3f}</td>"
                            f"<td>{s['low']:.3f} to {s['high']:.3f} ({s['seeds']} seed(s))</td></tr>")
        return f'<table class="compare-set-table">{head}{"".join(body)}</table>'

    def header(self, final: bool, rows: list[dict]) -> str:
        r, b = self.runs, self.runs.base
        extra = [f"prompt set {r.set_name} ({len(self.prompts)} prompts)",
                 f"{r.repeats} repeat(s)" if r.coupled else f"{r.repeats} seed(s)", f"{b.max_new_tokens} tokens"]
        line = header_line(self.pair.info.key, r.methods, b.num_drafts, b.draft_length, b.temperature, b.seed, extra,
                           self.stop)
        if not final:
            line += "running"
        if r.coupled:
            tied = tied_with_baseline(rows, r.baseline)
            # The drafts' rule is not a winner: every rule judges its drafts; the table ranks the rules.
            speed = (" Speed: a coupled run times no rule alone; untick Coupled to time each rule on every prompt."
                     if not self.pair.info.teaching else "")
            source = (f"Coupled runs, one per prompt and repeat, every rule judging the same drafts (drafts from "
                      f"{html.escape(METHODS[r.leader].label)}): means over the prompts, differences paired per "
                      f"prompt against {html.escape(METHODS[r.baseline].label)}."
                      + (f" Tie within noise: {', '.join(html.escape(METHODS[m].label) for m in tied)}." if tied else "")
                      + speed)
        else:
            source = "Independent runs: each seed's mean over the prompts; the median and range over the seeds." + (
                " Speed: every rule timed on each prompt against AR on that prompt just before and after the rules."
                if r.timed else "")
        return header_html(line) + f'<div class="compare-sources">{source}</div>'

    def outputs(self, final: bool = False) -> Compared:
        r = self.runs
        rows = r.rule_rows()
        data = {"pair": self.pair.info.key, "prompt_set": r.set_name, "prompts": self.prompts,
                "methods": r.methods, "coupled": r.coupled, "repeats": r.repeats,
                "baseline": r.baseline if r.coupled else None, "drafts_from": r.leader if r.coupled else None,
                "stopped": self.stop.text() if self.stop else None,
                "set_rules": rows if r.coupled else None,
                "set_seeds": {m: seed_summary(v) for m, v in r.per_seed.items()} if not r.coupled else None,
                "set_speedups": r.speed() or None,
                "table": r.table(), "command": self.command()}
        data = without_nan(data)  # NaN (no theory line, one prompt's interval) as JSON null
        html_text = self.header(final, rows) + (self.summary_html(rows) if rows or r.per_seed else "")
        if r.coupled:
            return Compared(texts=html_text, efficiency=set_means_figure(rows, r.set_name) if rows else None,
                            theory=paired_difference_figure(rows, r.baseline) if rows else None, data=data)
        speed = r.speed()
        return Compared(texts=html_text, efficiency=seeds_figure(r.per_seed, r.set_name, r.prompts_done()),
                        speedup=set_speed_figure(speed, r.set_name, str(getattr(self.pair.target, "device", "cpu")))
                        if speed else None, data=data)


def compare_over_set(run, progress, run_order):
    """Compare's handler over a prompt set (`run`: its RunRequest; `run_order`: Compare's order of the methods):
    every check, the set's sizing among them, before any run; then the runs, streamed (`SetCompareView`)."""
    set_name = check_set_name(run.prompt_set)
    pair_key = check_pair_key(run.pair_key)
    methods, coupled = run_order(check_methods(run.methods)), bool(check_flag("coupled", run.coupled))
    base = settings(*run.settings_values())
    repeats = number("repeats", run.repeats, 1, MAX_REPEATS)
    baseline = check_baseline(run.baseline, methods)
    check_set_fits(set_name, pair_key, *set_estimate(pair_key, len(methods), base.num_drafts, base.draft_length,
                                                     base.max_new_tokens, repeats, coupled), base.max_new_tokens)
    texts = set_prompts(set_name, pair_key, run.prompt)
    pair, prompt_ids = prepare_set(pair_key, texts, progress)
    runs = SetCompare(pair.info.key, set_name, prompt_ids, methods, base.config(methods[0]), coupled, repeats, baseline,
                      coupled_leader(methods), timed=set_timed(pair_key, coupled))
    yield from SetCompareView(pair, texts, runs).run(Ticker(), progress)
