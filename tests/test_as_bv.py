"""AS-BV (docs/algorithms.md §6): exactness, reductions, golden values, and the one strict order.

Methodology, tier by tier:

* Component laws: for each selection (lex, seq, first) and every tuple of candidate tokens,
  the production `select` is run under `BranchingRandomness` (every coin followed); the
  enumerated joint law of (selected token, how many candidates carry it) must equal the
  closed-form T_r[n](y, c) and its marginal s_r[n] to 1e-12. Tables with tied ratios are
  included, so selection and law are checked to break ties the same way.
* Exact enumeration (`spectr_gbv.exact`): every draft tuple, coin and draw; TV of the output
  continued by the target against the target's law of L+1 tokens <= 1e-12, on tiny tables
  and again with the large-vocabulary stand-ins (head order, reduced LP, "first" for rare
  alive counts) switched on at tiny sizes by shrinking their thresholds.
* Reductions: K = 1 is GBV, outcome for outcome, under the same seeds; L = 1 accepts at
  least as much as SpecTr's K-SEQ.
* Golden values of docs/algorithms.md §6.7: E[tau] = GBV(D) summed over the law tree of the
  selected block, which is the quantity tabulated there, to 1e-6; cross-checked against full
  enumeration and against the theory line summed over draft tuples.
* A deliberately inconsistent tie-break (selection breaks a tie one way, the law the other)
  is shown to be biased, as docs/algorithms.md §6.3 warns, so the tie test can fail.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict

import pytest
import torch

from conftest import (assert_theory_line_is_the_enumerated_mean, constant, dirichlet_model, dirichlet_pair, f64,
                      fidelity_error, mixture)
from spectr_gbv import generate
from spectr_gbv.exact import enumerate_outcomes, iteration_law, sequence_prob, verify_input_for
from spectr_gbv.methods import METHODS, VerifyInput, as_bv, as_bv_device, as_bv_fast, as_bv_handoff, as_bv_lp
from spectr_gbv.methods.support import on_draft_support
from spectr_gbv.randomness import ScriptedRandomness, TorchRandomness
from spectr_gbv.toy import toy_pair

pytestmark = pytest.mark.exact

Q2, P2 = (1 / 3, 2 / 3), (2 / 3, 1 / 3)
TIED = ((0.2, 0.4, 0.4), (0.1, 0.2, 0.7))  # tokens 0 and 1 share the ratio q/p = 2


# ------------------------------------------------------------------ component laws T_r[n](y, c)

NODE_TABLES = [TIED, (Q2, P2), ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5)), ((0.1, 0.2, 0.3, 0.4), (0.4, 0.3, 0.2, 0.1)),
               ((0.25, 0.25, 0.5, 0.0), (0.25, 0.25, 0.25, 0.25))]


def enumerated_joint(law: as_bv.NodeLaw, n: int, component: int, vocab: int) -> dict[tuple[int, int], float]:
    """P(selected = y, c of the n candidates carry y), by running the selection on every tuple."""
    one_hot = tuple(1.0 if r == component else 0.0 for r in range(3))
    forced = dataclasses.replace(law, mixtures={**law.mixtures, n: one_hot})
    joint: dict[tuple[int, int], float] = defaultdict(float)
    for tokens in itertools.product(range(vocab), repeat=n):
        weight = float(torch.prod(law.draft[list(tokens)]))
        if weight == 0:
            continue
        for prob, y in enumerate_outcomes(lambda rng: as_bv.select_with_detail(forced, list(tokens), rng)[0]):
            joint[(y, tokens.count(y))] += weight * prob
    return joint


@pytest.mark.parametrize("q, p", NODE_TABLES)
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("head", [256, 2])
def test_closed_form_component_laws_equal_the_selection_they_describe(q, p, n, head, monkeypatch):
    monkeypatch.setattr(as_bv_fast, "ORDER_HEAD", head)
    target, draft = f64(q), f64(p)
    law = as_bv.node_law(target, draft, {n: 1.0}, 1.0)
    comp = law.components[n]
    for r in range(3):
        joint = enumerated_joint(law, n, r, len(q))
        for y in range(len(q)):
            closed = as_bv.joint_at(comp, float(draft[y]), float(law.below_draft[y]), y)[r]
            assert closed == pytest.approx([joint.get((y, c), 0.0) for c in range(n + 1)], abs=1e-12)
            assert float(comp.marginals[r, y]) == pytest.approx(sum(closed), abs=1e-12)


def test_ties_are_broken_by_the_larger_token_id_in_selection_and_law():
    target, draft = f64(TIED[0]), f64(TIED[1])
    law = as_bv.node_law(target, draft, {2: 1.0}, 1.0)
    assert law.order.top([0, 1]) == 1 and law.order.top([1, 0]) == 1
    # G_<(1) counts token 0 (below it), G_<(0) does not count token 1.
    assert float(law.below_draft[1]) == pytest.approx(0.7 + 0.1) and float(law.below_draft[0]) == pytest.approx(0.7)


def test_an_inconsistent_tie_break_is_biased(monkeypatch):
    """Selection breaking the 0/1 tie towards the smaller id while the law assumes the larger:
    the output law moves by TV ~ 0.06 (docs/algorithms.md §6.3: 0.04-0.07), so the tie tests above can fail."""
    original = as_bv_fast.NodeOrder.top
    monkeypatch.setattr(as_bv_fast.NodeOrder, "top", lambda self, tokens: 0 if original(self, tokens) == 1 and 0 in tokens else original(self, tokens))
    assert fidelity_error(METHODS["as_bv"], constant(TIED[0]), constant(TIED[1]), 2, 2) > 0.03


# ------------------------------------------------------------------------- exact enumeration

INSTANCES = [  # (V, L, K, seed, kind) of context-dependent Dirichlet models
    (2, 2, 2, 11, "independent"),
    (3, 2, 2, 12, "mixed"),
    (2, 2, 3, 16, "mixed"),
    (2, 3, 2, 17, "independent"),
    (3, 1, 4, 15, "independent"),
    (4, 1, 3, 19, "mixed"),
]


@pytest.mark.parametrize("V, L, K, seed, kind", INSTANCES)
def test_as_bv_preserves_the_target_law(V, L, K, seed, kind):
    target, draft = dirichlet_pair(V, seed, kind)
    assert fidelity_error(METHODS["as_bv"], target, draft, K, L) <= 1e-12


@pytest.mark.parametrize("q, p, L, K", [(*TIED, 2, 2), (*TIED, 1, 4), (Q2, P2, 3, 2), ((0.5, 0.5), (0.5, 0.5), 2, 3)])
def test_as_bv_is_exact_on_tied_and_context_free_tables(q, p, L, K):
    assert fidelity_error(METHODS["as_bv"], constant(q), constant(p), K, L) <= 1e-12


# (2, 2, 4) is here only: K = 4 at L = 2 takes half a minute with every stand-in off.
@pytest.mark.parametrize("V, L, K, seed, kind", [(3, 2, 2, 12, "mixed"), (4, 1, 3, 21, "independent"), (2, 2, 4, 18, "mixed")])
def test_large_vocabulary_stand_ins_are_exact(V, L, K, seed, kind, large_vocabulary_paths):
    target, draft = dirichlet_pair(V, seed, kind)
    assert fidelity_error(METHODS["as_bv"], target, draft, K, L) <= 1e-12
    assert fidelity_error(METHODS["as_bv"], constant(TIED[0]), constant(TIED[1]), min(K, 3), 1) <= 1e-12


@pytest.mark.parametrize("rule, K, L, seed", [("as_bv_handoff", 3, 2, 25), ("as_bv", 3, 2, 17)])
def test_phase_one_on_the_device_is_exact_with_three_drafts(rule, K, L, seed, monkeypatch):
    """A large table's phase 1 runs on the device (`as_bv_device.node_law_on_device`: the vertex search,
    "first"'s check by a mask, the alive count's Bayes step as vectors over c). Switched on at two
    tokens (the LP keeps one kink, the order's head is one token), its Bayes step meets counts of 2
    and 3 and the output law is still the target's, by exact enumeration. (Four drafts take half a
    minute here; `test_the_device_joint_laws_are_the_host_ones` covers counts up to 5.)"""
    monkeypatch.setattr(as_bv_fast, "ORDER_HEAD", 1)
    monkeypatch.setattr(as_bv_lp, "MAX_LP_TOKENS", 1)
    counts = set()
    original = as_bv_device._joint_on_device

    def recording(comp, *args):
        counts.add(comp.num_alive)
        return original(comp, *args)

    monkeypatch.setattr(as_bv_device, "_joint_on_device", recording)
    target, draft = dirichlet_pair(2, seed, "mixed")
    assert fidelity_error(METHODS[rule], target, draft, K, L) <= 1e-12
    assert max(counts) == K  # the device Bayes step ran with every count up to K


@pytest.mark.parametrize("n", [2, 3, 4, 5])
def test_the_device_joint_laws_are_the_host_ones(n):
    """`as_bv_device._joint_on_device` (T_r[n](y, c) as vectors over c) equals the host's `joint_at` term by
    term on nodes of seeded pairs, at candidates of every kind, and sums over c to the marginals."""
    for seed in range(6):
        target, draft = dirichlet_model(40, 300 + seed, 0.4)(()), dirichlet_model(40, 400 + seed, 0.4)(())
        draft[seed % 40] = 0.0  # a token the draft cannot propose
        draft = draft / draft.sum()
        order = as_bv_fast.strict_order(target, draft, check_positive=False)
        below = order.below(draft)
        comp = as_bv.components(target, draft, order, below, n)
        for y in range(40):
            host = as_bv.joint_at(comp, float(draft[y]), float(below[y]), y)
            device = as_bv_device._joint_on_device(comp, draft[y], below[y], comp.accept[y], comp.rejected[y], comp.below_rejected[y])
            assert device.reshape(-1).tolist() == pytest.approx([float(x) for row in host for x in row], rel=1e-12, abs=1e-300)
            assert device[:, 1:].sum(-1).tolist() == pytest.approx(comp.marginals[:, y].tolist(), rel=1e-12, abs=1e-300)


def narrow_head(model, vocab: int, head_of):
    """`model` renormalised onto the tokens `head_of(context)`: a draft head narrower than the
    target's vocabulary."""
    def probs(context):
        mask = torch.zeros(vocab, dtype=torch.float64)
        mask[list(head_of(context))] = 1.0
        row = model(context) * mask
        return row / row.sum()

    return probs


@pytest.mark.parametrize("K, L, seed", [(2, 2, 51), (3, 2, 52), (2, 3, 53)])
def test_running_on_the_draft_support_is_exact(K, L, seed, monkeypatch, large_vocabulary_paths):
    """The support path (both phases on the draft's 2 tokens plus one cell for the other 4
    tokens' target mass), switched on at this size with the large-vocabulary stand-ins it
    runs beside: the output law is still the target's."""
    monkeypatch.setattr(as_bv_fast, "SUPPORT_FROM_VOCAB", 0)
    target, other = dirichlet_pair(6, seed, "independent")
    draft = narrow_head(mixture(target, other, 0.5), 6, lambda context: (1, 4))
    assert as_bv_fast.on_support(verify_input_for([[1, 4, 1][:L]] * K, target, draft)) is not None  # the path is taken
    assert fidelity_error(METHODS["as_bv"], target, draft, K, L) <= 1e-12


@pytest.mark.parametrize("rule", ["as_bv", "as_bv_handoff"])
def test_the_support_path_is_the_same_rule_on_a_large_vocabulary(rule, monkeypatch):
    """V = 1,200 with a draft head of 300 tokens that depends on the context (two heads, 200
    tokens shared; float64 Dirichlet rows, so no ties in the head's top-k): with and without
    the support path, the same outcomes under the same seeds, the same final distribution on
    the full vocabulary and the same theory line. Over the trials lex or seq is mixed in
    somewhere, and both tau = 0 and tau = L occur, so each branch of `verify` is compared.
    AS-BV with hand-off (which runs on the same support) is compared the same way."""
    method = METHODS[rule]
    vocab, generator = 1200, torch.Generator().manual_seed(61)
    ids = torch.randperm(vocab, generator=generator).tolist()
    heads = (ids[:300], ids[100:400])
    wide, other = dirichlet_pair(vocab, 62, "independent", concentration=0.3)
    # 90 % of the target's mass on the draft's heads, so whole blocks are accepted sometimes;
    # 10 % spread over the whole vocabulary, which the rest cell must carry.
    target = mixture(narrow_head(wide, vocab, lambda context: heads[len(context) % 2]), wide, 0.9)
    draft = narrow_head(mixture(target, other, 0.5), vocab, lambda context: heads[len(context) % 2])
    default, taus, laws = as_bv_fast.SUPPORT_FROM_VOCAB, set(), []
    original_node_law = as_bv.node_law

    def recording_node_law(*args):
        law = original_node_law(*args)
        laws.append(law)
        return law

    monkeypatch.setattr(as_bv, "node_law", recording_node_law)
    for trial in range(8):
        K, L = 2 + trial % 3, 2 + trial % 2
        root = int(torch.multinomial(draft(()), 1, generator=generator))
        blocks = []
        for k in range(K):  # drafts share their first token, so the alive counts stay >= 2
            block = [root]
            while len(block) < L:
                block.append(int(torch.multinomial(draft(tuple(block)), 1, generator=generator)))
            blocks.append(block)
        inp = verify_input_for(blocks, target, draft)
        monkeypatch.setattr(as_bv_fast, "SUPPORT_FROM_VOCAB", default)
        assert as_bv_fast.on_support(inp).inp.vocab_size == 401  # the path is taken by default
        results = {}
        for smallest in (default, vocab + 1):
            monkeypatch.setattr(as_bv_fast, "SUPPORT_FROM_VOCAB", smallest)
            runs = [method.verify(inp, TorchRandomness(torch.Generator().manual_seed(seed))) for seed in range(8)]
            results[smallest > vocab] = (runs, method.expected_accepted(inp))
        (narrow, narrow_expected), (full, full_expected) = results[False], results[True]
        assert narrow_expected == pytest.approx(full_expected, abs=1e-12)
        for a, b in zip(narrow, full):
            assert (a.tokens, a.final_kind, a.winning_draft) == (b.tokens, b.final_kind, b.winning_draft)
            assert [t.accept_prob for t in a.tests] == pytest.approx([t.accept_prob for t in b.tests], abs=1e-12)
            assert a.final_distribution.shape == (vocab,)
            assert torch.allclose(a.final_distribution, b.final_distribution, atol=1e-12, rtol=0)
            taus.add(a.num_accepted == 0 or (a.num_accepted == L and "L"))
    mixtures = {law.mixture(n) for law in laws for n in law.components}  # a device law reads them when asked
    assert {True, "L"} <= taus and mixtures - {as_bv.ONLY_FIRST}


def test_a_support_too_narrow_for_the_large_vocabulary_paths_keeps_the_full_vocabulary():
    """A top-k-like draft of 40 tokens on a 1,200-token vocabulary would shrink to 41 cells, where
    the order and the lambda LP take their small-table paths: a different (still exact) rule.
    The support path is refused there, so AS-BV is the same rule whatever the draft's support."""
    target, other = dirichlet_pair(1200, 63, "independent")
    draft = narrow_head(other, 1200, lambda context: range(40))
    inp = verify_input_for([[3, 7], [3, 9]], target, draft)
    assert on_draft_support(inp, as_bv_fast.SUPPORT_FROM_VOCAB) is not None  # it would pay
    assert as_bv_fast.on_support(inp) is None  # but AS-BV declines it


# AS-BV+H (tests/test_as_bv_handoff.py) shares AS-BV's phases, so the theory-line and K = 1 tests
# below run on both rules.
RULES = [as_bv, as_bv_handoff]


@pytest.mark.parametrize("rule", RULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
@pytest.mark.parametrize("stand_ins", [False, True])
def test_theory_line_equals_the_enumerated_mean_given_the_drafts(stand_ins, rule, monkeypatch):
    if stand_ins:
        monkeypatch.setattr(as_bv_fast, "ORDER_HEAD", 2)
        monkeypatch.setattr(as_bv_lp, "MAX_LP_TOKENS", 2)
    target, draft = dirichlet_pair(3, 23, "mixed")
    blocks = list(itertools.product(range(3), repeat=2))
    for drafts in itertools.islice(itertools.product(blocks, repeat=3), 0, None, 23):
        assert_theory_line_is_the_enumerated_mean(rule, verify_input_for(drafts, target, draft))


# -------------------------------------------------------------------------------- reductions


@pytest.mark.parametrize("rule", RULES, ids=lambda m: m.__name__.rsplit(".", 1)[-1])
def test_one_draft_is_gbv_outcome_for_outcome_under_the_same_seeds(rule):
    """At K = 1 AS-BV and AS-BV+H are GBV: the same tokens, coins and uniforms. Their scan computes
    every h (one read), GBV's only where a coin can succeed: the same h wherever GBV has one."""
    target, draft = dirichlet_pair(5, 31, "mixed", concentration=0.5)
    generator = torch.Generator().manual_seed(5)
    for trial in range(40):
        L = 1 + trial % 4
        block = [int(torch.multinomial(draft(()), 1, generator=generator))]
        while len(block) < L:
            block.append(int(torch.multinomial(draft(tuple(block)), 1, generator=generator)))
        inp = verify_input_for([block], target, draft)
        for seed in range(5):
            a = rule.verify(inp, TorchRandomness(torch.Generator().manual_seed(seed)))
            b = METHODS["gbv"].verify(inp, TorchRandomness(torch.Generator().manual_seed(seed)))
            assert (a.tokens, a.final_kind, a.winning_draft) == (b.tokens, b.final_kind, b.winning_draft)
            assert [(t.length, t.accepted, t.uniform) for t in a.tests] == [(t.length, t.accepted, t.uniform) for t in b.tests]
            assert all(x.accept_prob == y.accept_prob for x, y in zip(a.tests, b.tests) if y.accept_prob is not None)
            assert all(x.accept_prob is not None for x in a.tests)
            assert torch.equal(a.final_distribution, b.final_distribution)
        # AS-BV's theory line is GBV's to the bit; AS-BV+H sums the same terms in another order.
        tolerance = 0.0 if rule is as_bv else 1e-12
        assert rule.expected_accepted(inp) == pytest.approx(METHODS["gbv"].expected_accepted(inp), abs=tolerance, rel=0)


def theory_expected(name: str, target_fn, draft_fn, num_drafts: int, draft_length: int) -> float:
    """E[tau] = sum over draft tuples of P(tuple) E[tau | tuple] (the theory line, which the
    enumeration tests tie to the verifier)."""
    vocab = len(target_fn(()))
    total = 0.0
    for drafts in itertools.product(itertools.product(range(vocab), repeat=draft_length), repeat=num_drafts):
        weight = 1.0
        for x in drafts:
            weight *= sequence_prob(x, draft_fn)
        if weight > 0:
            total += weight * METHODS[name].expected_accepted(verify_input_for(drafts, target_fn, draft_fn))
    return total


@pytest.mark.parametrize("V, K", [(4, 2), (4, 3), (3, 4)])
@pytest.mark.parametrize("seed", [41, 42, 43])
def test_one_position_accepts_at_least_as_much_as_spectr(V, K, seed):
    target, draft = dirichlet_pair(V, seed, "independent" if seed % 2 else "mixed")
    assert theory_expected("as_bv", target, draft, K, 1) >= theory_expected("spectr", target, draft, K, 1) - 1e-12


# ------------------------------------------------------ golden values (docs/algorithms.md §6.7)


def block_law_expected(target_fn, draft_fn, num_drafts: int, draft_length: int) -> float:
    """GBV(D) = sum_i sum_{y in Omega^i} w_i(y), w_i = min(w_{i-1} q(y_i | y_<i), D(y_1:i)), over the
    law tree of the selected block (docs/algorithms.md §6.1): the exact E[tau] of AS-BV."""
    vocab = len(target_fn(()))
    total = 0.0

    def walk(prefix, alive_law, omega, block_prob, weight):
        nonlocal total
        if len(prefix) == draft_length:
            return
        target = target_fn(prefix)
        law = as_bv.node_law(target, draft_fn(prefix), alive_law, omega)
        for y in range(vocab):
            selected = float(law.selected[y])
            if selected > 0:
                child_prob = block_prob * selected
                child_weight = min(weight * float(target[y]), child_prob)
                total += child_weight
                walk(prefix + (y,), as_bv.child_alive_law(law, y), as_bv.next_omega(omega, float(target[y]), selected),
                     child_prob, child_weight)

    walk((), {num_drafts: 1.0}, 1.0, 1.0, 1.0)
    return total


GOLDEN = [  # q, p, L, K, E[tau] of AS-BV (docs/algorithms.md §6.7)
    (Q2, P2, 2, 2, 1.617284),
    (Q2, P2, 2, 3, 1.832822),
    ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5), 2, 2, 1.550800),
    ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5), 2, 3, 1.676893),
    ((0.6, 0.3, 0.1), (0.3, 0.4, 0.3), 3, 2, 2.223165),
    ((0.6, 0.3, 0.1), (0.3, 0.4, 0.3), 3, 3, 2.407815),
]


@pytest.mark.parametrize("q, p, L, K, expected", GOLDEN)
def test_golden_expected_accepted_of_section_6_7(q, p, L, K, expected):
    assert block_law_expected(constant(q), constant(p), K, L) == pytest.approx(expected, abs=1e-6)


def test_two_draft_golden_value_is_the_lp_optimum_131_81_by_full_enumeration():
    law = iteration_law(METHODS["as_bv"], constant(Q2), constant(P2), 2, 2)
    assert law.expected_accepted == pytest.approx(131 / 81, abs=1e-12)


@pytest.mark.parametrize("q, p, L, K, expected", [GOLDEN[2], GOLDEN[4]])
def test_golden_values_also_come_out_of_the_theory_line(q, p, L, K, expected):
    assert theory_expected("as_bv", constant(q), constant(p), K, L) == pytest.approx(expected, abs=1e-6)


def test_the_lambda_lp_picks_the_optimal_vertex_of_a_flat_face():
    """Two-token root at K = 3: sum_x min(lambda . s, q) = 1 on a whole edge of optima. The golden
    value needs the vertex (lex 0.7363, seq 0.2637): HiGHS's choice, not the grid's (0.9, 0, 0.1)."""
    law = as_bv.node_law(f64(Q2), f64(P2), {3: 1.0}, 1.0)
    lex, seq, first = law.mixtures[3]
    assert (lex, seq, first) == pytest.approx((0.736317, 0.263683, 0.0), abs=1e-6)
    assert torch.allclose(law.selected, f64(Q2), atol=1e-12)  # D_root = q: nothing is lost at the root


def lp_weights(s: torch.Tensor, cap: torch.Tensor) -> tuple[float, float, float]:
    """lambda as the rule takes it at this size: HiGHS's LP, or above MAX_LP_TOKENS the vertex search."""
    if s.shape[-1] <= as_bv_lp.MAX_LP_TOKENS:
        return as_bv_lp.node_mixture(s, cap).weights
    return tuple(as_bv_lp.vertex_mixture_on_device(s, cap)[0].tolist())


def test_reduced_lambda_lp_reaches_the_full_optimum_when_few_tokens_cross(monkeypatch):
    """Above MAX_LP_TOKENS the objective stays exact for the tokens whose kink crosses the
    simplex; while there are at most that many, the vertex search must reach the value of
    the full LP's optimum (HiGHS)."""
    value = lambda w, s, cap: float(torch.minimum(f64(w) @ s, cap).sum())  # noqa: E731
    checked = 0
    for seed in range(40):
        s = torch.stack([dirichlet_model(12, 100 * seed + r, 0.6)(()) for r in range(3)])
        cap = 0.8 * dirichlet_model(12, 100 * seed + 7, 0.6)(())
        crossing = int((~(s <= cap).all(0) & ~(s >= cap).all(0)).sum())
        full = lp_weights(s, cap)
        monkeypatch.setattr(as_bv_lp, "MAX_LP_TOKENS", 8)
        reduced = lp_weights(s, cap)
        monkeypatch.setattr(as_bv_lp, "MAX_LP_TOKENS", 64)
        if crossing <= 8:
            assert value(reduced, s, cap) == pytest.approx(value(full, s, cap), abs=1e-12)
            checked += 1
        else:  # the chord under-estimates the tail: never better than the optimum
            assert value(reduced, s, cap) <= value(full, s, cap) + 1e-12
    assert checked >= 5


def test_a_subnormal_draft_probability_shared_by_every_draft_is_accepted_without_nan():
    """All K drafts carry a token of draft probability 5e-324: the posterior of K alive drafts
    underflows to 0 (tiny^K), yet the K drafts are alive; the rule must still accept the
    block (q gives it probability 1) and its theory line must be finite."""
    tiny = 4.9e-324
    draft = f64([[1.0, 0.0, 0.0], [1.0, tiny, 0.0], [1.0, 0.0, 0.0]])
    target = f64([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]])
    for K in (1, 3):
        inp = VerifyInput.build(torch.tensor([[0, 1, 0]] * K), draft.expand(K, -1, -1), target.expand(K, -1, -1))
        assert as_bv.verify(inp, ScriptedRandomness([0.0] * 40)).tokens == [0, 1, 0, 0]
        assert as_bv.expected_accepted(inp) == pytest.approx(3.0)


# ------------------------------------------------------------------------------- public API


def test_generate_and_theory_line_through_the_public_api():
    target, draft = toy_pair()
    record = generate(target, draft, [0], method="as_bv", num_drafts=3, draft_length=3, max_new_tokens=12, seed=4)
    assert len(record.tokens) == 12 and record.mean_expected_accepted is not None
    assert all(it.num_accepted <= 3 for it in record.iterations)
    again = generate(target, draft, [0], method="as_bv", num_drafts=3, draft_length=3, max_new_tokens=12, seed=4)
    assert again.tokens == record.tokens
    spec = METHODS["as_bv"]
    assert (spec.label, spec.multi_draft, spec.block, spec.exact) == ("AS-BV", True, True, True)
