"""Tier (d): properties of every verifier on random inputs (hypothesis).

Strategy: probability vectors in the style of dit's `distributions` (uniform floats, some
zeroed to make sparse supports, normalised), drafts drawn from the draft distributions'
supports, K <= 3, L <= 4, V <= 5. Properties: target == draft accepts every draft token;
every emitted token has positive target probability at its position; the accepted prefix
is a prefix of the winning draft; tau <= L and at most L+1 tokens; acceptance
probabilities lie in [0, 1].
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spectr_gbv.methods import METHODS, VerifyInput
from spectr_gbv.randomness import ScriptedRandomness, TorchRandomness

pytestmark = pytest.mark.exact

EXACT = [name for name, spec in METHODS.items() if spec.exact]


@st.composite
def prob_vectors(draw, vocab: int, sparse: bool = True) -> list[float]:
    weights = draw(st.lists(st.floats(0.0, 1.0), min_size=vocab, max_size=vocab))
    if sparse:
        keep = draw(st.lists(st.booleans(), min_size=vocab, max_size=vocab))
        weights = [w if k else 0.0 for w, k in zip(weights, keep)]
    if sum(weights) < 1e-3:
        weights = [1.0] + [0.0] * (vocab - 1)
    total = sum(weights)
    return [w / total for w in weights]


@st.composite
def verify_inputs(draw, same_models: bool = False) -> VerifyInput:
    """K drafts sampled node by node: one draft and one target distribution per trie node,
    as a real model would give (drafts through the same prefix see the same distributions)."""
    K, L, V = draw(st.integers(1, 3)), draw(st.integers(1, 4)), draw(st.integers(2, 5))
    draft_table: dict[tuple[int, ...], list[float]] = {}
    target_table: dict[tuple[int, ...], list[float]] = {}

    def node(prefix: tuple[int, ...]) -> tuple[list[float], list[float]]:
        if prefix not in target_table:
            target_table[prefix] = draw(prob_vectors(V))
            draft_table[prefix] = target_table[prefix] if same_models else draw(prob_vectors(V))
        return draft_table[prefix], target_table[prefix]

    tokens = []
    for _ in range(K):
        block: list[int] = []
        for _ in range(L):
            draft, _ = node(tuple(block))
            block.append(draw(st.sampled_from([v for v in range(V) if draft[v] > 0])))
        tokens.append(block)
    draft_probs = [[node(tuple(x[:i]))[0] for i in range(L)] for x in tokens]
    target_probs = [[node(tuple(x[:i]))[1] for i in range(L + 1)] for x in tokens]
    return VerifyInput.build(
        torch.tensor(tokens), torch.tensor(draft_probs, dtype=torch.float64), torch.tensor(target_probs, dtype=torch.float64)
    )


@settings(max_examples=60, deadline=None)
@given(verify_inputs(same_models=True), st.integers(0, 2**31 - 1), st.sampled_from(EXACT))
def test_identical_target_and_draft_accept_every_draft_token(inp, seed, name):
    result = METHODS[name].verify(inp, TorchRandomness(torch.Generator().manual_seed(seed)))
    assert result.num_accepted == inp.draft_length and result.final_kind == "bonus"


@settings(max_examples=100, deadline=None)
@given(verify_inputs(), st.integers(0, 2**31 - 1), st.sampled_from(list(METHODS)))
def test_outputs_are_well_formed(inp, seed, name):
    spec = METHODS[name]
    if not spec.multi_draft:
        inp = VerifyInput.build(inp.draft_tokens[:1], inp.draft_probs[:1], inp.target_probs[:1])
    result = spec.verify(inp, TorchRandomness(torch.Generator().manual_seed(seed)))
    tau = result.num_accepted
    assert 0 <= tau <= inp.draft_length and len(result.tokens) == tau + 1
    row = result.winning_draft if tau > 0 else 0
    assert result.accepted_tokens == inp.draft_tokens[row, :tau].tolist()
    assert result.final_position == tau
    if spec.exact:
        # every emitted token is in the target's support at its position
        for position, token in enumerate(result.tokens):
            assert inp.target_probs[row, position, token] > 0
        assert all(0.0 <= t.accept_prob <= 1.0 for t in result.tests if t.accept_prob is not None)
    assert result.final_distribution[result.final_token] > 0


class EagerScriptedRandomness(ScriptedRandomness):
    """Scripted uniforms, but bounded coins are decided on every exact probability."""

    def coins_bounded(self, upper_bounds, exact):
        probs = upper_bounds if exact is None else exact(list(range(upper_bounds.numel())))
        outcomes, uniforms = self.coins(probs)
        return outcomes, uniforms, probs.tolist()


@settings(max_examples=100, deadline=None)
@given(verify_inputs(), st.lists(st.floats(0.0, 0.999999), min_size=200, max_size=200), st.sampled_from(["gbv", "spectr_gbv"]))
def test_lazy_block_probabilities_decide_exactly_like_the_eager_rule(inp, uniforms, name):
    """h_t <= omega_t lets a scan skip S_t when eta_t >= omega_t; the decisions must not change."""
    spec = METHODS[name]
    if not spec.multi_draft:
        inp = VerifyInput.build(inp.draft_tokens[:1], inp.draft_probs[:1], inp.target_probs[:1])
    lazy = spec.verify(inp, ScriptedRandomness(uniforms))
    eager = spec.verify(inp, EagerScriptedRandomness(uniforms))
    assert lazy.tokens == eager.tokens and lazy.winning_draft == eager.winning_draft
    assert [(t.draft, t.start, t.length, t.accepted) for t in lazy.tests] == [(t.draft, t.start, t.length, t.accepted) for t in eager.tests]
    for fast, full in zip(lazy.tests, eager.tests):
        if fast.accept_prob is None:
            assert fast.uniform >= full.accept_prob  # skipped only where the coin had to fail
        else:
            assert fast.accept_prob == full.accept_prob


@settings(max_examples=100, deadline=None)
@given(verify_inputs(), st.lists(st.floats(0.0, 0.999999), min_size=200, max_size=200))
def test_a_scan_with_every_h_read_once_decides_like_the_lazy_scan(inp, uniforms):
    """AS-BV's phase 2 and AS-BV+H's remainders scan with every h_t computed and the coins read
    once (`every_h`, capped at omega_t, which h_t never exceeds but by rounding); GBV's scan of the
    same block with the same uniforms decides the same coins, and records the same probability,
    so capped, wherever it computed one."""
    from spectr_gbv.methods.gbv import scan_block, scan_weights

    L = inp.draft_length
    rows = (inp.target_probs[0, 1:L], inp.draft_probs[0, 1:L])
    omega = scan_weights(inp, 0, 0)
    lazy = scan_block(ScriptedRandomness(uniforms), omega, *rows)
    every = scan_block(ScriptedRandomness(uniforms), omega, *rows, every_h=True)
    assert every.tau == lazy.tau
    assert [t.accepted for t in every.tests] == [t.accepted for t in lazy.tests]
    assert [t.uniform for t in every.tests] == [t.uniform for t in lazy.tests]
    for t, (fast, full) in enumerate(zip(lazy.tests, every.tests)):
        assert full.accept_prob is not None
        if fast.accept_prob is not None:
            assert full.accept_prob == min(fast.accept_prob, float(omega[t]))


def test_tree_theory_visits_each_trie_node_once():
    """E[tau | drafts] of the tree rules is memoised per node: K identical drafts of length L
    cost L node evaluations, not K^L (a regression: K = 5, L = 8 once took minutes)."""
    from spectr_gbv.methods.spectr import kseq_node
    from spectr_gbv.methods.tree import tree_expected_accepted

    K, L, V = 6, 8, 5
    target = torch.full((K, L + 1, V), 1 / V, dtype=torch.float64)
    draft = torch.full((K, L, V), 1 / V, dtype=torch.float64)
    inp = VerifyInput.build(torch.zeros(K, L, dtype=torch.long), draft, target)
    calls = []

    def counting_rule(q, p, candidates):
        calls.append(len(candidates))
        return kseq_node(q, p, candidates)

    value = tree_expected_accepted(inp, counting_rule)
    assert len(calls) == L and calls == [K] * L
    assert value == pytest.approx(METHODS["spectr"].expected_accepted(inp))


def test_a_subnormal_draft_probability_does_not_make_block_weights_nan():
    """Hypothesis found it: p = 5e-324 for a drafted token made q/p overflow to inf and the
    closed-form block weights inf - inf = NaN; the lazy and eager rules then disagreed."""
    tiny = 4.9e-324
    draft = torch.tensor([[[1.0, 0.0, 0.0], [1.0, tiny, 0.0], [1.0, 0.0, 0.0]]], dtype=torch.float64)
    target = torch.tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]], dtype=torch.float64)
    inp = VerifyInput.build(torch.tensor([[0, 1, 0]]), draft, target)
    from spectr_gbv.methods.gbv import scan_weights

    assert scan_weights(inp).tolist() == [1.0, 1.0, 1.0]  # omega_2 = min(1 * q/p, 1) = 1, then stays 1
    for name in ("gbv", "spectr_gbv"):
        result = METHODS[name].verify(inp, ScriptedRandomness([0.0] * 20))
        assert result.tokens == [0, 1, 0, 0]  # the whole block is accepted (q gives it probability 1)
