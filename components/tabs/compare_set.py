"""Compare over a prompt set (components.wiring.prompt_set_choice): the prompt is the unit, not the iteration.

* Coupled: one coupled run per prompt and repeat (every rule judges the same drafts with the
  same draws), each prompt's value the mean over its repeats; per rule the mean E[tau | drafts]
  and block efficiency over the prompts, and the paired 95 % interval of every difference
  against the chosen baseline rule: the frontier bench's computation
  (`spectr_gbv.bench.frontier.prompt_means`, `rule_rows`), not a copy of it.
* Independent: every rule decodes every prompt with each seed; a seed's value is the mean block
  efficiency over the prompts, and the rule gets the median and range over seeds (dots below
  five seeds, components.render.set_figures), no interval claimed from a few seeds.

Prompt i, repeat r is decoded with seed `base.seed + i + r x prompts` (coupled), so at seed 0
and one repeat prompt i has seed i, as in `python -m spectr_gbv.bench.frontier`. A budget stop
keeps the prompts (coupled) or rules (independent) that finished.
"""

from __future__ import annotations

import dataclasses
import html
import math

from spectr_gbv import METHODS
from spectr_gbv.bench.frontier import METRICS, prompt_means, leader_of, rule_rows, without_nan
from spectr_gbv.coupled import CoupledRun, coupled_steps
from spectr_gbv.engine import generate_config

from ..render.set_figures import paired_difference_figure, seed_summary, seeds_figure, set_means_figure, \
    tied_with_baseline
from spectr_gbv.bench.view import coupled_leader

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
        return next((m for m in methods if METHODS[m].compare_baseline), methods[0])
    if not isinstance(baseline, str) or baseline not in methods:
        raise ValueError(f"the baseline rule must be one of the ticked methods ({', '.join(methods)}), "
                         f"got {shown(baseline)}")
    return baseline


def set_seconds(pair_key, num_methods: int, K: int, L: int, tokens: int, repeats: int, coupled: bool,
                prompts: int) -> float:
    """A Compare over `prompts` prompts: one coupled run per prompt and repeat, or every method's."""
    one = cost.run_seconds(pair_key, "drafted", K, L, tokens)
    per_prompt = one * cost.COUPLED_OVERHEAD if coupled else one * num_methods
    return prompts * repeats * per_prompt


def set_plan(num_methods: int, L: int, repeats: int, coupled: bool, prompts: int) -> list[tuple[int, int]]:
    """Its runs as (how many, L) for the iteration estimate."""
    return [(prompts * repeats * (1 if coupled else num_methods), L)]


class SetCompareView:
    """A Compare over several prompts (module docstring); `outputs` fills Compare's outputs in the set's form."""

    def __init__(self, pair, set_name: str, prompts: list[str], prompt_ids: list[list[int]], methods: list[str], base,
                 coupled: bool, repeats: int, baseline: str):
        self.pair, self.set_name, self.prompts, self.prompt_ids = pair, set_name, prompts, prompt_ids
        self.methods, self.base, self.coupled, self.repeats, self.baseline = methods, base, coupled, repeats, baseline
        self.per_prompt = {m: {k: [] for k in METRICS} for m in methods}  # coupled: one value per finished prompt
        self.per_seed: dict[str, list[float]] = {}  # independent: per rule, the mean over prompts of each seed
        self.stop: Stop | None = None
        self.leader: str | None = None

    def seed_of(self, prompt: int, repeat: int) -> int:
        return self.base.seed + prompt + repeat * len(self.prompt_ids)

    def run(self, tick, progress, leader: str):
        self.leader = leader
        try:
            yield from (self._coupled(tick, progress) if self.coupled else self._independent(tick, progress))
        except BudgetSpent as error:
            done, total, unit = ((len(self.per_prompt[self.methods[0]]["block_efficiency"]), len(self.prompts),
                                  "prompts") if self.coupled else (len(self.per_seed), len(self.methods), "methods"))
            self.stop = budget_stop("compare", done, total, unit, error)
        yield self.outputs(final=True)

    def _coupled(self, tick, progress):
        for i, ids in enumerate(self.prompt_ids):
            progress(i / len(self.prompt_ids), desc=f"prompt {i + 1} of {len(self.prompt_ids)}, coupled")
            means = []
            for r in range(self.repeats):
                config = dataclasses.replace(self.base.config(self.leader), seed=self.seed_of(i, r))
                run = CoupledRun(config, self.methods, ids)
                for step in coupled_steps(self.pair.target, self.pair.draft, ids, self.methods, config):
                    tick(step)
                    run.steps.append(step)
                means.append(prompt_means(run, self.methods))
            for m in self.methods:  # a prompt's value: the mean over its repeats
                for metric in METRICS:
                    self.per_prompt[m][metric].append(sum(one[m][metric] for one in means) / len(means))
            yield self.outputs()

    def _independent(self, tick, progress):
        seeds = [self.base.seed + r for r in range(self.repeats)]
        for j, method in enumerate(self.methods):
            values = []
            for seed in seeds:
                progress(j / len(self.methods), desc=f"{METHODS[method].label}, seed {seed}, {len(self.prompts)} prompts")
                config = dataclasses.replace(self.base.config(method), seed=seed)
                runs = [generate_config(self.pair.target, self.pair.draft, ids, config, tick) for ids in self.prompt_ids]
                values.append(sum(run.block_efficiency for run in runs) / len(runs))
            self.per_seed[method] = values
            yield self.outputs()

    def rows(self) -> list[dict]:
        """The coupled rows (`frontier.rule_rows`, against the baseline) over the prompts finished so far."""
        if not self.per_prompt[self.methods[0]]["block_efficiency"]:
            return []
        b = self.base
        return rule_rows(self.per_prompt, self.methods, b.num_drafts, b.draft_length, b.temperature,
                         references=[self.baseline])

    def table(self, rows: list[dict]) -> list[dict]:
        """One flat row per rule, for the downloads: means, and the paired differences against the baseline."""
        b, out = self.base, []
        if self.coupled:
            for row in rows:
                line = {"view": "compare", "pair": self.pair.info.key, "prompt_set": self.set_name,
                        "prompts": row["prompts"],
                        "method": row["method"], "K": b.num_drafts, "L": b.draft_length, "T": b.temperature,
                        "max_new_tokens": b.max_new_tokens, "repeats": self.repeats, "coupled": True,
                        "expected_accepted": row["expected_accepted"], "block_efficiency": row["block_efficiency"],
                        "baseline": self.baseline}
                for metric in METRICS:
                    mean, low, high = row[f"vs_{self.baseline}"][metric]
                    line |= {f"{metric}_minus_baseline": mean, f"{metric}_minus_baseline_low": low,
                             f"{metric}_minus_baseline_high": high}
                out.append(line)
            return out
        for method, values in self.per_seed.items():
            summary = seed_summary(values)
            out.append({"view": "compare", "pair": self.pair.info.key, "prompt_set": self.set_name,
                        "prompts": len(self.prompts),
                        "method": method, "K": b.num_drafts, "L": b.draft_length, "T": b.temperature,
                        "max_new_tokens": b.max_new_tokens, "coupled": False, "seeds": values,
                        "median_block_efficiency": summary["median"], "low": summary["low"], "high": summary["high"]})
        return out

    def command(self) -> str:
        """The frontier bench's command, where it makes these means (a suite slice, coupled, seed 0, one repeat,
        the same leader); else a comment saying what it would not reproduce."""
        b = self.base
        if not (self.coupled and self.set_name.startswith("suite-") and b.seed == 0 and self.repeats == 1
                and self.leader == leader_of(self.methods)):
            return ("# the frontier bench reproduces coupled runs over a suite-N set at seed 0 with one repeat "
                    "(python -m spectr_gbv.bench.frontier); this run is not one")
        return (f"python -m spectr_gbv.bench.frontier --pair {self.pair.info.key} --prompts {len(self.prompts)} "
                f"--drafts {b.num_drafts} --lengths {b.draft_length} --temperatures {b.temperature:g} "
                f"--methods {' '.join(self.methods)} --max-new-tokens {b.max_new_tokens}")

    def summary_html(self, rows: list[dict]) -> str:
        """The numbers behind the charts, in a small table: means, and each difference with its interval."""
        if self.coupled:
            head = ("<tr><th>rule</th><th>mean E[tau | drafts]</th><th>block efficiency</th>"
                    f"<th>E[tau] − {html.escape(METHODS[self.baseline].label)} (95 %)</th></tr>")
            body = []
            for row in rows:
                mean, low, high = row[f"vs_{self.baseline}"]["expected_accepted"]
                diff = ("baseline" if row["method"] == self.baseline else "–" if math.isnan(mean)
                        else f"{mean:+.3f}" if math.isnan(low) else f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]")
                expected = "–" if math.isnan(row["expected_accepted"]) else f"{row['expected_accepted']:.3f}"
                body.append(f"<tr><td>{html.escape(row['label'])}</td><td>{expected}</td>"
                            f"<td>{row['block_efficiency']:.3f}</td><td>{diff}</td></tr>")
        else:
            head = "<tr><th>rule</th><th>median block efficiency over seeds</th><th>range</th></tr>"
            body = []
            for method, values in self.per_seed.items():
                s = seed_summary(values)
                body.append(f"<tr><td>{html.escape(METHODS[method].label)}</td><td>{s['median']:.3f}</td>"
                            f"<td>{s['low']:.3f} to {s['high']:.3f} ({s['seeds']} seed(s))</td></tr>")
        return f'<table class="compare-set-table">{head}{"".join(body)}</table>'

    def header(self, final: bool, rows: list[dict]) -> str:
        b = self.base
        extra = [f"prompt set {self.set_name} ({len(self.prompts)} prompts)",
                 f"{self.repeats} repeat(s)" if self.coupled else f"{self.repeats} seed(s)", f"{b.max_new_tokens} tokens"]
        line = header_line(self.pair.info.key, self.methods, b.num_drafts, b.draft_length, b.temperature, b.seed, extra,
                           self.stop)
        if not final:
            line += "running"
        if self.coupled:
            tied = tied_with_baseline(rows, self.baseline)
            source = (f"Coupled runs, one per prompt and repeat (leader {html.escape(METHODS[self.leader].label)}): "
                      f"means over the prompts, differences paired per prompt against "
                      f"{html.escape(METHODS[self.baseline].label)}."
                      + (f" Tie within noise: {', '.join(html.escape(METHODS[m].label) for m in tied)}." if tied else ""))
        else:
            source = "Independent runs: each seed's mean over the prompts; the median and range over the seeds."
        return header_html(line) + f'<div class="compare-sources">{source}</div>'

    def outputs(self, final: bool = False) -> Compared:
        rows = self.rows() if self.coupled else []
        data = {"pair": self.pair.info.key, "prompt_set": self.set_name, "prompts": self.prompts,
                "methods": self.methods, "coupled": self.coupled, "repeats": self.repeats,
                "baseline": self.baseline if self.coupled else None, "leader": self.leader if self.coupled else None,
                "stopped": self.stop.text() if self.stop else None,
                "set_rules": rows if self.coupled else None,
                "set_seeds": {m: seed_summary(v) for m, v in self.per_seed.items()} if not self.coupled else None,
                "table": self.table(rows), "command": self.command()}
        data = without_nan(data)  # NaN (no theory line, one prompt's interval) as JSON null
        html_text = self.header(final, rows) + (self.summary_html(rows) if rows or self.per_seed else "")
        if self.coupled:
            return Compared(texts=html_text, efficiency=set_means_figure(rows, self.set_name) if rows else None,
                            theory=paired_difference_figure(rows, self.baseline) if rows else None, data=data)
        return Compared(texts=html_text, efficiency=seeds_figure(self.per_seed, self.set_name, len(self.prompts)),
                        data=data)



def compare_over_set(run, progress, run_order):
    """Compare's handler over a prompt set (`run`: its RunRequest; `run_order`: Compare's order of the methods):
    every check, the set's sizing among them, before any run; then the runs, streamed (`SetCompareView`)."""
    set_name = check_set_name(run.prompt_set)
    pair_key = check_pair_key(run.pair_key)
    methods, coupled = run_order(check_methods(run.methods)), bool(check_flag("coupled", run.coupled))
    base = settings(*run.settings_values())
    repeats = number("repeats", run.repeats, 1, MAX_REPEATS)
    baseline = check_baseline(run.baseline, methods)
    b = base
    check_set_fits(set_name, pair_key,
                   lambda n: set_seconds(pair_key, len(methods), b.num_drafts, b.draft_length, b.max_new_tokens,
                                         repeats, coupled, n),
                   lambda n: set_plan(len(methods), b.draft_length, repeats, coupled, n), b.max_new_tokens)
    texts = set_prompts(set_name, pair_key, run.prompt)
    pair, prompt_ids = prepare_set(pair_key, texts, progress)
    view = SetCompareView(pair, set_name, texts, prompt_ids, methods, base, coupled, repeats, baseline)
    yield from view.run(Ticker(), progress, coupled_leader(methods))
