"""What a request will cost before it starts: expected iterations and seconds, per pair.

`caps` asks what the server would refuse; this module asks what will finish. Every view sizes
its defaults and slider caps from these estimates, so its first click ends inside the budget
(`components.serving.limits.LIMITS.seconds`) on a 2-core CPU, also beside a second visitor.

Iterations are the *expected* count, not the fewest: an iteration emits tau + 1 tokens, with
the i.i.d. model of `spectr_gbv.theory` (P(tau >= j) = alpha^j, j <= L) and the pair's
measured per-token acceptance alpha. The single-draft law is used for every rule: exact
multi-draft rules accept at least as much, so the estimate errs long. `iteration_law` gives
the mean and variance of a run's iterations exactly (the last iteration is cut at the token
cap), and `fits_iterations` adds four standard deviations of the sum of N runs.

Seconds come from per-pair costs (`PAIR_COSTS`) measured with one torch thread while another
process held the second core (what a visitor sees beside another one's run, once the server
runs one thread per model slot); the numbers and how they were measured are in docs/views.md
("What a click costs"). On a GPU or a faster CPU the estimates err long, which only makes the
defaults smaller than they could be.
"""

from __future__ import annotations

import math
from functools import lru_cache

from spectr_gbv import AUTOREGRESSIVE
from spectr_gbv.pairs import (DEFAULT_KEY, FIRST_FEATURE_KEY, FIRST_FUSED_KEY, LAYERED_KEY, PAIRS, TOY_KEY, TWO_TOKEN_KEY,
                              is_teaching, pair_key_of)

from ...serving import limits as limits_module
from ...serving.run_cost import PairCost

DEFAULT_FRACTION = 0.5  # a view's defaults must be estimated to take at most this share of the time budget
CAP_FRACTION = 0.9  # a slider's cap: the most whose estimate still fits this share of the budget
SIGMAS = 4.0  # iterations: a sum of N runs stays under its mean + SIGMAS sd (a 1-in-30,000 overrun)
COUPLED_OVERHEAD = 1.4  # a coupled iteration: one draft and one scoring call, then every method's verdict


# Each pair's costs on a 2-core CPU, one torch thread, the other core busy (the model, PairCost, is
# components.serving.run_cost's, which the ZeroGPU durations read too).
# The default pair (SmolLM2-135M, fp16-weights kernel, the feature draft): AR 40 tokens 2.25 s,
# AS-BV+H at K = 2, L = 4 13 iterations in 2.2 s, a 3-token fidelity run 0.30 s, an exact-law
# scoring call 0.15 s (measured with a training job on the other core). alpha is the draft's
# held-out 0.50 (assets/results/default_draft.md; the first fused draft's 0.472, the first feature
# draft's 0.377), lower than
# on the example prompts: the estimate errs long. The teaching pairs are lookup tables: an
# iteration is Python.
PAIR_COSTS: dict[str, PairCost] = {
    DEFAULT_KEY: PairCost(alpha=0.50, step_s=0.06, iteration_s=0.06, position_s=0.006, draft_step_s=0.012,
                          prefill_s=0.15),
    FIRST_FUSED_KEY: PairCost(alpha=0.472, step_s=0.06, iteration_s=0.06, position_s=0.006, draft_step_s=0.012,
                              prefill_s=0.15),
    FIRST_FEATURE_KEY: PairCost(alpha=0.377, step_s=0.06, iteration_s=0.06, position_s=0.006, draft_step_s=0.012,
                                prefill_s=0.15),
    LAYERED_KEY: PairCost(alpha=0.40, step_s=0.06, iteration_s=0.06, position_s=0.006, draft_step_s=0.03,
                          prefill_s=0.2),
    TOY_KEY: PairCost(alpha=0.7, step_s=0.0002, iteration_s=0.007, position_s=0.0, draft_step_s=0.0, prefill_s=0.0),
    TWO_TOKEN_KEY: PairCost(alpha=2 / 3, step_s=0.0002, iteration_s=0.008, position_s=0.0, draft_step_s=0.0,
                            prefill_s=0.0),  # alpha = sum min(p, q) = 1/3 + 1/3
}
# A hub pair (360M and up, an unmeasured operator's pair): a guess three times the default's.
HUB_COST = PairCost(alpha=0.5, step_s=0.2, iteration_s=0.2, position_s=0.02, draft_step_s=0.06, prefill_s=0.5)


def pair_cost(pair_key) -> PairCost:
    return PAIR_COSTS.get(pair_key_of(pair_key), HUB_COST)


def budget_seconds(limits=None) -> float:
    return float((limits or limits_module.LIMITS).seconds)


# ------------------------------------------------------------------ iterations


@lru_cache(maxsize=4096)
def iteration_law(tokens: int, alpha: float, draft_length: int) -> tuple[float, float]:
    """(mean, variance) of the iterations one run of `tokens` tokens takes (draft_length 0: plain AR, one a token).

    Each iteration emits 1 + tau tokens, P(tau = j) = alpha^j (1 - alpha) for j < L and alpha^L
    for j = L, and the run stops at `tokens` (a run that could stop early is counted to the end)."""
    tokens = max(int(tokens), 0)
    if draft_length <= 0:
        return float(tokens), 0.0
    emit = [alpha**j * (1 - alpha) for j in range(draft_length)] + [alpha**draft_length]  # P(1 + j tokens)
    first, second = [0.0] * (tokens + 1), [0.0] * (tokens + 1)  # E[n], E[n^2] with r tokens left
    for left in range(1, tokens + 1):
        m = s = 0.0
        for j, p in enumerate(emit):
            rest = max(left - 1 - j, 0)
            m += p * (1 + first[rest])
            s += p * (1 + 2 * first[rest] + second[rest])
        first[left], second[left] = m, s
    return first[tokens], max(second[tokens] - first[tokens] ** 2, 0.0)


def expected_iterations(pair_key, method: str, draft_length: int, tokens: int) -> float:
    length = 0 if method == AUTOREGRESSIVE else int(draft_length)
    return iteration_law(int(tokens), pair_cost(pair_key).alpha, length)[0]


def expected_steps(runs: list[tuple[int, int]], tokens: int, pair_key) -> float:
    """The expected decoding iterations of `runs` ((how many, L; 0 for AR) runs of `tokens` tokens)."""
    alpha = pair_cost(pair_key).alpha
    return sum(count * iteration_law(int(tokens), alpha, int(length))[0] for count, length in runs)


def fits_iterations(runs: list[tuple[int, int]], tokens: int, pair_key, available: int) -> bool:
    """Whether `runs` ((how many, L; 0 for AR) runs of `tokens` tokens) fit `available` iterations (mean + SIGMAS sd)."""
    alpha = pair_cost(pair_key).alpha
    mean = var = 0.0
    for count, length in runs:
        m, v = iteration_law(int(tokens), alpha, int(length))
        mean, var = mean + count * m, var + count * v
    return mean + SIGMAS * math.sqrt(var) <= available


# ------------------------------------------------------------------ seconds


def iteration_seconds(pair_key, num_drafts: int, draft_length: int) -> float:
    return pair_cost(pair_key).iteration_seconds(num_drafts, draft_length)


def run_seconds(pair_key, method: str, num_drafts: int, draft_length: int, tokens: int) -> float:
    """Expected seconds of one decoding run."""
    cost = pair_cost(pair_key)
    if method == AUTOREGRESSIVE:
        return cost.ar_seconds(tokens)
    return cost.drafted_seconds(expected_iterations(pair_key, method, draft_length, tokens), num_drafts, draft_length)


def compare_seconds(pair_key, num_methods: int, num_drafts: int, draft_length: int, tokens: int, repeats: int,
                    coupled: bool) -> float:
    """Compare: AR before, between and after the methods (num_methods + 1 AR runs on a timed pair), every
    method `repeats` times, and `repeats` coupled runs."""
    method = "drafted"  # any drafted method: the estimate is the same for every rule
    one = run_seconds(pair_key, method, num_drafts, draft_length, tokens)
    ar_runs = compare_ar_runs(pair_key, num_methods)
    return (ar_runs * run_seconds(pair_key, AUTOREGRESSIVE, num_drafts, draft_length, tokens)
            + num_methods * repeats * one + (repeats * one * COUPLED_OVERHEAD if coupled else 0.0))


def is_timed(pair_key) -> bool:
    """Whether a pair's wall-clock times mean anything: not the teaching pairs, whose "models" are lookup tables."""
    return not is_teaching(pair_key)


def compare_ar_runs(pair_key, num_methods: int) -> int:
    """AR runs of a Compare: once on a teaching pair (untimed), else before each method and after the last."""
    return num_methods + 1 if is_timed(pair_key) else 1


def sweep_interleaves_ar(pair_key, repeats: int) -> bool:
    """Whether a Sweep times AR just before and after every method's runs, as Compare does: on a timed pair
    with Repeats > 1, where its chart shows speedups (a point timed once is noise, left off the chart, so
    its 1 + methods x values AR runs would buy nothing)."""
    return is_timed(pair_key) and int(repeats) > 1


def sweep_ar_runs(axis: str, values: list[float], num_methods: int, interleaved: bool) -> int:
    """AR runs of a Sweep (`spectr_gbv.sweep.iter_sweep`): interleaved, one opening each point at a new
    temperature (every point on T, the first on K and L) and one after every method at every point;
    else one per temperature."""
    if not interleaved:
        return len(set(values)) if axis == "T" else 1
    openings = 1 + sum(a != b for a, b in zip(values, values[1:])) if axis == "T" else 1
    return openings + num_methods * len(values)


def sweep_seconds(pair_key, num_methods: int, axis: str, values: list[float], num_drafts: int, draft_length: int,
                  tokens: int, repeats: int) -> float:
    """Sweep: every method at every value, `repeats` seeds each, and its AR runs (`sweep_ar_runs`)."""
    total = 0.0
    for value in values:
        k = int(value) if axis == "K" else int(num_drafts)
        length = int(value) if axis == "L" else int(draft_length)
        total += num_methods * repeats * run_seconds(pair_key, "drafted", k, length, tokens)
    ar_runs = sweep_ar_runs(axis, values, num_methods, sweep_interleaves_ar(pair_key, repeats))
    return total + ar_runs * run_seconds(pair_key, AUTOREGRESSIVE, num_drafts, draft_length, tokens)


def fidelity_seconds(pair_key, method: str, num_drafts: int, draft_length: int, runs: int, tokens: int) -> float:
    """Fidelity: N runs of `tokens` tokens, then about one exact-law scoring call per run (a new prefix each)."""
    cost = pair_cost(pair_key)
    return runs * run_seconds(pair_key, method, num_drafts, draft_length, tokens) + (1 + runs) * (
        cost.prefill_s + cost.step_s)


def fits_seconds(seconds: float, fraction: float, limits=None) -> bool:
    return seconds <= fraction * budget_seconds(limits)


def about(seconds: float) -> str:
    """An estimate for a progress line: 'about 40 s', 'under a second'."""
    return "under a second" if seconds < 1 else f"about {seconds:.0f} s" if seconds < 120 else \
        f"about {seconds / 60:.0f} min"


# ------------------------------------------------------------------ defaults and caps from the estimates

SWEEP_DEFAULTS = {"K": [1, 2, 4, 8], "L": [1, 2, 4, 8], "T": [0.0, 0.35, 0.7, 1.0]}
DEFAULT_REPEATS = 3  # Compare's repeats when they fit: a median and a range of speedups
FIDELITY_DEFAULT_RUNS = 500


def scoring_bound(pair_key, runs: int, tokens: int) -> int:
    """The most scoring calls Fidelity's exact law makes: one per distinct prefix of 0 .. tokens - 1 tokens."""
    info = PAIRS.get(pair_key_of(pair_key))
    info_words = info.vocabulary if info is not None else None
    return sum(min(runs, info_words**depth) if info_words else (1 if depth == 0 else runs) for depth in range(tokens))


def compare_repeats(pair_key, num_methods: int, num_drafts: int, draft_length: int, tokens: int, coupled: bool,
                    limits=None) -> int:
    """Compare's default repeats: the most, up to DEFAULT_REPEATS, whose estimate fits DEFAULT_FRACTION of the budget."""
    for repeats in range(DEFAULT_REPEATS, 1, -1):
        seconds = compare_seconds(pair_key, num_methods, num_drafts, draft_length, tokens, repeats, coupled)
        if fits_seconds(seconds, DEFAULT_FRACTION, limits):
            return repeats
    return 1


def sweep_values(pair_key, num_methods: int, axis: str, num_drafts: int, draft_length: int, tokens: int,
                 most_values: int, limits=None, repeats: int = 1, fraction: float = DEFAULT_FRACTION) -> list[float]:
    """Sweep's default values: the longest start of SWEEP_DEFAULTS[axis] within `most_values` whose estimate at
    `repeats` seeds per point fits `fraction` of the budget."""
    values = SWEEP_DEFAULTS[axis][:max(1, most_values)]
    while len(values) > 1 and not fits_seconds(
            sweep_seconds(pair_key, num_methods, axis, values, num_drafts, draft_length, tokens, repeats), fraction,
            limits):
        values = values[:-1]
    return values


def fidelity_runs(pair_key, method: str, num_drafts: int, draft_length: int, tokens: int, fraction: float,
                  most: int, limits=None) -> int:
    """The largest N (at most `most`) whose runs fit the iteration budget (expected, + SIGMAS sd) and
    `fraction` of the time budget."""
    limits = limits or limits_module.LIMITS
    length = 0 if method == AUTOREGRESSIVE else int(draft_length)

    def fits(n: int) -> bool:
        available = limits.iterations - scoring_bound(pair_key, n, tokens)
        return (fits_iterations([(n, length)], tokens, pair_key, available)
                and fits_seconds(fidelity_seconds(pair_key, method, num_drafts, draft_length, n, tokens), fraction,
                                 limits))

    return largest_fitting(fits, most)


def largest_fitting(fits, most: int) -> int:
    """The largest n in [0, most] with fits(n), for a `fits` that holds up to some n and not after (0: none)."""
    low, high = 0, int(most)  # fits(0) is taken to hold (nothing to run)
    while low < high:
        mid = (low + high + 1) // 2
        low, high = (mid, high) if fits(mid) else (low, mid - 1)
    return low
