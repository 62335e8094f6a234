"""The paper's trends as verdicts, each with a 95 % interval of a paired difference over prompts.

Used by `python -m spectr_gbv.bench.paper` (see `--trends-only`). A trend such as "SpecTr-GBV's
block efficiency is above SpecTr's" or "block efficiency grows with K" is a claim about a
difference d (of two rules at one setting, or of one rule at two settings). Per prompt d is
measured on coupled runs (`spectr_gbv.coupled`: one decode per prompt and setting, judged by
every rule with the same drafts and coins), so the rules' difference carries no sampling noise
of its own; prompts are the independent units, and the interval is the t-interval of the mean
of d over them (`frontier.paired_interval`).

Verdicts: "holds" only when the interval excludes the opposite of the claim (for "d > 0": the
whole interval above 0), "does not hold" when it lies entirely on the opposite side, and
"undecided" when it straddles the boundary (more prompts could decide it).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

from ..config import DecodeConfig
from ..coupled import coupled_run
from ..methods import METHODS
from .frontier import paired_interval

Setting = tuple[int, int, float]  # (K, L, T)
PerPrompt = dict[Setting, dict[str, list[float]]]  # setting -> rule -> per-prompt block efficiency

HOLDS, FAILS, UNDECIDED = "holds", "does not hold", "undecided"
STABLE_FRACTION = 0.15  # "BE stable in T": every T within 15 % of the mean BE of each other
LEADER = "spectr_gbv"  # advances the shared context in the coupled runs


@dataclass(frozen=True)
class Trend:
    claim: str
    verdict: str  # HOLDS, FAILS or UNDECIDED
    difference: str  # what d is, in words
    mean: float
    lo: float
    hi: float
    prompts: int
    detail: str = ""

    def line(self) -> str:
        interval = "no interval (one prompt)" if math.isnan(self.lo) else f"[{self.lo:+.3f}, {self.hi:+.3f}]"
        extra = f"; {self.detail}" if self.detail else ""
        return (f"{self.claim}: **{self.verdict}** ({self.difference} = {self.mean:+.3f}, 95 % interval {interval}, "
                f"{self.prompts} prompts{extra})")


def verdict_above(lo: float, hi: float, bound: float = 0.0) -> str:
    """For the claim d > bound: holds when the interval lies above it, fails when below."""
    if math.isnan(lo) or math.isnan(hi):
        return UNDECIDED
    if lo > bound:
        return HOLDS
    if hi < bound:
        return FAILS
    return UNDECIDED


def verdict_within(lo: float, hi: float, bound: float) -> str:
    """For the claim |d| < bound: holds when the interval lies inside (-bound, bound), fails
    when it lies wholly outside (above bound or below -bound)."""
    if math.isnan(lo) or math.isnan(hi):
        return UNDECIDED
    if -bound < lo and hi < bound:
        return HOLDS
    if lo >= bound or hi <= -bound:
        return FAILS
    return UNDECIDED


def difference_trend(claim: str, difference: str, d: Sequence[float], detail: str = "") -> Trend:
    """The claim mean(d) > 0 over prompts."""
    mean, lo, hi = paired_interval(list(d), [0.0] * len(d))
    return Trend(claim, verdict_above(lo, hi), difference, mean, lo, hi, len(d), detail)


def _minus(a: Sequence[float], b: Sequence[float]) -> list[float]:
    return [x - y for x, y in zip(a, b, strict=True)]


def _means(values: Iterable[Sequence[float]]) -> str:
    return ", ".join(f"{sum(v) / len(v):.2f}" for v in values)


def trend_checks(be: PerPrompt, main: Setting, axes: dict[str, list[Setting]]) -> list[Trend]:
    """The paper's trends (and this project's rules against SpecTr) on per-prompt coupled BE.

    `main` is the paper's default setting; `axes` maps "K", "L", "T" to its settings along
    that axis, in the paper's order. Rules or axes that were not measured are skipped."""
    out = []
    at_main = be[main]
    rules = [("spectr_gbv", other) for other in ("sd", "spectr", "gbv")]
    rules += [("as_bv", "spectr"), ("as_bv", "spectr_gbv"), ("traversal", "spectr")]  # the rules this project adds
    for rule, other in rules:
        if rule in at_main and other in at_main:
            out.append(difference_trend(
                f"{METHODS[rule].label} BE above {METHODS[other].label} (K = {main[0]}, L = {main[1]}, T = {main[2]})",
                f"BE {rule} − {other}", _minus(at_main[rule], at_main[other])))
    k_axis, l_axis, t_axis = (axes.get(name, []) for name in ("K", "L", "T"))
    if len(k_axis) >= 2 and all(LEADER in be[s] for s in k_axis):
        first, last = k_axis[0], k_axis[-1]
        out.append(difference_trend(
            f"BE rising with K ({METHODS[LEADER].label}, K = {first[0]} to {last[0]})", f"BE(K = {last[0]}) − BE(K = {first[0]})",
            _minus(be[last][LEADER], be[first][LEADER]), detail=f"means {_means(be[s][LEADER] for s in k_axis)}"))
        if all("spectr" in be[s] for s in (first, last)):
            gap = lambda s: _minus(be[s][LEADER], be[s]["spectr"])  # noqa: E731
            out.append(difference_trend(
                f"gap {METHODS[LEADER].label} minus SpecTr widening with K (K = {first[0]} to {last[0]})",
                f"gap(K = {last[0]}) − gap(K = {first[0]})", _minus(gap(last), gap(first)),
                detail=f"gaps {_means(gap(s) for s in k_axis if 'spectr' in be[s])}"))
    if len(l_axis) >= 2 and all(LEADER in be[s] for s in l_axis):
        first, last = l_axis[0], l_axis[-1]
        out.append(difference_trend(
            f"BE rising with L ({METHODS[LEADER].label}, L = {first[1]} to {last[1]})", f"BE(L = {last[1]}) − BE(L = {first[1]})",
            _minus(be[last][LEADER], be[first][LEADER]), detail=f"means {_means(be[s][LEADER] for s in l_axis)}"))
    if len(t_axis) >= 2 and all(LEADER in be[s] for s in t_axis):
        out.append(stability_trend({s[2]: be[s][LEADER] for s in t_axis}))
    return out


def stability_trend(by_temperature: dict[float, list[float]]) -> Trend:
    """BE stable in T: the two temperatures whose mean BE lies furthest apart differ, per
    prompt, by less than STABLE_FRACTION of the mean BE over all of them."""
    means = {t: sum(v) / len(v) for t, v in by_temperature.items()}
    low, high = min(means, key=means.get), max(means, key=means.get)
    overall = sum(means.values()) / len(means)
    bound = STABLE_FRACTION * overall
    mean, lo, hi = paired_interval(by_temperature[high], by_temperature[low])
    return Trend(f"BE stable in T ({METHODS[LEADER].label}; widest pair within {STABLE_FRACTION:.0%} of the mean BE, "
                 f"{bound:.3f})", verdict_within(lo, hi, bound), f"BE(T = {high}) − BE(T = {low})", mean, lo, hi,
                 len(by_temperature[high]), detail=f"means {', '.join(f'T = {t}: {m:.2f}' for t, m in means.items())}")


def speedup_peak_trend(by_length: dict[int, list[float]]) -> Trend:
    """SR peaking inside the L range, on per-prompt speedups (paired by prompt across L).

    d is the best interior L's speedup minus the better of the two ends': holds when its
    interval is above 0, fails when below (an end is faster)."""
    lengths = sorted(by_length)
    means = {L: sum(v) / len(v) for L, v in by_length.items()}
    inner = max(lengths[1:-1], key=means.get) if len(lengths) > 2 else None
    if inner is None:
        return Trend("SR peaking inside the L range", UNDECIDED, "no interior L measured", float("nan"),
                     float("nan"), float("nan"), 0)
    end = max((lengths[0], lengths[-1]), key=means.get)
    d = _minus(by_length[inner], by_length[end])
    trend = difference_trend(f"SR peaking inside the L range (L = {lengths[0]} to {lengths[-1]})",
                             f"SR(L = {inner}) − SR(L = {end})", d,
                             detail=f"means {', '.join(f'L = {L}: {means[L]:.2f}' for L in lengths)}")
    return trend


def measure(target, draft, prompt_ids: Sequence[Sequence[int]], rules: dict[Setting, Sequence[str]],
            max_new_tokens: int, time_budget_s: float | None = None,
            log: Callable[[str], None] = lambda line: None) -> tuple[PerPrompt, int]:
    """Coupled block efficiency per setting, rule and prompt: (values, prompts measured).

    `rules` maps each setting to the rules judged there (a trend along an axis needs only the
    rules it compares; every rule costs a verification per iteration). Prompt after prompt,
    every setting for each, so that a time budget (checked before a new prompt starts)
    leaves every setting with the same prompts, paired."""
    be: PerPrompt = {s: {m: [] for m in methods} for s, methods in rules.items()}
    started = time.perf_counter()
    done = 0
    for seed, ids in enumerate(prompt_ids):
        if time_budget_s is not None and done and time.perf_counter() - started > time_budget_s:
            break
        for (K, L, T), methods in rules.items():
            config = DecodeConfig(method=LEADER, num_drafts=K, draft_length=L, temperature=T,
                                  max_new_tokens=max_new_tokens, seed=seed, with_theory=False)
            run = coupled_run(target, draft, list(ids), methods, config)
            for m in methods:
                be[(K, L, T)][m].append(run.summary(m)["block_efficiency"])
        done += 1
        log(f"trend prompt {done}: {len(rules)} settings, {time.perf_counter() - started:.0f} s")
    return be, done
