"""Compare's and Sweep's charts mark what a reader could misread: noise (outlined, not hatched), ties within
noise, bands past a fitted axis, rules that ignore K, and lines drawn on top of each other."""

from __future__ import annotations

import pytest

from components.render import figures
from components.render.chart_layout import GROWN_PAST, HEIGHT, SUBTITLE_LINE_PX, figure, top_margin
from components.render.band_figures import efficiency_band_figure, sweep_band_figures
from components.render.speedup_figure import speedup_figure, sweep_speedup_figure
from components.wiring.runs import speedup_of
from helpers import last

pytestmark = pytest.mark.unit


def _point(mean: float, low: float | None, high: float | None, repeats: int = 2) -> dict:
    return {"repeats": repeats, "mean_block_efficiency": mean, "band_low": low, "band_high": high,
            "theory_acceptance_length": None, "iterations": 10}


def _row(method: str, value, mean: float, low=None, high=None, axis: str = "K", noisy: bool = False) -> dict:
    spread = 0.5 if noisy else 0.05
    return {"axis": axis, "value": value, "method": method, "repeats": 2, "mean_block_efficiency": mean,
            "band_low": low, "band_high": high, "theory_acceptance_length": None, "iterations": 10,
            "speedup_vs_ar": {"median": 1.2, "low": 1.1, "high": 1.3, "runs": 2, "ar_spread": spread, "noisy": noisy}}


def test_a_noisy_speedup_is_outlined_never_hatched_like_the_lossy_rule():
    speedups = {"sd": speedup_of([8.0, 9.0], [10.0, 10.0]),  # AR steady
                "spectr_gbv": speedup_of([12.0, 14.0], [10.0, 13.0]),  # AR moved by 26 %: noisy
                "spectr_gbv_released": speedup_of([12.0, 13.0], [10.0, 10.0])}  # lossy: its own hatch
    assert [s.noisy for s in speedups.values()] == [False, True, False]
    for fig in (speedup_figure(speedups, "cpu"),
                speedup_figure(speedups, "cpu", {m: {"draft": 1.0, "target": 2.0} for m in ["ar", *speedups]})):
        bars = fig.data[0]
        assert list(bars.marker.pattern.shape) == ["", "", "/"]  # the only hatch is the lossy rule's
        assert [w > 0 for w in bars.marker.line.width] == [False, True, False]  # the noisy bar outlined
        assert "outlined: noisy" in fig.layout.title.subtitle.text and "hatched" not in fig.layout.title.subtitle.text
    sweep = sweep_speedup_figure([_row("sd", 1, 2.0, noisy=True), _row("sd", 2, 2.0)], "K")
    assert list(sweep.data[0].marker.symbol) == ["circle-open", "circle"]  # in Sweep: drawn open


def test_leading_methods_whose_bands_overlap_are_named_as_a_tie_within_noise():
    tied = efficiency_band_figure({"sd": _point(2.0, 1.8, 2.2), "spectr": _point(2.6, 2.4, 2.8),
                                   "spectr_gbv": _point(2.7, 2.5, 2.9)}, coupled=True)
    assert "tie within noise: SpecTr-GBV, SpecTr" in tied.layout.title.subtitle.text.replace("<br>", " ")
    apart = efficiency_band_figure({"sd": _point(2.0, 1.9, 2.1), "spectr_gbv": _point(2.7, 2.6, 2.8)}, coupled=True)
    assert "tie" not in apart.layout.title.subtitle.text
    one_seed = efficiency_band_figure({"sd": _point(2.0, None, None, 1), "spectr_gbv": _point(2.01, None, None, 1)},
                                      coupled=True)
    assert "tie" not in one_seed.layout.title.subtitle.text  # no band: a tie cannot be judged
    rows = [_row("sd", 1, 2.0, 1.8, 2.2), _row("spectr_gbv", 1, 2.1, 1.9, 2.3),
            _row("sd", 2, 2.0, 1.9, 2.1), _row("spectr_gbv", 2, 3.0, 2.9, 3.1)]
    subtitle = sweep_band_figures(rows, timed=False)[0].layout.title.subtitle.text.replace("<br>", " ")
    assert "tie within noise" in subtitle and "K = 1: every method" in subtitle and "K = 2" not in subtitle
    rows.append(_row("gbv", 1, 1.0, 0.9, 1.1))  # now not every method ties at K = 1: the tied ones are named
    subtitle = sweep_band_figures(rows, timed=False)[0].layout.title.subtitle.text.replace("<br>", " ")
    assert "K = 1: SpecTr-GBV, SD" in subtitle


def test_a_long_tie_note_stays_short_and_the_chart_grows_instead_of_its_plot_shrinking():
    # Seven methods tied at three values once made an eleven-line subtitle: beside the open sidebar the
    # plot's height went below zero and Plotly refused to draw the Sweep's last frame.
    methods = ["sd", "spectr", "gbv", "spectr_gbv", "as_bv", "as_bv_handoff", "spectr_gbv_released"]
    rows = [_row(m, k, 2.0 + 0.01 * i, 1.0, 3.5) for k in (1, 2, 4) for i, m in enumerate(methods)]
    efficiency = sweep_band_figures(rows, timed=False)[0]
    subtitle = efficiency.layout.title.subtitle.text
    assert "K = 1, 2, 4: every method" in subtitle.replace("<br>", " ")
    lines = subtitle.count("<br>") + 1
    assert efficiency.layout.margin.t == top_margin(subtitle)
    planned = HEIGHT - GROWN_PAST  # what a chart of three subtitle lines keeps below its title
    assert efficiency.layout.height - efficiency.layout.margin.t == planned, (lines, efficiency.layout.height)
    assert figure("a chart", "x", "y", "one<br>two<br>three").layout.height == HEIGHT  # three lines: as planned
    assert figure("a chart", "x", "y", "one<br>two<br>three<br>four").layout.height == HEIGHT + SUBTITLE_LINE_PX


def test_the_axes_fit_the_points_and_a_band_past_them_is_clipped_and_said_so():
    # Two seeds: a t-band with one degree of freedom reaches 10 on means between 3.4 and 3.8.
    points = {"sd": _point(3.4, 1.0, 6.0), "spectr_gbv": _point(3.8, 0.0, 10.0)}
    bars = efficiency_band_figure(points, coupled=True)
    low, high = bars.layout.yaxis.range
    assert low == 1 and 3.8 < high < 4.5  # the bars' baseline is AR's 1; the top fits the points
    assert "band clipped" in bars.layout.title.subtitle.text
    top = [mean + up for mean, up in zip(bars.data[0].y, bars.data[0].error_y.array)]
    assert max(top) <= high + 1e-9  # the error bars end at the axis (the hover keeps the whole band)
    assert "10.00" in bars.data[0].hovertext[1]
    rows = [_row("sd", 1, 3.4, 1.0, 6.0), _row("sd", 2, 3.6, 0.5, 8.0), _row("spectr_gbv", 1, 3.5, 0.0, 10.0),
            _row("spectr_gbv", 2, 3.8, 1.0, 7.0)]
    lines = sweep_band_figures(rows, timed=False)[0]
    low, high = lines.layout.yaxis.range
    assert 3.0 < low < 3.4 and 3.8 < high < 4.3  # fitted to the points, at both ends
    assert all(low - 1e-9 <= y <= high + 1e-9 for t in lines.data for y in t.y)  # the bands clipped to the axis
    assert "band clipped" in lines.layout.title.subtitle.text
    inside = efficiency_band_figure({"sd": _point(3.4, 3.3, 3.5), "spectr_gbv": _point(3.8, 3.7, 3.9)}, coupled=True)
    assert "clipped" not in inside.layout.title.subtitle.text


@pytest.mark.parametrize("axis", ["K", "L"])
def test_single_draft_rules_are_named_as_ignoring_k_wherever_k_varies(axis):
    rows = [_row(m, v, 2.0 + v / 10, axis=axis) for m in ("sd", "gbv", "spectr_gbv") for v in (1, 2)]
    efficiency, _ = sweep_band_figures(rows, timed=False)
    speed = sweep_speedup_figure(rows, axis)
    for fig in (efficiency, speed):
        names = [t.name for t in fig.data if t.showlegend is not False]
        if axis == "K":
            assert names == ["SD (ignores K)", "GBV (ignores K)", "SpecTr-GBV"], names
        else:
            assert not any("ignores K" in n for n in names), names


def test_lines_that_coincide_are_said_to_coincide():
    from components.render.marks import mark_coinciding

    same = [0.8, 0.5, 0.25]
    summaries = [{"method": m, "per_position_acceptance": values} for m, values in
                 (("as_bv_handoff", same), ("spectr_gbv", same), ("as_bv", same), ("sd", [0.6, 0.3, 0.1]))]
    fig = mark_coinciding(figures.per_position_figure(summaries))
    assert "AS-BV+H, SpecTr-GBV, AS-BV coincide" in fig.layout.title.subtitle.text
    groups = {t.name: t.legendgroup for t in fig.data}
    assert groups["AS-BV+H"] == groups["SpecTr-GBV"] == groups["AS-BV"] != groups["SD"]


def test_compare_on_the_toy_world_says_which_per_position_lines_coincide():
    from components.tabs import compare

    outputs = last(compare.compare("toy", "the cat", ["as_bv_handoff", "as_bv", "sd"], 2, 3, 0.8, 20, 0, True, 2))
    per_position = {t.name: tuple(t.y) for t in outputs.per_position.data}
    assert per_position["AS-BV+H"] == per_position["AS-BV"]  # these drafts and draws: the same line
    assert "AS-BV+H, AS-BV coincide" in outputs.per_position.layout.title.subtitle.text


# ------------------------------------------------------------------ when one prompt ranks nothing


def test_one_prompt_that_ranks_nothing_says_so_and_offers_the_largest_set_that_fits():
    """SD and SpecTr at K = 1 are one rule: every band overlaps, the page says the bars' order is noise and
    offers a prompt set; that set then runs within the budget, and ranks by paired intervals."""
    from components.tabs import compare
    from components.wiring.prompt_set_choice import SET_NAMES, set_size

    outputs = last(compare.compare("toy", "the cat", ["sd", "spectr"], 1, 3, 0.7, 12, 0, True, 2))
    data = outputs.data
    assert data["cannot_separate"] and data["set_offer"] in SET_NAMES and set_size(data["set_offer"], "toy") > 1
    assert "One prompt cannot separate these rules" in outputs.texts and data["set_offer"] in outputs.texts
    button = compare.offer_button(data)
    assert button["visible"] and button["value"].startswith(f"Run over {data['set_offer']} (")
    assert compare.offered_set(data) == (data["set_offer"], 1)  # the set, and the one repeat it was sized for
    over_set = last(compare.compare("toy", "the cat", ["sd", "spectr"], 1, 3, 0.7, 12, 0, True, 1,
                                    compare.offered_set(data)[0], "")).data
    assert not over_set["stopped"] and over_set["prompt_set"] == data["set_offer"]
    assert not compare.offer_button(over_set)["visible"]  # a set's run offers nothing more


def test_rules_that_separate_get_no_offer_and_junk_offers_are_refused():
    from components.tabs import compare
    from components.tabs.compare_run import CompareView

    view = CompareView.__new__(CompareView)
    apart = {"sd": _point(2.0, 1.9, 2.1), "as_bv": _point(3.0, 2.9, 3.1), "gbv": _point(2.2, 2.0, 2.95)}
    assert not view.cannot_separate(apart)
    assert view.cannot_separate(apart | {"as_bv": _point(2.5, 2.0, 3.1)})
    assert not view.cannot_separate({"sd": _point(2.0, None, None), "as_bv": _point(2.1, None, None)})  # one seed
    for junk in (None, {}, {"set_offer": "suite-7"}, {"set_offer": ["x"]}, "suite-20"):
        assert not compare.offer_button(junk)["visible"]
        with pytest.raises(ValueError):
            compare.offered_set(junk)


def test_compare_says_before_the_run_whether_its_prompts_can_rank_the_rules():
    """Read off the pair's saved grid at the sidebar's K and L: one prompt never, a set of at least the prompts the
    saved cell needs can; a pair or K x L without a saved cell gets no note."""
    from components.tabs import grid_saved
    from components.tabs.compare_ranking import ranking_note
    from spectr_gbv.bench.grid_cells import prompts_to_rank

    cell = next(c for r, c in grid_saved.saved_cells("default")
                if r.key == grid_saved.DEFAULT_SAVED and (c.K, c.L) == (2, 4))
    need = prompts_to_rank(cell)
    one = ranking_note("default", 2, 4, 0.7, "prompt")
    assert f"K = 2, L = 4, T = 0.7 ({cell.prompts} prompts)" in one and f"about {need:,} prompts" in one
    assert one.endswith("1 prompt will not rank them.")
    assert ranking_note("default", 2, 4, 0.7, "suite-120").endswith(
        "120 prompts can rank them." if need <= 120 else "120 prompts will not rank them.")
    assert ranking_note("toy", 2, 4, 0.7, "prompt") == "" and ranking_note("default", 3, 4, 0.7, "prompt") == ""
    with pytest.raises(ValueError):
        ranking_note("default", "two", 4, 0.7, "prompt")
