"""The K x L grid's marks mean what its key says (components/render/kl_heatmap.py, spectr_gbv/bench/grid_cells.py).

For every saved frontier result under assets/results (each temperature of each file) and for a fresh
tiny grid on the Toy world, every drawn cell is checked against intervals recomputed here from the
cell's own per-prompt rows (a paired Student-t interval written out below, not the app's):

* the cell names its best exact rule, by its short label, and its value;
* "~" where, and only where, the interval of best minus runner-up covers 0 (the runner-up: the exact
  rule with the next highest mean, the rules with exactly the best's values left out);
* "=" where, and only where, the interval of best minus the baseline covers 0;
* a grey veil and "too few prompts to rank" in the hover where, and only where, every other rule's
  interval against the best covers 0;
* each mark present in a cell has its key line in the subtitle.
"""

from __future__ import annotations

import math

import pytest
from scipy import stats

from components.render.kl_heatmap import NO_GAIN_MARK, TIE_MARK, UNRANKED
from components.tabs import grid_saved, grid_view
from spectr_gbv.bench.grid_cells import grid_cells, prompts_to_rank, read_rows
from spectr_gbv.methods import METHODS

pytestmark = pytest.mark.unit

NEAR_ZERO = 1e-9  # a bound this close to 0 may fall either side with another summation order: not judged
TOY_GRID = ("toy", ["sd", "spectr", "gbv", "spectr_gbv", "as_bv"], "1 2", "2 3", 0.8, 4, 6, "expected", "best",
            "spectr")


def covers_zero(a: list[float], b: list[float]) -> bool | None:
    """Whether the paired 95 % t-interval of a - b covers 0; None where it sits within NEAR_ZERO of 0."""
    d = [x - y for x, y in zip(a, b)]
    n = len(d)
    mean = sum(d) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (n - 1)) if len(set(d)) > 1 else 0.0
    half = stats.t.ppf(0.975, n - 1) * sd / math.sqrt(n)
    low, high = mean - half, mean + half
    if min(abs(low), abs(high)) < NEAR_ZERO and sd > 0:
        return None
    return low <= 0 <= high


def finite(values) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


def expected_facts(rows: list[dict], baseline: str) -> dict:
    """The best exact rule of one configuration's rows and what its intervals say, computed here."""
    per = {r["method"]: list(r["per_prompt"]["expected_accepted"]) for r in rows
           if r["exact"] and finite(r["per_prompt"]["expected_accepted"])}
    mean = {m: sum(v) / len(v) for m, v in per.items()}
    best = max(per, key=lambda m: mean[m])  # the first listed among equals, as the rows come
    others = [m for m in per if m != best and per[m] != per[best]]
    runner = max(others, key=lambda m: mean[m], default=None)
    against = {m: covers_zero(per[best], per[m]) for m in others}
    return {"best": best, "value": mean[best],
            "tie": against[runner] if runner else False,
            "no_gain": False if best == baseline else covers_zero(per[best], per[baseline]),
            "unranked": bool(others) and all(against.values()),
            "unranked_known": all(v is not None for v in against.values())}


def drawn_cells(fig):
    """(K, L) -> (text written on the cell, its hover, veiled), read off the figure."""
    (heat,) = fig.data
    written = {(a.x, a.y): a.text for a in fig.layout.annotations}
    veiled = {(round((s.x0 + s.x1) / 2), round((s.y0 + s.y1) / 2)) for s in fig.layout.shapes}
    return {(int(k), int(l)): (written[column, row], heat.customdata[row][column], (column, row) in veiled)
            for row, k in enumerate(heat.y) for column, l in enumerate(heat.x)}


def check_marks(rows: list[dict], fig, value: str, baseline: str) -> None:
    by_configuration: dict[tuple[int, int], list[dict]] = {}
    for r in rows:
        by_configuration.setdefault((int(r["K"]), int(r["L"])), []).append(r)
    drawn = drawn_cells(fig)
    assert set(drawn) == set(by_configuration)
    subtitle = fig.layout.title.subtitle.text.replace("<br>", " ")
    for where, configuration in by_configuration.items():
        facts = expected_facts(configuration, baseline)
        text, hover, veiled = drawn[where]
        label, shown = text.split("<br>")
        number, _, marks = shown.partition(" ")
        assert label == METHODS[facts["best"]].label, (where, text)  # the cell names its best rule
        if value == "expected":
            assert float(number) == pytest.approx(facts["value"], abs=5e-4), (where, text)
        if facts["tie"] is not None:
            assert (TIE_MARK in marks) == facts["tie"], (where, text, hover)
        if facts["no_gain"] is not None:
            assert (NO_GAIN_MARK in marks) == facts["no_gain"], (where, text, hover)
        if facts["unranked_known"]:
            assert veiled == facts["unranked"] and (UNRANKED in hover) == facts["unranked"], (where, hover)
        assert set(marks) <= {TIE_MARK, NO_GAIN_MARK}
        # Every mark drawn has its own key line.
        if TIE_MARK in marks:
            assert f"{TIE_MARK} ties the runner-up: the 95 % interval of best − runner-up covers 0" in subtitle
        if NO_GAIN_MARK in marks:
            assert f"{NO_GAIN_MARK} no gain over {METHODS[baseline].label}" in subtitle
        if veiled:
            assert f"grey: {UNRANKED}" in subtitle


def saved_cases() -> list:
    return [pytest.param(key, value, id=f"{key}-{value}") for key in grid_saved.saved_results()
            for value in ("expected", "gain")]


@pytest.mark.parametrize("key, value", saved_cases())
def test_every_saved_result_cell_names_its_best_rule_and_its_marks_match_its_intervals(key, value):
    saved = grid_saved.saved_results()[key]
    rows = [r for r in read_rows(saved.path) if float(r["T"]) == saved.temperature]
    methods = {r["method"] for r in rows}
    baseline = "spectr" if "spectr" in methods else next(m for m in METHODS if m in methods and METHODS[m].exact)
    shown = grid_saved.show_saved(key, value, "best", baseline)
    check_marks(rows, shown.heatmap, value, baseline)


@pytest.mark.parametrize("key", list(grid_saved.saved_results()))
def test_the_prompts_a_cell_needs_to_rank_agree_with_its_own_interval(key):
    """At the cell's own prompt count the estimate is the interval itself: a cell whose best - runner-up interval
    excludes 0 needs no more prompts than it has, a tied one needs more."""
    saved = grid_saved.saved_results()[key]
    for cell in grid_cells(read_rows(saved.path), temperature=saved.temperature):
        need = prompts_to_rank(cell)
        if cell.tie is None or need is None:
            continue
        assert (need <= cell.prompts) == (not cell.tie), (key, cell.K, cell.L, need, cell.runner_interval)


def test_the_grid_says_before_the_run_how_many_prompts_rank_a_cell_on_a_pair_with_a_saved_grid():
    fewest, median, most, where = grid_view.prompts_to_rank("default")
    assert 2 <= fewest <= median <= most and "frontier_grid_v2 at T 0.7" in where
    assert f"fewer than {fewest:,} rank no cell" in grid_view.prompts_info("default")
    assert grid_view.prompts_info("toy") == grid_view.PROMPTS_INFO  # no saved grid: nothing claimed


def test_the_v2_frontier_no_longer_marks_a_tie_where_its_intervals_exclude_0():
    # 120 prompts at T = 0.7: the best beats SpecTr everywhere; "~" only where the runner-up's interval covers 0.
    shown = grid_saved.show_saved("frontier_grid_v2/frontier.json@0.7", "expected", "best", "spectr")
    texts = [text for text, _, _ in drawn_cells(shown.heatmap).values()]
    assert not any(NO_GAIN_MARK in t for t in texts)
    assert sum(TIE_MARK in t for t in texts) < len(texts) - 1


@pytest.mark.parametrize("value", ["expected", "gain"])
def test_a_fresh_toy_grid_names_its_best_rules_and_its_marks_match_its_intervals(value):
    args = list(TOY_GRID)
    args[7] = value
    *_, final = grid_view.run_grid(*args)
    rows = [dict(r, per_prompt={k: [math.nan if v is None else v for v in vs] for k, vs in r["per_prompt"].items()})
            for r in final.data["rows"]]
    assert final.data["configurations_done"] == 4
    check_marks(rows, final.heatmap, value, "spectr")
