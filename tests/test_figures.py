"""Pure view functions on example run records: figures, the draft grid, the output HTML, sweeps."""

from __future__ import annotations

import pytest

from components.views import figures
from components.views.band_figures import efficiency_band_figure, sweep_band_figures
from components.views.runs import point_from_summaries, point_stats, speedup_of
from components.views.palette import LOSSY_RED
from components.views.grid import draft_grid_html
from components.views.text import metrics_line, provenance_html, side_by_side_html
from components.views import fidelity
from spectr_gbv import generate
from spectr_gbv.config import DecodeConfig
from spectr_gbv.sweep import sweep
from spectr_gbv.toy import decode, encode, toy_pair


@pytest.fixture(scope="module")
def records():
    target, draft = toy_pair()
    return {m: generate(target, draft, encode("the cat"), method=m, num_drafts=3, draft_length=4, temperature=1.0,
                        max_new_tokens=40, seed=3) for m in ("ar", "sd", "gbv", "spectr_gbv")}


def summaries(records):
    return [r.summary() | {"accepted_length_histogram": r.accepted_length_histogram} for m, r in records.items() if m != "ar"]


def test_compare_figures_have_one_trace_per_method(records):
    s = summaries(records)
    bars = efficiency_band_figure({x["method"]: point_from_summaries([x]) for x in s}, coupled=False).data
    assert list(bars[0].x) == ["SD", "GBV", "SpecTr-GBV"]
    assert list(bars[0].y) == pytest.approx([x["block_efficiency"] for x in s])
    assert len(figures.histogram_figure(s).data) == 3
    assert all(abs(sum(t.y) - 1) < 1e-9 for t in figures.histogram_figure(s).data)
    per_position = figures.per_position_figure(s).data
    assert [len(t.y) for t in per_position] == [4, 4, 4] and all(list(t.y) == sorted(t.y, reverse=True) for t in per_position)
    calls = figures.calls_per_token_figure(s).data[0]
    assert list(calls.y) == pytest.approx([1 / x["block_efficiency"] for x in s])


def test_wall_clock_figures_say_they_depend_on_the_hardware(records):
    fig = figures.speedup_figure({"sd": speedup_of([8.0, 7.0, 9.0], [10.0, 10.0]),
                                  "spectr_gbv": speedup_of([12.0, 11.0, 14.0], [10.0, 13.0])}, "cpu")
    assert "hardware" in fig.layout.title.subtitle.text and list(fig.data[0].y) == pytest.approx([0.8, 12 / 11.3],
                                                                                               rel=1e-3)
    assert list(fig.data[0].error_y.array) == pytest.approx([0.1, 14 / 11.3 - 12 / 11.3], rel=1e-3)  # the range
    assert list(fig.data[0].x) == ["SD", "SpecTr-GBV (noisy)"]  # AR moved by 26 %: flagged on its tick
    single = figures.speedup_figure({"sd": 0.8, "spectr_gbv": 1.2}, "cpu")  # one run each: no bars, the reason
    assert not single.data and "Repeats" in single.layout.annotations[0].text
    phases = {"ar": {"draft": 0.0, "target": 80.0, "verify": 0.0}, "sd": {"draft": 5.0, "target": 40.0, "verify": 2.0},
              "spectr_gbv": {"draft": 6.0, "target": 30.0, "verify": 4.0}}
    split = figures.speedup_figure({"sd": speedup_of([17.0, 17.0], [10.0]), "spectr_gbv": speedup_of([20.0, 20.0], [10.0])},
                                   "cpu", phases)
    assert "hardware" in split.layout.title.subtitle.text and "median of 2+ runs" in split.layout.title.subtitle.text
    bars = {t.name: list(t.y) for t in split.data[1:]}
    assert bars["target"] == [80.0, 40.0, 30.0] and bars["draft"] == [0.0, 5.0, 6.0]
    hidden = figures.speedup_figure({"sd": 9.0}, "cpu", phases, timed=False)
    assert not hidden.data and "lookup tables" in hidden.layout.annotations[0].text
    rows = [{"axis": "K", "value": k, "method": "spectr_gbv", "speedup_vs_ar": 0.5} | point_stats([1 + k / 4], [None], [10])
            for k in (1, 2)]
    efficiency, speed = sweep_band_figures(rows)
    assert "hardware" in speed.layout.title.subtitle.text and list(efficiency.data[0].x) == [1, 2]


def test_theory_figure_pairs_measured_and_expected_lines(records):
    run = records["spectr_gbv"]
    fig = figures.theory_figure({"spectr_gbv": ([it.num_accepted for it in run.iterations],
                                                [it.expected_accepted for it in run.iterations])})
    measured, theory = fig.data
    assert measured.y[-1] == sum(it.num_accepted for it in run.iterations)
    assert theory.y[-1] == pytest.approx(sum(it.expected_accepted for it in run.iterations))
    assert theory.line.color == measured.line.color


def test_distribution_figure_marks_the_drawn_token(records):
    it = next(i for i in records["sd"].iterations if i.final_kind == "correction")  # SD: residual norm((q - p)+)
    fig = figures.distribution_figure(it.final_top, decode([t.token for t in it.final_top]), it.final_kind, it.final_token)
    assert [t.name for t in fig.data] == ["target q", "draft p", "residual (drawn from)"]
    assert [a.text for a in fig.layout.annotations] == ["drawn"]
    # The residual puts no mass where the draft already covers the target (q <= p).
    for top in it.final_top:
        if top.draft_prob is not None and top.target_prob <= top.draft_prob:
            assert top.final_prob == pytest.approx(0.0, abs=1e-12)


def test_draft_grid_shows_k_rows_the_accepted_prefix_and_hover_details(records):
    for it in records["spectr_gbv"].iterations:
        grid = draft_grid_html(it, decode)
        assert grid.count('class="grid-row"') == 3
        assert grid.count("cell-accepted") == it.num_accepted
        assert grid.count(f"cell-{it.final_kind}") == 1
        assert grid.count("q/p = ") == 12  # every drafted token: K x L
    assert "Plain AR step" in draft_grid_html(records["ar"].iterations[0], decode)


def test_output_html_and_metrics(records):
    run = records["gbv"]
    html = provenance_html(run, decode)
    assert html.count('class="tok ') == 40 and "correction" in html
    assert f"{run.block_efficiency:.2f}" in metrics_line(run)
    phases = run.phase_ms_per_token
    assert f"draft {phases['draft']:.1f}, target {phases['target']:.1f}" in metrics_line(run)
    assert "ms per token" not in metrics_line(records["ar"])
    both = side_by_side_html({"sd": "x", "spectr_gbv_released": "y"}, {"sd": "a", "spectr_gbv_released": "b"})
    assert both.count('class="compare-column"') == 2 and f"color:{LOSSY_RED}" in both  # red: lossy, only


def test_sweep_rows_vary_the_chosen_setting_and_time_ar_once_per_temperature():
    target, draft = toy_pair()
    rows = sweep(target, draft, encode("the"), ["gbv", "spectr_gbv"], "T", [0.0, 1.0], DecodeConfig(max_new_tokens=12))
    assert [(r["method"], r["value"]) for r in rows] == [("gbv", 0.0), ("spectr_gbv", 0.0), ("gbv", 1.0), ("spectr_gbv", 1.0)]
    assert all(r["temperature"] == r["value"] and r["speedup_vs_ar"] > 0 for r in rows)
    with pytest.raises(ValueError, match="axis"):
        sweep(target, draft, encode("the"), ["gbv"], "Z", [1], DecodeConfig())
    with pytest.raises(ValueError, match="num_drafts"):
        sweep(target, draft, encode("the"), ["gbv"], "K", [0], DecodeConfig())


def test_method_ticks_stand_upright_on_short_lines_and_the_fidelity_legend_clears_them():
    from spectr_gbv import METHODS

    labels = [figures.method_label(m) for m in METHODS]
    charts = [efficiency_band_figure({m: point_stats([1.5], [None], [10]) for m in METHODS}, coupled=True),
              figures.calls_per_token_figure([{"method": m, "block_efficiency": 2.0} for m in METHODS]),
              figures.speedup_figure({m: speedup_of([12.0, 12.0], [10.0]) for m in METHODS}, "cpu")]
    for chart in charts:  # "SpecTr-GBV as released (lossy)" tilted was cut off under a half-screen chart
        axis = chart.layout.xaxis
        assert axis.tickangle == 0 and axis.automargin and list(axis.tickvals) == labels
        assert all(len(line) <= len("Traversal") for tick in axis.ticktext for line in tick.split("<br>"))
        assert [t.replace("<br>", " ").replace("- ", "-") for t in axis.ticktext][:-1] == labels[:-1]
        assert "lossy" in axis.ticktext[-1]
    assert not charts[0].layout.showlegend  # one swatch would show one method's colour for every bar
    assert all(len(line) <= 90 for line in charts[0].layout.title.subtitle.text.split("<br>"))


def test_the_fidelity_legend_sits_above_the_plot_out_of_the_tilted_outcomes_way():
    import app

    *_, (_header, chart, data) = fidelity.run_fidelity("toy", "the cat", "sd", 1, 2, 1.0, 20, 3)
    assert data["runs"] == 20 and chart.layout.legend.y >= 1 and chart.layout.legend.yanchor == "bottom"
    assert chart.layout.xaxis.automargin
