"""AS-BV's speed stand-ins (`as_bv_fast`, `as_bv_lp`) against the plain computations they replace.

Methodology: every fast path here computes a quantity that has a slow, obvious reference, and
the two are compared on seeded inputs:

* `count_sum` by Horner's rule against the term-by-term sum (relative 1e-12);
* `NodeOrder`, with a head as wide as the vocabulary and with a narrower one, against the order
  written out as a list (`below`, `below_mask` and `top` read off that list, exactly);
* the components' unguarded path (p > 0 everywhere) against the guarded one, to the bit;
* a large table's components (rho* searched on the device, beta's powers there) against the
  host arithmetic of a small table (1e-13), and rho* against the host bisection;
* the vertex search's lower bound on F(lambda) against F(lambda), and "first"'s check with it
  against the check with its host read: the same decisions;
* the vertex search's pair solutions (Cramer's rule, four matrix products) against
  `numpy.linalg.solve` pair by pair;
* the lambda LP handed to HiGHS directly against `scipy.optimize.linprog(method="highs-ds")`,
  to the bit, on LPs with ties, zero marginals and zero caps;
* outcomes: AS-BV with K = 5 drafts (Horner's rule on) against the same rule with the
  term-by-term sum, under the same seeds: the same tokens, kinds, winners and coins, the
  final distributions to 1e-12.

The support layout against the full vocabulary, outcome for outcome under the same seeds, is
`test_the_support_path_is_the_same_rule_on_a_large_vocabulary` in tests/test_as_bv.py; the
reduced lambda LP against the full one is in the same file. The stand-ins that are a
different (still exact) rule are covered there by exact enumeration.
"""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest
import torch

from conftest import dirichlet_model, dirichlet_pair
from spectr_gbv.exact import verify_input_for
from spectr_gbv.methods import as_bv, as_bv_device, as_bv_fast, as_bv_laws, as_bv_lp
from spectr_gbv.randomness import TorchRandomness

pytestmark = pytest.mark.exact


def reference_order(target: torch.Tensor, draft: torch.Tensor, head_size: int) -> list[int]:
    """The strict order as a list, lowest first: the tail (tokens outside the head_size likeliest
    proposals) by id, then the head by q/p, ties broken by the larger id."""
    vocab = target.shape[-1]
    head = set(range(vocab)) if vocab <= head_size else set(torch.topk(draft, head_size).indices.tolist())
    tail = sorted(set(range(vocab)) - head)
    return tail + sorted(head, key=lambda x: (float(target[x] / draft[x]), x))


@pytest.mark.parametrize("head_size", [256, 4])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_head_and_tail_order_is_the_order_it_stands_for(head_size, seed, monkeypatch):
    monkeypatch.setattr(as_bv_fast, "ORDER_HEAD", head_size)
    vocab = 12
    target, draft = dirichlet_model(vocab, seed)(()), dirichlet_model(vocab, seed + 50)(())
    order = as_bv_fast.strict_order(target, draft)
    ranked = reference_order(target, draft, head_size)
    weights = dirichlet_model(vocab, seed + 99)(())
    expected_below = torch.zeros(vocab, dtype=torch.float64)
    for place, x in enumerate(ranked):
        expected_below[x] = sum(float(weights[y]) for y in ranked[:place])
        mask = order.below_mask(x)
        assert sorted(mask.nonzero().squeeze(-1).tolist()) == sorted(ranked[:place])
    assert torch.allclose(order.below(weights), expected_below, rtol=1e-12, atol=1e-15)
    for tokens in itertools.combinations(range(vocab), 3):
        assert order.top(list(tokens)) == max(tokens, key=ranked.index)


@pytest.mark.parametrize("n", [4, 5, 8])
def test_count_sums_by_horners_rule_equal_the_term_by_term_sum(n, monkeypatch):
    generator = torch.Generator().manual_seed(n)
    carrier = dirichlet_model(64, n)(())
    below = torch.rand(64, generator=generator, dtype=torch.float64) * (1.0 - carrier)
    horner = as_bv_fast.count_sum(carrier, below, n)
    monkeypatch.setattr(as_bv_fast, "HORNER_FROM", 10**9)
    terms = as_bv_fast.count_sum(carrier, below, n)
    assert torch.allclose(horner, terms, rtol=1e-12, atol=0.0)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_the_unguarded_components_path_is_the_guarded_one(n):
    target, draft = dirichlet_model(10, 7)(()), dirichlet_model(10, 8)(())
    order = as_bv_fast.strict_order(target, draft)
    assert order.positive
    below = order.below(draft)
    fast = as_bv.components(target, draft, order, below, n)
    guarded = as_bv.components(target, draft, dataclasses.replace(order, positive=False), below, n)
    assert torch.equal(fast.accept, guarded.accept) and torch.equal(fast.marginals, guarded.marginals)


@pytest.mark.parametrize("n", [2, 3, 5])
def test_a_large_tables_components_on_the_device_are_the_host_computation(n, monkeypatch):
    """With a tail in the order (V = 400 > ORDER_HEAD) rho* is searched on the device and beta's
    powers stay there: the full search equals the host bisection to a few ulp, AS-BV's shorter one
    (RHO_STEPS) lies above rho* by at most its bound, and given the same rho the components equal
    the host arithmetic of a small table (float beta, Python powers) to 1e-13."""
    from spectr_gbv.methods.spectr import RHO_GRID, optimal_rho_on_device

    target, draft = dirichlet_model(400, 11, 0.3)(()), dirichlet_model(400, 12, 0.3)(())
    order = as_bv_fast.strict_order(target, draft)
    assert order.compressed is not None
    host_rho = float(as_bv_fast.optimal_rho(*order.compressed, n))
    assert 1.0 < host_rho and float(optimal_rho_on_device(*order.compressed, n)) == pytest.approx(host_rho, rel=1e-14)
    device_rho = float(order.rho(target, draft, n))
    assert 0.0 <= device_rho - host_rho <= (n - 1) / (RHO_GRID + 1) ** as_bv_fast.RHO_STEPS
    host_rho = torch.tensor(host_rho, dtype=torch.float64)
    below = order.below(draft)
    monkeypatch.setattr(as_bv_fast.NodeOrder, "rho", lambda self, *args: host_rho)
    on_device = as_bv.components(target, draft, order, below, n)
    on_host = as_bv.components(target, draft, dataclasses.replace(order, compressed=None), below, n)
    assert isinstance(on_device.beta, torch.Tensor) and isinstance(on_host.beta, float)
    assert float(on_device.beta) == on_host.beta
    for name in ("accept", "rejected", "below_rejected", "marginals"):
        assert torch.allclose(getattr(on_device, name), getattr(on_host, name), rtol=1e-13, atol=0), name


def test_firsts_check_on_the_device_decides_as_the_host_check():
    """On a large table lambda and "first"'s check stay on the device (`_prefer_first_on_device`);
    over nodes of seeded pairs and caps, where lambda mixes components and where it does not,
    they keep or replace lambda as the host check does, with the same mixture row; a count that
    is not busy takes "first" whatever lambda is."""
    mixed = 0
    for seed in range(12):
        target, draft = dirichlet_model(600, 30 + seed, 0.3)(()), dirichlet_model(600, 60 + seed, 0.3)(())
        draft = 0.5 * draft + 0.5 * target
        order = as_bv_fast.strict_order(target, draft)
        below = order.below(draft)
        for n in (2, 3):
            comp = as_bv.components(target, draft, order, below, n)
            for omega in (1.0, 0.6, 0.25):
                cap = omega * target
                weights, capped_sums = as_bv_lp.vertex_mixture_on_device(comp.marginals, cap)
                mixed += max(weights.tolist()) < 1.0
                busy = torch.tensor(True)
                on_device = as_bv_device._prefer_first_on_device(comp.marginals, cap, weights, capped_sums, busy)
                on_host = as_bv_laws._prefer_first(comp.marginals, cap, tuple(weights.tolist()))
                assert tuple(on_device[0].tolist()) == on_host[0]
                assert torch.allclose(on_device[1], on_host[1], rtol=1e-15, atol=0)
                idle = as_bv_device._prefer_first_on_device(comp.marginals, cap, weights, capped_sums, ~busy)
                assert tuple(idle[0].tolist()) == as_bv.ONLY_FIRST and torch.equal(idle[1], draft)
    assert mixed >= 10


def test_the_vertex_searchs_pair_solutions_equal_a_linear_solve_per_pair():
    rng = np.random.default_rng(5)
    normals = np.concatenate([np.eye(3), rng.dirichlet(np.ones(3), size=9)])
    levels = np.concatenate([np.zeros(3), rng.uniform(0.2, 0.5, size=9)])
    planes = torch.ones(len(normals), dtype=torch.bool)
    planes[5] = False  # a masked plane: none of its pairs is a candidate
    expected = []
    for i, j in zip(*np.triu_indices(len(normals), k=1)):
        system = np.stack([normals[i], normals[j], np.ones(3)])
        if abs(np.linalg.det(system)) <= 1e-14 or 5 in (i, j):
            continue
        point = np.linalg.solve(system, [levels[i], levels[j], 1.0])
        if (point >= -1e-12).all():
            expected.append(point)
    points, feasible = as_bv_lp._pair_solutions_on_device(torch.from_numpy(normals), torch.from_numpy(levels), planes)
    assert np.allclose(points[feasible].numpy(), np.array(expected), rtol=1e-9, atol=1e-12)


def test_horners_rule_leaves_every_outcome_of_the_rule_unchanged(monkeypatch):
    """K = 5 drafts sharing their first token (alive counts of 4 and 5 use Horner's rule), eight
    seeds per draft tuple, with the fast count sums and again with the term-by-term ones."""
    target, draft = dirichlet_pair(6, 71, "mixed", concentration=0.5)
    generator, default = torch.Generator().manual_seed(72), as_bv_fast.HORNER_FROM
    assert default <= 5
    for trial in range(6):
        L = 2 + trial % 2
        root = int(torch.multinomial(draft(()), 1, generator=generator))
        blocks = []
        for _ in range(5):
            block = [root]
            while len(block) < L:
                block.append(int(torch.multinomial(draft(tuple(block)), 1, generator=generator)))
            blocks.append(block)
        inp = verify_input_for(blocks, target, draft)
        runs = {}
        for horner_from in (default, 10**9):
            monkeypatch.setattr(as_bv_fast, "HORNER_FROM", horner_from)
            runs[horner_from] = [as_bv.verify(inp, TorchRandomness(torch.Generator().manual_seed(s))) for s in range(8)]
        for a, b in zip(*runs.values()):
            assert (a.tokens, a.final_kind, a.winning_draft) == (b.tokens, b.final_kind, b.winning_draft)
            assert [(t.draft, t.length, t.accepted, t.uniform) for t in a.tests] == \
                   [(t.draft, t.length, t.accepted, t.uniform) for t in b.tests]
            assert [t.accept_prob for t in a.tests] == pytest.approx([t.accept_prob for t in b.tests], abs=1e-12)
            assert torch.allclose(a.final_distribution, b.final_distribution, rtol=0, atol=1e-12)


def _linprog_mixture(s: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """The lambda LP as scipy's documented interface solves it."""
    from scipy.optimize import linprog

    m = b.shape[0]
    solution = linprog(np.concatenate([np.zeros(3), -np.ones(m)]), A_ub=np.hstack([-s.T, np.eye(m)]),
                       b_ub=np.zeros(m), A_eq=np.concatenate([np.ones(3), np.zeros(m)])[None], b_eq=[1.0],
                       bounds=[(0.0, None)] * 3 + [(None, float(x)) for x in b], method="highs-ds")
    return solution.x if solution.status == 0 else None


def _node_lps(seed: int, count: int):
    """LPs shaped like AS-BV's node LPs, with the degenerate cases that break ties in HiGHS:
    equal components, zero marginals, zero caps, rounded values and a cap equal to a component."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        m = int(rng.integers(1, as_bv_lp.MAX_LP_TOKENS + 1))
        s = rng.dirichlet(np.full(m, rng.choice([0.1, 1.0])), size=3)
        if rng.random() < 0.3:
            s[rng.integers(3)] = s[rng.integers(3)]
        if rng.random() < 0.3:
            s[:, rng.random(m) < 0.3] = 0.0
        if rng.random() < 0.3:
            s = np.round(s, 2)
        b = rng.uniform(0.2, 1.0) * rng.dirichlet(np.ones(m))
        if rng.random() < 0.3:
            b[rng.random(m) < 0.3] = 0.0
        if rng.random() < 0.2:
            b = s[0].copy()
        yield s, b


def test_the_lambda_lp_handed_to_highs_is_linprogs_to_the_bit():
    assert as_bv_lp._highs is not None, "this scipy's HiGHS binding moved: every LP goes through linprog"
    for s, b in _node_lps(seed=11, count=400):
        ours, theirs = as_bv_lp.mixture_lp(s, b), _linprog_mixture(s, b)
        assert (ours is None) == (theirs is None)
        if ours is not None:
            assert np.array_equal(ours, theirs), (s, b)


def test_without_scipys_binding_linprog_solves_the_lambda_lp(monkeypatch):
    monkeypatch.setattr(as_bv_lp, "_highs", None)
    for s, b in _node_lps(seed=12, count=40):
        assert np.array_equal(as_bv_lp.mixture_lp(s, b), _linprog_mixture(s, b))
