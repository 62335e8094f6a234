"""Traversal Verification on the merged trie (docs/algorithms.md §8): exactness and reductions.

Methodology: exact enumeration (`spectr_gbv.exact`) of every draft tuple, coin and draw,
with TV of the output continued by the target against the target's law of L+1 tokens at
most 1e-12, on context-dependent and context-free tables (tied ratios included); the
theory line against the enumerated mean of tau given the drafts; K = 1 against GBV
outcome for outcome under the same seeds; a scenario with injected uniforms that walks
the deletion and residual hand-off. The with-replacement variant (M_s left unchanged),
which is not shipped, is shown to be lossy, so the exactness test can fail.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from conftest import assert_theory_line_is_the_enumerated_mean, constant, dirichlet_pair, fidelity_error
from spectr_gbv.exact import enumerate_outcomes, iteration_law, verify_input_for
from spectr_gbv.methods import METHODS, traversal
from spectr_gbv.randomness import ScriptedRandomness

pytestmark = pytest.mark.exact

Q2, P2 = (1 / 3, 2 / 3), (2 / 3, 1 / 3)
A, B = 0, 1


INSTANCES = [
    (2, 2, 2, 11, "independent"),
    (3, 2, 2, 12, "mixed"),
    (2, 2, 3, 16, "mixed"),
    (2, 3, 2, 17, "independent"),
    (3, 1, 3, 15, "independent"),
    (2, 2, 4, 18, "mixed"),
    (2, 3, 3, 19, "mixed"),
]


@pytest.mark.parametrize("V, L, K, seed, kind", INSTANCES)
def test_traversal_preserves_the_target_law(V, L, K, seed, kind):
    target, draft = dirichlet_pair(V, seed, kind)
    assert fidelity_error(METHODS["traversal"], target, draft, K, L) <= 1e-12


@pytest.mark.parametrize("q, p, L, K", [((0.2, 0.4, 0.4), (0.1, 0.2, 0.7), 2, 3), (Q2, P2, 3, 2), ((0.5, 0.5), (0.5, 0.5), 2, 3)])
def test_traversal_is_exact_on_context_free_tables(q, p, L, K):
    assert fidelity_error(METHODS["traversal"], constant(q), constant(p), K, L) <= 1e-12


def test_with_replacement_sibling_update_is_lossy(monkeypatch):
    """Keep M_s(a) as it was after a deletion (the variant of docs/algorithms.md §8.3, TV up to 0.06)."""
    delete = traversal._delete

    def with_replacement(leaf):
        parent, small = leaf.parent, leaf.parent.small
        delete(leaf)
        parent.small = small
        traversal._reweigh(parent)

    monkeypatch.setattr(traversal, "_delete", with_replacement)
    worst = max(fidelity_error(METHODS["traversal"], *dirichlet_pair(3, seed, "independent"), 3, 2) for seed in (51, 52, 53))
    assert worst > 0.005


def test_theory_line_equals_the_enumerated_mean_given_the_drafts():
    target, draft = dirichlet_pair(3, 21, "mixed")
    blocks = list(itertools.product(range(3), repeat=2))
    for drafts in itertools.islice(itertools.product(blocks, repeat=3), 0, None, 11):
        assert_theory_line_is_the_enumerated_mean(traversal, verify_input_for(drafts, target, draft))


def test_one_draft_has_gbv_s_law_and_expected_length():
    target, draft = dirichlet_pair(3, 31, "independent")
    for L in (1, 2, 3):
        a, b = (iteration_law(METHODS[name], target, draft, 1, L) for name in ("traversal", "gbv"))
        assert a.expected_accepted == pytest.approx(b.expected_accepted, abs=1e-12)
        assert all(a.emitted.get(z, 0.0) == pytest.approx(b.emitted.get(z, 0.0), abs=1e-12) for z in set(a.emitted) | set(b.emitted))


def test_golden_two_token_values():
    """Traversal on the GBV paper's example: GBV's 11/9 at K = 1, then 115/81 at K = 2 (the
    MD-BV-RRS value; docs/algorithms.md §8.3: below SpecTr-GBV* 1.475823)."""
    values = [iteration_law(METHODS["traversal"], constant(Q2), constant(P2), K, 2).expected_accepted for K in (1, 2)]
    assert values == pytest.approx([11 / 9, 115 / 81], abs=1e-12)


def test_a_rejected_leaf_hands_its_parent_the_residual_and_the_sibling_is_tested_next():
    # Drafts (a, a) and (a, b): w = (1/2, 1/4) on the first leaf, (1/2, 1) on the second.
    # eta = 0.9 rejects (a, a); the parent (a) then has M_s = p with a removed = (0, 1), and
    # its sibling (a, b) is tested with w = min(w_a' M_b(a)[b] / 1, 1).
    inp = verify_input_for([(A, A), (A, B)], constant(Q2), constant(P2))
    leaves = traversal.traversal(inp)
    first = next(leaves)
    assert (first.depth, first.token, first.weight) == (2, A, pytest.approx(1 / 4))
    second = next(leaves)
    parent = second.parent
    # r = (1/2 q - p)_+ = (0, 0) + ... : 1/2 (1/3, 2/3) - (2/3, 1/3) = (-1/2, 0): S = 0, so w_a -> 0
    assert parent.weight == 0.0 and second.weight == 0.0
    assert torch.allclose(parent.small, torch.tensor([0.0, 1.0], dtype=torch.float64))
    result = METHODS["traversal"].verify(inp, ScriptedRandomness([0.9, 0.5, 0.5, 0.1]))
    # (a, a) rejected, (a, b) rejected (w = 0), (a) rejected (w = 0): the root's residual (q - p)_+ = b.
    assert result.tokens == [B] and result.final_kind == "correction" and result.winning_draft is None
    assert [t.accepted for t in result.tests] == [False, False, False]


def test_one_draft_has_gbv_s_law_given_every_block():
    """On a chain the tests are GBV's backward scan h_L, h_{L-1}, ...: given each block, the law of
    the emitted tokens is GBV's (the coins come in another order, so seeds do not match)."""
    target, draft = dirichlet_pair(4, 33, "mixed", concentration=0.5)
    for block in itertools.islice(itertools.product(range(4), repeat=3), 0, None, 5):
        inp = verify_input_for([block], target, draft)
        laws = []
        for name in ("traversal", "gbv"):
            law: dict[tuple[int, ...], float] = {}
            for prob, result in enumerate_outcomes(lambda rng: METHODS[name].verify(inp, rng)):
                law[tuple(result.tokens)] = law.get(tuple(result.tokens), 0.0) + prob
            laws.append(law)
        assert laws[0].keys() == laws[1].keys()
        assert all(laws[0][z] == pytest.approx(laws[1][z], abs=1e-12) for z in laws[0])
