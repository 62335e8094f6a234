"""Tier (b): exact enumeration. The proof that every exact verifier preserves the target law.

Method: for tiny vocabularies, `spectr_gbv.exact.iteration_law` enumerates every K-tuple of
drafts (weighted by its draft probability), and every coin and token draw of the
production verifier (through `BranchingRandomness`), giving the exact law of the emitted
tokens. Continued by target sampling to L+1 tokens, that law must equal the target's own
law of L+1 tokens: total variation below 1e-9 in float64. Models are context-dependent
(an independent Dirichlet draw after every prefix), with drafts independent of the target
or mixed with it.

The released SpecTr-GBV rule is run through the same machinery, and its total-variation
error is asserted to be the measured, non-zero value of docs/algorithms.md §5.4.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from conftest import constant, dirichlet_model, dirichlet_pair, fidelity_error
from spectr_gbv.exact import (
    continued_law,
    enumerate_outcomes,
    iteration_law,
    target_law,
    total_variation_to_target,
    verify_input_for,
)
from spectr_gbv.methods import METHODS, spectr

pytestmark = pytest.mark.exact

EXACT = [name for name, spec in METHODS.items() if spec.exact]

# (V, L, K, target seed, draft kind); drafts: independent Dirichlet, or a 50/50 mixture with the target.
INSTANCES = [
    (2, 3, 2, 11, "independent"),
    (3, 2, 2, 12, "mixed"),
    (3, 2, 2, 13, "independent"),
    (4, 2, 1, 14, "mixed"),
    (4, 1, 3, 15, "independent"),
    (2, 2, 3, 16, "mixed"),
    (3, 3, 1, 17, "independent"),
]


@pytest.mark.parametrize("V, L, K, seed, kind", INSTANCES)
@pytest.mark.parametrize("name", EXACT)
def test_exact_methods_preserve_the_target_law(name, V, L, K, seed, kind):
    if not METHODS[name].multi_draft and K > 1:
        K = 1
    target, draft = dirichlet_pair(V, seed, kind)
    assert fidelity_error(METHODS[name], target, draft, K, L) < 1e-9


@pytest.mark.parametrize("name", EXACT)
def test_theory_equals_enumerated_expectation_given_the_drafts(name):
    """E[tau | drafts] from each method's theory function equals the enumerated mean of tau."""
    target, draft = dirichlet_pair(3, 21, "mixed")
    K = 3 if METHODS[name].multi_draft else 1
    blocks = list(itertools.product(range(3), repeat=2))
    for drafts in itertools.islice(itertools.product(blocks, repeat=K), 0, None, 37):
        inp = verify_input_for(drafts, target, draft)
        outcomes = enumerate_outcomes(lambda rng: METHODS[name].verify(inp, rng))
        enumerated = sum(prob * result.num_accepted for prob, result in outcomes)
        assert sum(prob for prob, _ in outcomes) == pytest.approx(1.0, abs=1e-12)
        assert METHODS[name].expected_accepted(inp) == pytest.approx(enumerated, abs=1e-12)


def test_spectr_gbv_at_one_draft_is_gbv():
    target, draft = dirichlet_pair(3, 31, "independent")
    for L in (1, 2, 3):
        a = iteration_law(METHODS["spectr_gbv"], target, draft, 1, L)
        b = iteration_law(METHODS["gbv"], target, draft, 1, L)
        assert a.expected_accepted == pytest.approx(b.expected_accepted, abs=1e-12)
        assert total_variation_to_target(a.emitted, b.emitted) < 1e-12


@pytest.mark.parametrize("K", [1, 2, 3])
def test_spectr_gbv_at_length_one_is_spectr_kseq(K):
    target, draft = dirichlet_pair(4, 32, "mixed")
    a = iteration_law(METHODS["spectr_gbv"], target, draft, K, 1)
    b = iteration_law(METHODS["spectr"], target, draft, K, 1)
    assert a.expected_accepted == pytest.approx(b.expected_accepted, abs=1e-12)
    assert total_variation_to_target(a.emitted, b.emitted) < 1e-12


def test_block_probabilities_and_rho_stay_in_range():
    target, draft = dirichlet_pair(3, 33, "independent")
    blocks = list(itertools.product(range(3), repeat=2))
    for drafts in itertools.product(blocks, repeat=2):
        inp = verify_input_for(drafts, target, draft)
        for prob, result in enumerate_outcomes(lambda rng: METHODS["spectr_gbv"].verify(inp, rng)):
            assert all(0.0 <= t.accept_prob <= 1.0 for t in result.tests)
    for seed in range(10):
        f, g = dirichlet_model(5, seed)(()), dirichlet_model(5, seed + 50)(())
        for n in (2, 3, 5):
            rho = spectr.optimal_rho(f, g, n).item()
            assert 1.0 <= rho <= n
            residual_before_clamp = f - torch.minimum(g, f / rho) * (1 - (1 - spectr.kseq_beta(f, g, torch.tensor(rho, dtype=torch.float64))) ** n) / spectr.kseq_beta(f, g, torch.tensor(rho, dtype=torch.float64))
            assert residual_before_clamp.min().item() >= -1e-12


# ---------------------------------------------------------------- the released rule is lossy

Q2, P2 = (1 / 3, 2 / 3), (2 / 3, 1 / 3)


@pytest.mark.parametrize("K, expected_tv", [(1, 0.11), (2, 0.065), (3, 0.058)])
def test_released_rule_does_not_preserve_the_target_law(K, expected_tv):
    tv = fidelity_error(METHODS["spectr_gbv_released"], constant(Q2), constant(P2), K, 2)
    assert tv == pytest.approx(expected_tv, abs=0.005)


def test_released_rule_is_biased_on_random_context_dependent_models_too():
    target, draft = dirichlet_pair(3, 41, "independent")
    law = iteration_law(METHODS["spectr_gbv_released"], target, draft, 2, 2)
    tv = total_variation_to_target(continued_law(law.emitted, target, 3), target_law(target, 3))
    assert tv > 0.01
