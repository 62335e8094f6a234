"""The K x L grid's cells from the coupled frontier's rows (`spectr_gbv.bench.frontier.measure`), pure.

A cell is one (K, L) at one T. Its value is either the best exact rule's mean E[tau | drafts] over
the prompts ("expected") or the gain of one rule over another ("gain": the mean of the paired
per-prompt differences, rule minus baseline; rule "best" is the cell's best exact rule). Each
cell carries paired 95 % t-intervals (`frontier.paired_interval`: a prompt is the unit, as in the
frontier's tables) and three facts, each read off one interval:

* tie: the best exact rule ties the runner-up, the interval of best minus runner-up covering 0
  (the runner-up: the exact rule with the next highest mean, leaving out the rules that
  coincide with the best);
* no_gain: no gain over the baseline, the interval of the shown rule minus the baseline
  covering 0;
* unranked: too few prompts to rank, every exact rule's interval against the best covering 0.

It also names the rules within noise of the best ("tied": each one's interval against the best
covers 0) and the rules whose per-prompt values equal the shown rule's exactly ("coincide"),
which a tie would otherwise hide.

The app's Grid tab draws these cells (components.render.kl_heatmap). From the command line, the
cells of a `frontier.json` (what `python -m spectr_gbv.bench.frontier` writes), as JSON rows:

    python -m spectr_gbv.bench.grid_cells kl-grid/frontier.json [--value expected|gain] [--rule best]
        [--baseline spectr] [--temperature 0.7]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from ..methods import METHODS
from .frontier import paired_interval, without_nan

EXPECTED, GAIN = "expected", "gain"
CELL_VALUES = (EXPECTED, GAIN)
BEST = "best"
DEFAULT_BASELINE = next(name for name, spec in METHODS.items() if spec.compare_baseline)  # SpecTr, as in Compare
METRIC = "expected_accepted"


@dataclass(frozen=True)
class Cell:
    K: int
    L: int
    T: float
    prompts: int
    value: float  # NaN where it cannot be computed (a rule with no E[tau | drafts])
    rule: str  # the rule the value is of (the best exact rule, or the rule asked for)
    baseline: str
    interval: tuple[float, float, float]  # paired rule - baseline: mean, low, high (NaN bounds: one prompt)
    tied: tuple[str, ...] = ()  # exact rules within noise of the best (each one's interval against it covers 0)
    same: tuple[str, ...] = ()  # rules with exactly the rule's per-prompt values
    tie: bool | None = None  # the best ties the runner-up: None where there is none or one prompt cannot tell
    values: dict = field(default_factory=dict)  # every rule's mean E[tau | drafts] in this cell
    best: str = ""  # the best exact rule (the rule shown, where the rule asked for is "best")
    runner_up: str | None = None  # the next exact rule by mean, the rules coinciding with the best left out
    runner_interval: tuple[float, float, float] = (math.nan, math.nan, math.nan)  # best - runner-up, paired
    no_gain: bool | None = None  # rule - baseline covers 0: None where the rule is the baseline or one prompt
    unranked: bool = False  # every exact rule's interval against the best covers 0: too few prompts to rank


def _finite(values: Sequence[float | None]) -> bool:
    return bool(values) and all(v is not None and math.isfinite(v) for v in values)


def covers_zero(interval: tuple[float, float, float]) -> bool | None:
    """Whether a paired 95 % interval covers 0 (a tie within noise); None where it has no bounds (one prompt)."""
    _, low, high = interval
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return None
    return bool(low <= 0 <= high)


def best_exact(rows: Sequence[dict]) -> dict | None:
    """The exact rule with the highest mean E[tau | drafts] among one configuration's rows (first listed on a tie)."""
    exact = [r for r in rows if r["exact"] and _finite(r["per_prompt"][METRIC])]
    return max(exact, key=lambda r: sum(r["per_prompt"][METRIC]) / len(r["per_prompt"][METRIC]), default=None)


def cell(rows: Sequence[dict], value: str = EXPECTED, rule: str = BEST, baseline: str = DEFAULT_BASELINE) -> Cell:
    """One configuration's rows (one per rule, as `frontier.measure` returns them) as a grid cell."""
    if value not in CELL_VALUES:
        raise ValueError(f"the cell value must be one of {', '.join(CELL_VALUES)}, got {value!r}")
    by_rule = {r["method"]: r for r in rows}
    first = rows[0]
    chosen = best_exact(rows) if rule == BEST else by_rule.get(rule)
    if chosen is None or baseline not in by_rule:
        missing = "an exact rule with E[tau | drafts]" if chosen is None else baseline
        raise ValueError(f"K = {first['K']}, L = {first['L']}: no rows for {missing}")
    mine, theirs = chosen["per_prompt"][METRIC], by_rule[baseline]["per_prompt"][METRIC]
    nan = (math.nan, math.nan, math.nan)
    interval = paired_interval(mine, theirs) if _finite(mine) and _finite(theirs) else nan
    means = {m: (sum(r["per_prompt"][METRIC]) / len(r["per_prompt"][METRIC]) if _finite(r["per_prompt"][METRIC])
                 else math.nan) for m, r in by_rule.items()}
    same = tuple(m for m, r in by_rule.items() if m != chosen["method"] and _finite(mine)
                 and list(r["per_prompt"][METRIC]) == list(mine))
    best_row = best_exact(rows)
    best = best_row["method"] if best_row is not None else chosen["method"]
    best_values = list(by_rule[best]["per_prompt"][METRIC])
    # The exact rules with values that differ from the best's: the ones a ranking has to separate from it.
    others = [m for m, r in by_rule.items() if m != best and r["exact"] and _finite(r["per_prompt"][METRIC])
              and _finite(best_values) and list(r["per_prompt"][METRIC]) != best_values]
    against = {m: paired_interval(best_values, by_rule[m]["per_prompt"][METRIC]) for m in others}
    covered = {m: covers_zero(against[m]) for m in others}
    runner_up = max(others, key=lambda m: means[m], default=None)
    runner_interval = against[runner_up] if runner_up is not None else nan
    tie = covered[runner_up] if runner_up is not None else None
    tied = tuple(m for m in others if covered[m])
    unranked = bool(others) and all(covered[m] is True for m in others)
    no_gain = None if chosen["method"] == baseline else covers_zero(interval)
    shown = interval[0] if value == GAIN else means[chosen["method"]]
    return Cell(int(first["K"]), int(first["L"]), float(first["T"]), len(mine), float(shown), chosen["method"],
                baseline, tuple(float(x) for x in interval), tied, same, tie, means, best, runner_up,
                tuple(float(x) for x in runner_interval), no_gain, unranked)


def grid_cells(rows: Sequence[dict], value: str = EXPECTED, rule: str = BEST, baseline: str = DEFAULT_BASELINE,
               temperature: float | None = None) -> list[Cell]:
    """Every (K, L) of `rows` (frontier rows, in any order) at `temperature` (None: the rows' only T) as cells."""
    temperatures = sorted({float(r["T"]) for r in rows})
    if temperature is None:
        if len(temperatures) > 1:
            raise ValueError(f"the rows have several temperatures ({', '.join(f'{t:g}' for t in temperatures)}): "
                             "choose one")
        temperature = temperatures[0] if temperatures else None
    chosen = sorted((r for r in rows if float(r["T"]) == temperature), key=lambda r: (r["K"], r["L"]))
    return [cell(list(group), value, rule, baseline)
            for _, group in itertools.groupby(chosen, key=lambda r: (r["K"], r["L"]))]


@functools.cache
def _half_widths(most: int):
    """t(0.975, n - 1) / sqrt(n) for n = 2 .. most: a paired 95 % interval's half-width per unit of spread."""
    import numpy as np
    from scipy import stats

    sizes = np.arange(2, most + 1)
    return sizes, stats.t.ppf(0.975, sizes - 1) / np.sqrt(sizes)


def prompts_to_rank(c: Cell, most: int = 10_000) -> int | None:
    """The prompts this cell's best rule needs to separate from its runner-up, read off the cell's own paired
    differences: the smallest n with t(0.975, n - 1) x sd / sqrt(n) under |mean| (the interval a grid of n such
    prompts would draw, with this cell's mean and spread); None without a runner-up or an interval, or past `most`."""
    mean, low, high = c.runner_interval
    n = c.prompts
    if c.runner_up is None or n < 2 or not _finite([mean, low, high]) or mean == 0:
        return None
    sizes, half = _half_widths(max(most, n))
    sd = (high - mean) / half[n - 2]
    if sd == 0:
        return 2
    under = half < abs(mean) / sd
    return int(sizes[under.argmax()]) if under.any() and sizes[under.argmax()] <= most else None


def label(method: str) -> str:
    return METHODS[method].label if method in METHODS else method


def cell_row(c: Cell, value: str) -> dict:
    """A cell as a flat row (the Grid's download and data)."""
    mean, low, high = c.interval
    runner_mean, runner_low, runner_high = c.runner_interval
    return {"K": c.K, "L": c.L, "T": c.T, "prompts": c.prompts, "cell_value": value,
            "value": c.value, "rule": c.rule, "baseline": c.baseline, "rule_minus_baseline": mean,
            "interval_low": low, "interval_high": high, "no_gain_over_baseline": c.no_gain,
            "best": c.best, "runner_up": c.runner_up, "best_minus_runner_up": runner_mean,
            "runner_up_low": runner_low, "runner_up_high": runner_high, "best_ties_runner_up": c.tie,
            "too_few_prompts_to_rank": c.unranked, "tied_with_best": list(c.tied),
            "coincide_with_rule": list(c.same)}


def read_rows(path: Path) -> list[dict]:
    """The rows of a frontier.json, a NaN (a rule with no theory line, which the file writes as null) restored."""
    rows = json.loads(Path(path).read_text())["rows"]
    for row in rows:
        row["per_prompt"] = {k: [math.nan if v is None else v for v in values]
                             for k, values in row["per_prompt"].items()}
    return rows


def main(argv: Sequence[str] | None = None) -> list[dict]:
    """Print the cells of a frontier.json as JSON rows (`cell_row`); returns them."""
    parser = argparse.ArgumentParser(prog="python -m spectr_gbv.bench.grid_cells", description=__doc__.splitlines()[0])
    parser.add_argument("results", help="a frontier.json (python -m spectr_gbv.bench.frontier --out FOLDER)")
    parser.add_argument("--value", choices=CELL_VALUES, default=EXPECTED)
    parser.add_argument("--rule", default=BEST, help="a rule's name, or best (the best exact rule in each cell)")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--temperature", type=float, default=None, help="T (needed when the file has several)")
    args = parser.parse_args(argv)
    rows = read_rows(Path(args.results))
    try:
        cells = [cell_row(c, args.value)
                 for c in grid_cells(rows, args.value, args.rule, args.baseline, args.temperature)]
    except ValueError as error:
        parser.error(str(error))
    print(json.dumps(without_nan(cells), indent=1))
    return cells


if __name__ == "__main__":
    main(sys.argv[1:])
