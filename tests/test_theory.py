"""The theory playground's formulas (spectr_gbv.theory) against a Monte-Carlo simulation of
the i.i.d. model they state, and against the closed form for one draft.

The simulations are seeded, so the tests are deterministic. With a correct law a fresh seed
would give a chi-square p-value under 1e-3 with probability 1e-3 per case, and a mean 5
standard errors off with probability about 6e-7; the power check shows a wrong law fails."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from spectr_gbv import theory

def accepted_length_pmf(alpha: float, num_drafts: int, draft_length: int) -> list[float]:
    """P(tau = t) for t = 0..L under the i.i.d. model, from `theory.survival`."""
    tail = [1.0] + theory.survival(alpha, num_drafts, draft_length) + [0.0]
    return [tail[t] - tail[t + 1] for t in range(len(tail) - 1)]


CASES = [(0.8, 1, 4), (0.6, 2, 4), (0.3, 4, 3), (0.9, 8, 8), (0.5, 3, 1)]


def simulate_accepted(alpha: float, num_drafts: int, draft_length: int, iterations: int, seed: int) -> np.ndarray:
    """tau per iteration: each draft accepts tokens until its first rejection (a geometric number
    of trials), at most L; the verifier keeps the longest of the K drafts."""
    trials = stats.geom(1 - alpha).rvs(size=(iterations, num_drafts), random_state=np.random.default_rng(seed))
    return np.minimum(trials - 1, draft_length).max(axis=1)


@pytest.mark.statistical
@pytest.mark.parametrize("alpha, num_drafts, draft_length", CASES)
def test_accepted_length_law_matches_simulation(alpha, num_drafts, draft_length):
    n = 40_000
    tau = simulate_accepted(alpha, num_drafts, draft_length, n, seed=num_drafts * 100 + draft_length)
    pmf = np.array(accepted_length_pmf(alpha, num_drafts, draft_length))
    observed = np.bincount(tau, minlength=draft_length + 1)
    keep = pmf * n >= 5  # chi-square needs enough expected counts per bin; fold the rest into one
    f_obs = np.append(observed[keep], observed[~keep].sum())
    f_exp = np.append(pmf[keep] * n, pmf[~keep].sum() * n)
    if f_exp[-1] == 0:
        f_obs, f_exp = f_obs[:-1], f_exp[:-1]
    assert stats.chisquare(f_obs, f_exp).pvalue > 1e-3
    mean_tokens = 1 + tau.mean()
    assert abs(mean_tokens - theory.expected_tokens(alpha, num_drafts, draft_length)) < 5 * stats.sem(tau)


@pytest.mark.statistical
def test_simulation_would_notice_a_wrong_formula():
    """The check above has power: the K = 1 law does not pass for K = 4 drafts."""
    n = 40_000
    tau = simulate_accepted(0.5, 4, 4, n, seed=7)
    wrong = np.array(accepted_length_pmf(0.5, 1, 4)) * n
    assert stats.chisquare(np.bincount(tau, minlength=5), wrong).pvalue < 1e-6


@pytest.mark.unit
@pytest.mark.parametrize("alpha", [0.0, 0.1, 0.5, 0.77, 0.99, 1.0])
@pytest.mark.parametrize("draft_length", [1, 2, 5, 16])
def test_one_draft_is_the_closed_form(alpha, draft_length):
    assert theory.expected_tokens(alpha, 1, draft_length) == pytest.approx(theory.single_draft_tokens(alpha, draft_length))
    assert sum(accepted_length_pmf(alpha, 1, draft_length)) == pytest.approx(1.0)


@pytest.mark.unit
def test_limits_and_monotonicity():
    assert theory.expected_tokens(0.0, 5, 7) == 1.0  # nothing accepted: the target's own token
    assert theory.expected_tokens(1.0, 3, 7) == 8.0  # everything accepted: L + 1
    values = [theory.expected_tokens(0.6, k, 4) for k in (1, 2, 4, 8)]
    assert values == sorted(values) and values[0] < values[-1] < 5


@pytest.mark.unit
def test_speedup_costs_drafts_batched_or_one_after_another():
    tokens = theory.expected_tokens(0.7, 3, 4)
    assert theory.speedup(0.7, 3, 4, 0.1, batched=True) == pytest.approx(tokens / (1 + 4 * 0.1))
    assert theory.speedup(0.7, 3, 4, 0.1, batched=False) == pytest.approx(tokens / (1 + 3 * 4 * 0.1))
    assert theory.speedup(0.7, 3, 4, 0.0) == pytest.approx(tokens)  # free drafts: speedup = tokens per call


@pytest.mark.unit
def test_each_extra_scored_position_costs_g_steps():
    # the target call scores K L drafted positions besides the next one: 1 + g K L steps
    tokens = theory.expected_tokens(0.5, 2, 4)
    assert theory.iteration_cost(2, 4, 0.05, True, position_cost=0.1) == pytest.approx(1 + 0.1 * 8 + 4 * 0.05)
    assert theory.speedup(0.5, 2, 4, 0.05, True, 0.1) == pytest.approx(tokens / (1 + 0.8 + 0.2))
    # a compute-bound scoring call makes long drafts lose: the best L shrinks as g grows
    best = [max(range(1, 17), key=lambda n: theory.speedup(0.5, 1, n, 0.05, True, g)) for g in (0.0, 0.1, 0.3)]
    assert best == sorted(best, reverse=True) and best[0] > best[-1]


@pytest.mark.unit
@pytest.mark.parametrize("call", [
    lambda: theory.expected_tokens(1.5, 1, 4), lambda: theory.expected_tokens(float("nan"), 1, 4),
    lambda: theory.expected_tokens("0.5", 1, 4), lambda: theory.expected_tokens(0.5, 0, 4),
    lambda: theory.expected_tokens(0.5, 2, 2.5), lambda: theory.speedup(0.5, 2, 2, -1),
    lambda: theory.expected_tokens(True, 1, 4), lambda: theory.speedup(0.5, 2, 2, 0.1, True, -0.1),
])
def test_bad_values_get_a_message(call):
    with pytest.raises(ValueError, match="must be"):
        call()
