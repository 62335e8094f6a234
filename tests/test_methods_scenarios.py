"""Tier (a): scenario tests with hand-written distributions and injected uniforms, and every
golden value of docs/algorithms.md §2.7, §3.6, §4.6 and §5.4.

Golden E[tau] values are reproduced two ways: by summing each method's conditional
expectation E[tau | drafts] over all draft tuples (fast, covers the L = 3 rows), and by
full enumeration of every coin and draw (`spectr_gbv.exact`) on the smaller rows.
"""

from __future__ import annotations

import pytest
import torch

from conftest import constant
from helpers import theory_expected_accepted
from spectr_gbv.exact import iteration_law, verify_input_for
from spectr_gbv.methods import METHODS, gbv, spectr
from spectr_gbv.randomness import ScriptedRandomness

pytestmark = pytest.mark.exact

A, B = 0, 1
Q2, P2 = (1 / 3, 2 / 3), (2 / 3, 1 / 3)  # the GBV paper's two-token example (q target, p draft)


def f64(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


# ---------------------------------------------- docs/algorithms.md §3.6: one node, K-SEQ


def test_kseq_rho_acceptance_and_residual_match_section_3_6():
    f, g = f64(Q2), f64(P2)
    rho = spectr.optimal_rho(f, g, 2)
    beta = spectr.kseq_beta(f, g, rho)
    assert rho.item() == pytest.approx(1.434259, abs=1e-6)
    assert beta.item() == pytest.approx(0.565741, abs=1e-6)
    assert (1 - (1 - beta) ** 2).item() == pytest.approx(0.811420, abs=1e-6)
    assert torch.allclose(spectr.kseq_residual(f, g, rho, 2), f64([0.0, 1.0]), atol=1e-12)
    rho3 = spectr.optimal_rho(f, g, 3)
    assert rho3.item() == pytest.approx(1.689729, abs=1e-6)
    assert (1 - (1 - spectr.kseq_beta(f, g, rho3)) ** 3).item() == pytest.approx(0.896576, abs=1e-6)


def test_rho_is_one_for_a_single_candidate_and_for_identical_distributions():
    f = f64([0.2, 0.5, 0.3])
    assert spectr.optimal_rho(f, f64(P2 + (0.0,)), 1).item() == 1.0
    assert spectr.optimal_rho(f, f, 4).item() == 1.0


@pytest.mark.parametrize("name, expected", [("sd", 2 / 3), ("rrs", 7 / 9), ("spectr", 0.811420)])
def test_token_level_acceptance_at_L1_matches_section_3_6(name, expected):
    num_drafts = 1 if name == "sd" else 2
    law = iteration_law(METHODS[name], constant(Q2), constant(P2), num_drafts, 1)
    assert law.expected_accepted == pytest.approx(expected, abs=1e-6)


# ---------------------------------------------- docs/algorithms.md §2.7: GBV worked example

GBV_TABLE = [  # draft, omega_1, omega_2, h_1, h_2
    ((A, B), 1 / 2, 1.0, None, 1.0),  # h_1 irrelevant: h_2 = 1
    ((A, A), 1 / 2, 1 / 4, 0.0, 1 / 4),
    ((B, A), 1.0, 1 / 2, 1.0, 1 / 2),
    ((B, B), 1.0, 1.0, 1.0, 1.0),
]


@pytest.mark.parametrize("draft, omega1, omega2, h1, h2", GBV_TABLE)
def test_gbv_weights_and_block_probabilities_match_section_2_7(draft, omega1, omega2, h1, h2):
    inp = verify_input_for([draft], constant(Q2), constant(P2))
    omega, h = gbv.scan_probs(inp)
    assert omega.tolist() == pytest.approx([omega1, omega2], abs=1e-12)
    assert h[1].item() == pytest.approx(h2, abs=1e-12)
    if h1 is not None:
        assert h[0].item() == pytest.approx(h1, abs=1e-12)


def test_gbv_injected_uniforms_accept_the_whole_block_when_eta2_is_below_h2():
    inp = verify_input_for([(A, A)], constant(Q2), constant(P2))
    # eta_1 = 0.5 fails h_1 = 0; eta_2 = 0.2 passes h_2 = 1/4; the last uniform draws the bonus.
    result = METHODS["gbv"].verify(inp, ScriptedRandomness([0.5, 0.2, 0.9]))
    assert result.accepted_tokens == [A, A] and result.final_kind == "bonus"
    assert result.final_token == B  # quantile 0.9 of q = (1/3, 2/3)
    assert [t.accepted for t in result.tests] == [False, True]


def test_gbv_injected_uniforms_reject_to_the_sd_residual():
    inp = verify_input_for([(A, A)], constant(Q2), constant(P2))
    result = METHODS["gbv"].verify(inp, ScriptedRandomness([0.5, 0.3, 0.0]))
    assert result.num_accepted == 0 and result.final_kind == "correction"
    # residual (q - p)_+ is all on b, whatever the uniform
    assert torch.allclose(result.final_distribution, f64([0.0, 1.0])) and result.final_token == B


def test_sd_injected_uniforms_stop_at_the_first_rejection():
    inp = verify_input_for([(A, B)], constant(Q2), constant(P2))  # a_1 = 1/2, a_2 = 1
    accepted = METHODS["sd"].verify(inp, ScriptedRandomness([0.4, 0.99, 0.1]))
    assert accepted.tokens == [A, B, A] and accepted.final_kind == "bonus"
    rejected = METHODS["sd"].verify(inp, ScriptedRandomness([0.6, 0.0, 0.5]))
    assert rejected.tokens == [B] and rejected.final_kind == "correction"


def test_spectr_gbv_commits_an_intermediate_stop_and_hands_the_residual_on():
    # Draft 0 = (b, a): omega = (1, 1/2), h = (1, 1/2). eta = (0.1, 0.9) stops at t* = 1.
    # Draft 1 = (b, b) is consistent with u = (b); at the new node f = norm((1 q - p)_+) = (0, 1),
    # so its token b is accepted with certainty and h_1 = omega_1 = 1: full block, then a bonus.
    inp = verify_input_for([(B, A), (B, B)], constant(Q2), constant(P2))
    result = METHODS["spectr_gbv"].verify(inp, ScriptedRandomness([0.1, 0.9, 0.5, 0.0]))
    assert result.tokens == [B, B, A] and result.final_kind == "bonus" and result.winning_draft == 1
    assert [(t.draft, t.start, t.length, t.accepted) for t in result.tests] == [(0, 0, 1, True), (0, 0, 2, False), (1, 1, 1, True)]


# ---------------------------------------------- docs/algorithms.md §4.6: golden E[tau] table

GOLDEN = [  # q, p, L, K, {method: E[tau]}
    (Q2, P2, 2, 1, {"sd": 10 / 9, "gbv": 11 / 9, "spectr_gbv": 11 / 9}),
    (Q2, P2, 2, 2, {"rrs": 4 / 3, "spectr": 1.405487, "spectr_gbv": 1.475823}),
    (Q2, P2, 2, 3, {"rrs": 1.491084, "spectr": 1.593306, "spectr_gbv": 1.634520}),
    ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5), 2, 1, {"sd": 1.19, "gbv": 1.25}),
    ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5), 2, 2, {"rrs": 1.3058, "spectr": 1.367192, "spectr_gbv": 1.437689}),
    ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5), 2, 3, {"rrs": 1.400900, "spectr": 1.502935, "spectr_gbv": 1.576488}),
    ((0.6, 0.3, 0.1), (0.3, 0.4, 0.3), 3, 1, {"sd": 1.533, "gbv": 1.704}),
    ((0.6, 0.3, 0.1), (0.3, 0.4, 0.3), 3, 2, {"rrs": 1.772004, "spectr": 1.869179, "spectr_gbv": 2.104187}),
]


@pytest.mark.parametrize(
    "q, p, L, K, name, expected",
    [(q, p, L, K, name, value) for q, p, L, K, row in GOLDEN for name, value in row.items()],
)
def test_golden_expected_accepted_of_section_4_6(q, p, L, K, name, expected):
    assert theory_expected_accepted(name, constant(q), constant(p), K, L) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("name", ["sd", "rrs", "spectr", "gbv", "spectr_gbv"])
def test_golden_values_also_hold_by_full_enumeration(name):
    row = GOLDEN[0] if name in ("sd", "gbv") else GOLDEN[1]
    q, p, L, K, values = row
    law = iteration_law(METHODS[name], constant(q), constant(p), K, L)
    assert law.expected_accepted == pytest.approx(values[name], abs=1e-6)


# ---------------------------------------------- docs/algorithms.md §5.4: the released rule

RELEASED_GOLDEN = [  # q, p, L, K, E[tau] of the released rule
    (Q2, P2, 2, 1, 1.3333),
    (Q2, P2, 2, 2, 1.4034),
    (Q2, P2, 2, 3, 1.4995),
    ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5), 2, 1, 1.310),
    ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5), 2, 2, 1.298),
]


@pytest.mark.parametrize("q, p, L, K, expected", RELEASED_GOLDEN)
def test_released_rule_reproduces_the_section_5_4_expected_lengths(q, p, L, K, expected):
    law = iteration_law(METHODS["spectr_gbv_released"], constant(q), constant(p), K, L)
    assert law.expected_accepted == pytest.approx(expected, abs=6e-4)
