"""AS-BV with hand-off (`as_bv_handoff`, docs/algorithms.md §7): exactness and its parts.

Methodology, tier by tier:

* The losers' laws, the one new fact the exactness argument rests on: for every tuple of n
  i.i.d. candidates and every coin of the selection (`select_with_detail` under exact
  enumeration), P(how the node selected, the losers' tokens) must equal P(how the node
  selected) times the product of the closed-form `loser_law`s (y, the component, seq's
  accepted place; losers independent), to 1e-12, with tied ratios, with and without the
  head/tail order of large vocabularies.
* Exact enumeration (`spectr_gbv.exact`): TV of the output law, continued by the target,
  against the target's <= 1e-12, on tiny tables and with the large-vocabulary stand-ins.
* Order: exact E[tau] is never below AS-BV's, strictly above it on a golden table of docs/algorithms.md §6.7, and
  never above the LP optimum.
* Shared with AS-BV, in tests/test_as_bv.py (the rule reuses its phases): the theory line equals
  the enumerated mean given the drafts; K = 1 is GBV outcome for outcome under the same seeds;
  on a narrow draft head, the support layout is the same rule as the full vocabulary.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import defaultdict

import pytest
import torch

from conftest import constant, dirichlet_pair, f64, fidelity_error
from spectr_gbv.ceiling import optimal_expected_accepted
from spectr_gbv.exact import enumerate_outcomes, iteration_law
from spectr_gbv.methods import METHODS, as_bv, as_bv_fast, as_bv_handoff

pytestmark = pytest.mark.exact

TIED = ((0.2, 0.4, 0.4), (0.1, 0.2, 0.7))  # tokens 0 and 1 share the ratio q/p = 2
NODE_TABLES = [TIED, ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5)), ((0.1, 0.2, 0.3, 0.4), (0.4, 0.3, 0.2, 0.1))]


# -------------------------------------------------------------------------- the losers' laws


@pytest.mark.parametrize("q, p", NODE_TABLES)
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("head", [256, 2])
def test_losers_have_the_closed_form_laws_given_how_the_node_selected(q, p, n, head, monkeypatch):
    monkeypatch.setattr(as_bv_fast, "ORDER_HEAD", head)
    target, draft = f64(q), f64(p)
    vocab = len(q)
    law = as_bv.node_law(target, draft, {n: 1.0}, 1.0)
    for component in range(3):
        forced = dataclasses.replace(law, mixtures={**law.mixtures, n: tuple(float(r == component) for r in range(3))})
        # joint[(y, component, place, loser places)][loser tokens] = P(...)
        joint: dict[tuple, dict[tuple, float]] = defaultdict(lambda: defaultdict(float))
        for tokens in itertools.product(range(vocab), repeat=n):
            weight = float(torch.prod(draft[list(tokens)]))
            for prob, (y, used, place) in enumerate_outcomes(
                    lambda rng: as_bv.select_with_detail(forced, list(tokens), rng)):
                places = tuple(i for i, t in enumerate(tokens) if t != y)
                joint[(y, used, place, places)][tuple(tokens[i] for i in places)] += weight * prob
        checked = 0
        for (y, used, place, places), outcomes in joint.items():
            if not places:
                continue
            total = sum(outcomes.values())
            laws = [as_bv_handoff.loser_law(forced, n, i, y, used, place) for i in places]
            for loser_tokens in itertools.product(range(vocab), repeat=len(places)):
                product = 1.0
                for g, z in zip(laws, loser_tokens):
                    product *= float(g[z])
                # Joint, not conditional: an event of probability ~1e-16 (a seq test that
                # rejects a candidate accepted with 1 - 1e-16) would otherwise dominate.
                assert outcomes.get(loser_tokens, 0.0) == pytest.approx(total * product, abs=1e-12)
            checked += 1
        assert checked > 0


# ------------------------------------------------------------------------- exact enumeration

INSTANCES = [  # (V, L, K, seed, kind) of context-dependent Dirichlet models
    (2, 2, 2, 11, "independent"),
    (3, 2, 2, 12, "mixed"),
    (2, 2, 3, 16, "mixed"),
    (2, 3, 2, 17, "independent"),
    (3, 1, 3, 15, "independent"),
    (2, 2, 3, 24, "independent"),
]


@pytest.mark.parametrize("V, L, K, seed, kind", INSTANCES)
def test_the_handoff_preserves_the_target_law(V, L, K, seed, kind):
    target, draft = dirichlet_pair(V, seed, kind)
    assert fidelity_error(METHODS["as_bv_handoff"], target, draft, K, L) <= 1e-12


@pytest.mark.parametrize("q, p, L, K", [(*TIED, 2, 2), (*TIED, 1, 3), ((1 / 3, 2 / 3), (2 / 3, 1 / 3), 2, 3)])
def test_the_handoff_is_exact_on_tied_and_context_free_tables(q, p, L, K):
    assert fidelity_error(METHODS["as_bv_handoff"], constant(q), constant(p), K, L) <= 1e-12


@pytest.mark.parametrize("V, L, K, seed, kind", [(3, 2, 2, 12, "mixed"), (4, 1, 3, 21, "independent"), (2, 2, 3, 25, "mixed")])
def test_the_handoff_is_exact_with_the_large_vocabulary_stand_ins(V, L, K, seed, kind, large_vocabulary_paths):
    target, draft = dirichlet_pair(V, seed, kind)
    assert fidelity_error(METHODS["as_bv_handoff"], target, draft, K, L) <= 1e-12


# ---------------------------------------------------------------------- reductions and order


@pytest.mark.parametrize("V, L, K, seed, kind", [(3, 2, 2, 12, "mixed"), (2, 2, 3, 16, "mixed"), (3, 1, 3, 15, "independent")])
def test_never_below_as_bv(V, L, K, seed, kind):
    target, draft = dirichlet_pair(V, seed, kind)
    handoff = iteration_law(METHODS["as_bv_handoff"], target, draft, K, L).expected_accepted
    assert handoff >= iteration_law(METHODS["as_bv"], target, draft, K, L).expected_accepted - 1e-12


def test_above_as_bv_and_below_the_ceiling_on_a_golden_table():
    """The golden table of docs/algorithms.md §6.7: q = (.5, .3, .2), p = (.2, .3, .5), L = 2,
    K = 3: AS-BV 1.676893, LP optimum 1.804040."""
    q, p = constant((0.5, 0.3, 0.2)), constant((0.2, 0.3, 0.5))
    handoff = iteration_law(METHODS["as_bv_handoff"], q, p, 3, 2).expected_accepted
    assert handoff > 1.676893 + 1e-3
    assert handoff <= optimal_expected_accepted(q, p, 3, 2) + 1e-9


def test_generate_through_the_public_api():
    from spectr_gbv import generate
    from spectr_gbv.toy import toy_pair

    target, draft = toy_pair()
    record = generate(target, draft, [0], method="as_bv_handoff", num_drafts=3, draft_length=3, max_new_tokens=12, seed=4)
    assert len(record.tokens) == 12 and record.mean_expected_accepted is not None
    assert all(it.num_accepted <= 3 for it in record.iterations)
    spec = METHODS["as_bv_handoff"]
    assert (spec.label, spec.multi_draft, spec.block, spec.exact) == ("AS-BV+H", True, True, True)
