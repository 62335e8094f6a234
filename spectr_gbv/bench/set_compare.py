"""Compare over a prompt set, the prompt as the unit: its runs, and the rows its download offers.

* Coupled: one coupled run per prompt and repeat (every rule judges the same drafts with the same
  draws, the drafts those of `coupled_leader`), a prompt's value the mean over its repeats; per
  rule the means over the prompts and the paired 95 % interval of each difference against the
  baseline rule (`frontier.prompt_means`, `frontier.rule_rows`).
* Independent: every rule decodes every prompt with each seed, prompt after prompt; a seed's
  value is the mean block efficiency over the prompts, and the rule gets the median and range
  over seeds (`seed_summary`), no interval claimed from a few seeds. On a model pair (`timed`)
  AR decodes each prompt just before and just after the rules do, and a rule's speedup on that
  prompt is the median of its seeds' tokens/s over those AR runs' (their harmonic mean); over
  the set, the geometric mean of the prompts' speedups with the 95 % t-interval of their logs
  (`speed_summary`: a prompt is the unit, each rule paired with AR on the same prompt).

Prompt i, repeat r is decoded with seed `seed + i + r x prompts` (coupled), so at seed 0 and one
repeat prompt i has seed i, as in `python -m spectr_gbv.bench.frontier`. The app's Compare over a
set (components.tabs.compare_set) and `python -m spectr_gbv.bench.view compare --prompt-set ...`
both run `SetCompare`, so the command prints the rows the page offers.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass, field
from typing import Callable, Iterator, Sequence

from ..config import AUTOREGRESSIVE, DecodeConfig
from ..coupled import CoupledRun, coupled_steps
from ..engine import generate_config
from ..intervals import t_interval
from ..methods import METHODS
from .frontier import METRICS, prompt_means, rule_rows
from .view import speedup_stats


def seed_summary(values: Sequence[float]) -> dict[str, object]:
    """Median and range of per-seed values (independent runs: no interval claimed from a few seeds)."""
    data = [float(v) for v in values if v is not None and v == v]
    if not data:
        return {"seeds": 0, "median": None, "low": None, "high": None, "values": []}
    return {"seeds": len(data), "median": statistics.median(data), "low": min(data), "high": max(data),
            "values": data}


def speed_summary(speedups: Sequence[float]) -> dict[str, object]:
    """The geometric mean of per-prompt speedups and the 95 % t-interval of their logs (None below two prompts)."""
    data = [float(v) for v in speedups if v and v > 0]
    if not data:
        return {"prompts": 0, "geometric_mean": None, "low": None, "high": None, "per_prompt": []}
    mean, low, high = t_interval([math.log(v) for v in data])
    banded = len(data) > 1
    return {"prompts": len(data), "geometric_mean": math.exp(mean), "low": math.exp(low) if banded else None,
            "high": math.exp(high) if banded else None, "per_prompt": data}


def baseline_of(methods: Sequence[str]) -> str:
    """The default rule the differences are taken against: the registry's `compare_baseline` (SpecTr) if
    listed, else the first."""
    return next((m for m in methods if METHODS[m].compare_baseline), methods[0])


@dataclass
class SetCompare:
    """The runs of one Compare over a set and what they measured so far (module docstring).

    `base` holds K, L, T, the tokens and the first seed; `leader` is the rule whose drafts the coupled
    runs judge. `run(target, draft)` yields after each prompt."""

    pair_key: str
    set_name: str
    prompt_ids: list[list[int]]
    methods: list[str]
    base: DecodeConfig
    coupled: bool
    repeats: int
    baseline: str
    leader: str
    timed: bool = False  # independent on a model pair: AR around each prompt's runs, a speedup per prompt
    per_prompt: dict = field(init=False)  # coupled: per rule and metric, one value per finished prompt
    # independent: per rule, per finished prompt, each seed's block efficiency; and (timed) that prompt's speedup
    efficiency: dict = field(init=False)
    speedups: dict = field(init=False)

    def __post_init__(self):
        self.per_prompt = {m: {k: [] for k in METRICS} for m in self.methods}
        self.efficiency = {m: [] for m in self.methods}
        self.speedups = {m: [] for m in self.methods}

    def seed_of(self, prompt: int, repeat: int) -> int:
        return self.base.seed + prompt + repeat * len(self.prompt_ids)

    def prompts_done(self) -> int:
        first = self.methods[0]
        return len(self.per_prompt[first]["block_efficiency"] if self.coupled else self.efficiency[first])

    @property
    def per_seed(self) -> dict[str, list[float]]:
        """Independent: per rule, each seed's mean block efficiency over the prompts finished so far."""
        if self.coupled or not self.prompts_done():
            return {}
        return {m: [sum(seeds[r] for seeds in runs) / len(runs) for r in range(self.repeats)]
                for m, runs in self.efficiency.items()}

    def speed(self) -> dict[str, dict]:
        """Independent on a model pair: per rule, `speed_summary` of its per-prompt speedups so far."""
        if not self.timed or not self.prompts_done():
            return {}
        return {m: speed_summary(values) for m, values in self.speedups.items()}

    def run(self, target, draft, on_iteration: Callable | None = None,
            progress: Callable[[float, str], None] | None = None) -> Iterator[None]:
        progress = progress or (lambda fraction, desc: None)
        yield from (self._coupled(target, draft, on_iteration, progress) if self.coupled
                    else self._independent(target, draft, on_iteration, progress))

    def _coupled(self, target, draft, on_iteration, progress):
        count = len(self.prompt_ids)
        for i, ids in enumerate(self.prompt_ids):
            progress(i / count, f"prompt {i + 1} of {count}, coupled")
            means = []
            for r in range(self.repeats):
                config = dataclasses.replace(self.base, method=self.leader, seed=self.seed_of(i, r))
                run = CoupledRun(config, self.methods, ids)
                for step in coupled_steps(target, draft, ids, self.methods, config):
                    if on_iteration is not None:
                        on_iteration(step)
                    run.steps.append(step)
                means.append(prompt_means(run, self.methods))
            for m in self.methods:  # a prompt's value: the mean over its repeats
                for metric in METRICS:
                    self.per_prompt[m][metric].append(sum(one[m][metric] for one in means) / len(means))
            yield

    def _independent(self, target, draft, on_iteration, progress):
        count, seeds = len(self.prompt_ids), [self.base.seed + r for r in range(self.repeats)]

        def ar_rate(ids) -> float:
            config = dataclasses.replace(self.base, method=AUTOREGRESSIVE, with_theory=False)
            return generate_config(target, None, ids, config, on_iteration).tokens_per_second

        for i, ids in enumerate(self.prompt_ids):
            progress(i / count, f"prompt {i + 1} of {count}, every rule with {len(seeds)} seed(s)")
            before = ar_rate(ids) if self.timed else None
            runs = {m: [generate_config(target, draft, ids, dataclasses.replace(self.base, method=m, seed=seed),
                                        on_iteration) for seed in seeds] for m in self.methods}
            if self.timed:  # each rule against the AR runs just before and after it on this prompt
                around = [before, ar_rate(ids)]
                for m in self.methods:
                    self.speedups[m].append(speedup_stats([run.tokens_per_second for run in runs[m]], around)["median"])
            for m in self.methods:
                self.efficiency[m].append([run.block_efficiency for run in runs[m]])
            yield

    def rule_rows(self) -> list[dict]:
        """The coupled rows (`frontier.rule_rows`, against the baseline) over the prompts finished so far."""
        if not self.coupled or not self.prompts_done():
            return []
        b = self.base
        return rule_rows(self.per_prompt, self.methods, b.num_drafts, b.draft_length, b.temperature,
                         references=[self.baseline])

    def table(self) -> list[dict]:
        """One flat row per rule, for the downloads: means and the paired differences against the baseline
        (coupled), or each seed's value with their median and range (independent)."""
        b = self.base
        common = {"view": "compare", "pair": self.pair_key, "prompt_set": self.set_name}
        settings = {"K": b.num_drafts, "L": b.draft_length, "T": b.temperature, "max_new_tokens": b.max_new_tokens}
        out = []
        if self.coupled:
            for row in self.rule_rows():
                line = common | {"prompts": row["prompts"], "method": row["method"]} | settings | {
                    "repeats": self.repeats, "coupled": True, "expected_accepted": row["expected_accepted"],
                    "block_efficiency": row["block_efficiency"], "baseline": self.baseline}
                for metric in METRICS:
                    mean, low, high = row[f"vs_{self.baseline}"][metric]
                    line |= {f"{metric}_minus_baseline": mean, f"{metric}_minus_baseline_low": low,
                             f"{metric}_minus_baseline_high": high}
                out.append(line)
            return out
        speed = self.speed()
        for method, values in self.per_seed.items():
            summary = seed_summary(values)
            line = common | {"prompts": self.prompts_done(), "method": method} | settings | {
                "coupled": False, "seeds": values, "median_block_efficiency": summary["median"],
                "low": summary["low"], "high": summary["high"]}
            if method in speed:  # wall-clock: the command reproduces how it is measured, not its value
                line |= {"speedup_geometric_mean": speed[method]["geometric_mean"],
                         "speedup_low": speed[method]["low"], "speedup_high": speed[method]["high"],
                         "speedup_per_prompt": speed[method]["per_prompt"]}
            out.append(line)
        return out
