"""The ceiling (docs/algorithms.md §6.1, §6.2): the best E[tau] any exact K-draft rule can reach.

Methodology: the LP "max over D in B(f) of GBV(D)" must reproduce the "LP optimum" column of
docs/algorithms.md §6.7 to 1e-6 and GBV's exact E[tau] at K = 1; on random context-dependent tables it must lie
at or above every exact method's exact E[tau] (the theory line summed over every draft tuple,
which the enumeration tests tie to each verifier) and at or below
the unattainable w^K bound of docs/algorithms.md §6.2; the shortcut "Q is selectable, so OPT = L" must agree with
the LP where both apply; sizes over the bounds are refused with a ValueError.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from conftest import constant, dirichlet_model, dirichlet_pair
from spectr_gbv import ceiling
from spectr_gbv.ceiling import optimal_expected_accepted, run_ceiling, teaching_ceiling
from spectr_gbv.config import DecodeConfig
from spectr_gbv.exact import iteration_law, sequence_prob
from spectr_gbv.methods import METHODS
from components.tabs import compare
from helpers import theory_expected_accepted

pytestmark = pytest.mark.exact

Q2, P2 = (1 / 3, 2 / 3), (2 / 3, 1 / 3)

GOLDEN_LP = [  # q, p, L, K, LP optimum (docs/algorithms.md §6.7; K = 1 is GBV, §2.7)
    (Q2, P2, 2, 1, 11 / 9),
    (Q2, P2, 2, 2, 1.617284),
    (Q2, P2, 2, 3, 1.853224),
    ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5), 2, 2, 1.560800),
    ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5), 2, 3, 1.804040),
    ((0.6, 0.3, 0.1), (0.3, 0.4, 0.3), 3, 2, 2.289646),
    ((0.6, 0.3, 0.1), (0.3, 0.4, 0.3), 3, 3, 2.652924),
]


@pytest.mark.parametrize("q, p, L, K, expected", GOLDEN_LP)
def test_golden_lp_optimum_of_section_6_7(q, p, L, K, expected):
    assert optimal_expected_accepted(constant(q), constant(p), K, L) == pytest.approx(expected, abs=1e-6)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_one_draft_ceiling_is_gbv(seed):
    target, draft = dirichlet_pair(3, seed, "independent")
    for L in (1, 2, 3):
        gbv = iteration_law(METHODS["gbv"], target, draft, 1, L).expected_accepted
        assert optimal_expected_accepted(target, draft, 1, L) == pytest.approx(gbv, abs=1e-9)


def wk_bound(target_fn, draft_fn, num_drafts: int, draft_length: int) -> float:
    """sum_i sum_y w^K_i(y), w^K_i = min(w^K_{i-1} q, 1 - (1 - P(y_1:i))^K): the upper bound
    of docs/algorithms.md §6.2."""
    vocab, total = len(target_fn(())), 0.0
    weights = {(): 1.0}
    for i in range(1, draft_length + 1):
        for y in itertools.product(range(vocab), repeat=i):
            w = min(weights[y[:-1]] * float(target_fn(y[:-1])[y[-1]]), 1 - (1 - sequence_prob(y, draft_fn)) ** num_drafts)
            weights[y] = w
            total += w
    return total


@pytest.mark.parametrize("V, L, K, seed, kind", [(3, 2, 2, 11, "independent"), (2, 2, 3, 12, "mixed"), (3, 2, 3, 13, "mixed"),
                                                 (2, 3, 2, 14, "independent")])
def test_no_exact_method_beats_the_ceiling_and_the_ceiling_respects_the_wk_bound(V, L, K, seed, kind):
    target, draft = dirichlet_pair(V, seed, kind)
    best = optimal_expected_accepted(target, draft, K, L)
    for name, spec in METHODS.items():
        if spec.exact:
            value = theory_expected_accepted(name, target, draft, K if spec.multi_draft else 1, L)
            assert value <= best + 1e-9, name
    assert best <= wk_bound(target, draft, K, L) + 1e-9
    assert best > iteration_law(METHODS["gbv"], target, draft, 1, L).expected_accepted  # K drafts do help


def test_a_selectable_target_law_gives_every_block_and_the_lp_agrees(monkeypatch):
    q, p = (0.5, 0.3, 0.2), (0.4, 0.35, 0.25)  # close enough that three drafts can copy the target
    assert optimal_expected_accepted(constant(q), constant(p), 3, 2) == 2.0
    real, calls = ceiling._violated, []

    def check_fails_once(law, block_probs, num_drafts, count):  # so that the LP itself runs
        calls.append(law)
        return ceiling.np.array([0.5]) if len(calls) == 1 else real(law, block_probs, num_drafts, count)

    monkeypatch.setattr(ceiling, "_violated", check_fails_once)
    assert optimal_expected_accepted(constant(q), constant(p), 3, 2) == pytest.approx(2.0, abs=1e-7)
    assert len(calls) >= 2


def test_tables_over_the_bounds_are_refused():
    with pytest.raises(ValueError, match="V\\^L <= 4096"):
        optimal_expected_accepted(constant([0.125] * 8), constant([0.125] * 8), 2, 5)
    far = dirichlet_model(8, 5, 0.5), dirichlet_model(8, 6, 0.5)
    with pytest.raises(ValueError, match="LP is limited to V\\^L <= 128"):
        optimal_expected_accepted(*far, 2, 3)
    with pytest.raises(ValueError, match="K >= 1"):
        optimal_expected_accepted(constant(Q2), constant(P2), 0, 2)


def test_teaching_ceiling_is_for_the_teaching_pairs_only():
    assert teaching_ceiling("two-token", [(0,), (0, 1)], 2, 2, 1.0) == pytest.approx(131 / 81, abs=1e-6)
    assert teaching_ceiling("default", [(0,)], 2, 2, 1.0) is None
    assert teaching_ceiling("toy", [(0,)], 2, 5, 1.0) is None  # 8^5 blocks
    toy = teaching_ceiling("toy", [(0,), (1,), (0,)], 2, 2, 0.7)
    by_word = [teaching_ceiling("toy", [(w,)], 2, 2, 0.7) for w in (0, 1)]
    assert toy == pytest.approx((2 * by_word[0] + by_word[1]) / 3)
    assert 1.0 < toy < 2.0


def test_run_ceiling_reads_the_contexts_where_iterations_started():
    config = DecodeConfig(method="as_bv", num_drafts=2, draft_length=2, temperature=0.7)
    value = run_ceiling("toy", [0], [[1, 3], [5]], config)  # two iterations: after "the", after "cat sat"
    expected = sum(teaching_ceiling("toy", [(w,)], 2, 2, 0.7) for w in (0, 3)) / 2
    assert value == pytest.approx(expected)


def test_compare_chart_draws_the_ceiling_line_only_when_given():
    from components.render.band_figures import efficiency_band_figure
    from components.wiring.runs import point_stats

    points = {"as_bv": point_stats([2.4], [1.3], [20])}
    assert not efficiency_band_figure(points, coupled=True).layout.shapes
    chart = efficiency_band_figure(points, coupled=True, ceiling=1.853224)
    line = chart.layout.shapes
    assert len(line) == 1 and line[0].y0 == pytest.approx(2.853224)
    assert chart.layout.yaxis.range[1] > 2.853224  # the axis shows the line


def test_compare_on_a_teaching_pair_draws_the_ceiling_in_its_chart():
    import app

    *_, (_html, efficiency, *_charts, data) = compare.compare("two-token", "A B", ["sd", "as_bv"], 2, 2, 1.0, 8, 0, True)
    ceiling_value = data["ceiling_expected_accepted"]
    assert ceiling_value is not None and 0 < ceiling_value <= 2  # at most L = 2 accepted
    line = efficiency.layout.shapes
    assert len(line) == 1 and line[0].y0 == pytest.approx(1 + ceiling_value)


def test_about_table_has_every_exact_multi_draft_rule_under_the_ceiling():
    from components.tabs.about import frontier_methods, frontier_rows

    assert {"as_bv", "traversal", "spectr", "spectr_gbv"} <= set(frontier_methods())
    for K, values, best in frontier_rows():
        assert max(values) <= best + 1e-9
    assert frontier_rows()[0][2] == pytest.approx(131 / 81, abs=1e-6)  # K = 2: AS-BV reaches it
