"""The paper's trend verdicts (`spectr_gbv.bench.trends`), on synthetic per-prompt numbers.

Methodology: a verdict is a function of a paired 95 % t-interval, so each check builds
per-prompt values whose interval is known (scipy computes it independently here) and asserts
the verdict the interval implies: "holds" only when it excludes the opposite of the claim,
"does not hold" when it lies on the opposite side, "undecided" otherwise. One test runs the
coupled measurement on the Toy world to check that every setting gets the same prompts.
"""

from __future__ import annotations

import math
import random

import pytest
from scipy import stats

from spectr_gbv.bench import trends
from spectr_gbv.config import DecodeConfig
from spectr_gbv.coupled import coupled_run
from spectr_gbv.pairs import get_pair

pytestmark = pytest.mark.unit


def t_interval(d):
    return stats.t.interval(0.95, len(d) - 1, loc=sum(d) / len(d), scale=stats.sem(d))


@pytest.mark.parametrize("lo, hi, expected", [(0.1, 0.3, trends.HOLDS), (-0.3, -0.1, trends.FAILS),
                                              (-0.1, 0.3, trends.UNDECIDED), (0.0, 0.2, trends.UNDECIDED),
                                              (float("nan"), float("nan"), trends.UNDECIDED)])
def test_verdict_above_needs_the_whole_interval_on_one_side(lo, hi, expected):
    assert trends.verdict_above(lo, hi) == expected


@pytest.mark.parametrize("lo, hi, expected", [(-0.1, 0.1, trends.HOLDS), (0.3, 0.5, trends.FAILS), (-0.5, -0.3, trends.FAILS),
                                              (0.1, 0.3, trends.UNDECIDED), (-0.3, 0.3, trends.UNDECIDED)])
def test_verdict_within_a_bound(lo, hi, expected):
    assert trends.verdict_within(lo, hi, 0.2) == expected


def test_difference_trend_uses_the_t_interval_of_the_differences():
    clear = [0.30, 0.25, 0.35, 0.28, 0.32]
    trend = trends.difference_trend("a above b", "a − b", clear)
    assert (trend.lo, trend.hi) == pytest.approx(t_interval(clear)) and trend.verdict == trends.HOLDS
    assert trend.prompts == 5 and "[+0." in trend.line() and "**holds**" in trend.line()
    noisy = [1.0, -0.8, 0.5, -0.4]  # mean 0.075, interval straddles 0
    assert trends.difference_trend("a above b", "a − b", noisy).verdict == trends.UNDECIDED
    assert trends.difference_trend("a above b", "a − b", [-x for x in clear]).verdict == trends.FAILS
    single = trends.difference_trend("a above b", "a − b", [0.4])
    assert single.verdict == trends.UNDECIDED and "one prompt" in single.line()


MAIN = (3, 8, 0.4)
AXES = {"K": [(1, 8, 0.4), MAIN, (7, 8, 0.4)], "L": [(3, 12, 0.4), (3, 24, 0.4)], "T": [(3, 8, 0.1), MAIN, (3, 8, 0.7)]}


def synthetic(prompts=12, seed=0):
    """Per-prompt BE with known structure: spectr_gbv = spectr + 0.2 (clear), gbv = spectr_gbv +-
    noise (undecided), BE rising with K, falling with L, flat in T."""
    rng = random.Random(seed)
    base = [2.0 + rng.uniform(-0.3, 0.3) for _ in range(prompts)]
    noise = lambda: rng.gauss(0.0, 0.02)  # noqa: E731
    be = {}
    for K, L, T in {s for axis in AXES.values() for s in axis}:
        level = [b + 0.1 * K - 0.04 * (L - 8) for b in base]
        be[(K, L, T)] = {"spectr": [v + noise() for v in level], "spectr_gbv": [v + 0.2 + 0.01 * K + noise() for v in level],
                         "sd": [v - 0.5 + noise() for v in level]}
        be[(K, L, T)]["gbv"] = [v + rng.choice((-0.3, 0.3)) for v in be[(K, L, T)]["spectr_gbv"]]
    return be


def test_trend_checks_give_the_verdicts_the_synthetic_numbers_imply():
    checks = {t.claim.split(" (")[0]: t for t in trends.trend_checks(synthetic(), MAIN, AXES)}
    assert checks["SpecTr-GBV BE above SD"].verdict == trends.HOLDS
    assert checks["SpecTr-GBV BE above SpecTr"].verdict == trends.HOLDS
    assert checks["SpecTr-GBV BE above GBV"].verdict == trends.UNDECIDED
    assert checks["BE rising with K"].verdict == trends.HOLDS
    assert checks["gap SpecTr-GBV minus SpecTr widening with K"].verdict == trends.HOLDS  # +0.01 per K, 0.06 in all
    assert checks["BE rising with L"].verdict == trends.FAILS
    assert checks["BE stable in T"].verdict == trends.HOLDS
    assert "AS-BV BE above SpecTr" not in checks  # rules that were not measured are skipped
    rising = checks["BE rising with K"]
    be = synthetic()
    d = [a - b for a, b in zip(be[(7, 8, 0.4)]["spectr_gbv"], be[(1, 8, 0.4)]["spectr_gbv"])]
    assert (rising.lo, rising.hi) == pytest.approx(t_interval(d)) and rising.prompts == 12


def test_stability_fails_when_the_temperatures_differ_by_more_than_the_bound():
    low = [1.5 + 0.01 * i for i in range(8)]
    trend = trends.stability_trend({0.1: low, 0.4: [v + 0.5 for v in low], 0.7: [v + 1.0 for v in low]})
    assert trend.verdict == trends.FAILS and "T = 0.7" in trend.difference and "T = 0.1" in trend.difference


def test_speedup_peak_inside_holds_only_when_an_interior_length_beats_both_ends():
    rng = random.Random(1)
    jitter = lambda: [rng.gauss(0, 0.01) for _ in range(6)]  # noqa: E731
    peaked = {12: [1.0 + e for e in jitter()], 16: [1.3 + e for e in jitter()], 20: [1.2 + e for e in jitter()],
              24: [0.9 + e for e in jitter()]}
    assert trends.speedup_peak_trend(peaked).verdict == trends.HOLDS
    rising = {L: [0.1 * i + e for e in jitter()] for i, L in enumerate((12, 16, 20, 24))}
    assert trends.speedup_peak_trend(rising).verdict == trends.FAILS
    assert trends.speedup_peak_trend({12: [1.0], 24: [1.1]}).verdict == trends.UNDECIDED  # no interior L


def test_measure_pairs_every_setting_on_the_same_prompts_and_respects_the_budget():
    pair = get_pair("toy")
    prompts = [pair.encode(t) for t in ("the", "the cat")]
    settings = [(2, 2, 0.7), (1, 3, 0.7)]
    rules = {settings[0]: ["spectr"], settings[1]: ["spectr", "as_bv"]}
    be, used = trends.measure(pair.target, pair.draft, prompts, rules, 5)
    assert used == 2 and all(len(be[s][m]) == 2 for s in settings for m in rules[s])
    assert "as_bv" not in be[settings[0]]  # only the rules asked for at a setting
    run = coupled_run(pair.target, pair.draft, prompts[1], ["spectr", "as_bv"],
                      DecodeConfig(method="spectr_gbv", num_drafts=1, draft_length=3, temperature=0.7, max_new_tokens=5,
                                   seed=1, with_theory=False))
    assert be[(1, 3, 0.7)]["as_bv"][1] == pytest.approx(run.summary("as_bv")["block_efficiency"])
    assert not any(math.isnan(v) for s in settings for v in be[s]["spectr"])
    _, used = trends.measure(pair.target, pair.draft, prompts, rules, 5, time_budget_s=0.0)
    assert used == 1  # the first prompt always runs; no new one starts after the budget
