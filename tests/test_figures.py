"""Pure view functions on example run records: figures, the draft grid, the output HTML, sweeps."""

from __future__ import annotations

import re

import pytest

from components.render import figures
from components.render.chart_layout import SUBTITLE_CHARS
from components.render.speedup_figure import speedup_figure
from components.render.band_figures import efficiency_band_figure, sweep_band_figures
from components.wiring.runs import point_from_summaries, point_stats, speedup_of
from components.render.palette import LOSSY_RED
from components.render.grid import draft_grid_html
from components.render.text import metrics_line, provenance_html, side_by_side_html
from components.tabs import fidelity
from spectr_gbv import generate
from spectr_gbv.config import DecodeConfig
from spectr_gbv.sweep import sweep
from spectr_gbv.toy import decode, encode, toy_pair

pytestmark = pytest.mark.unit


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


def test_the_speedup_chart_says_tie_where_the_top_ranges_overlap():
    """A leader that the next identical click may change is no leader: the chart names the tie."""
    overlapping = {"sd": speedup_of([1.5, 1.9, 2.1], [1.0]), "gbv": speedup_of([1.8, 2.0, 2.4], [1.0]),
                   "spectr_gbv": speedup_of([1.0, 1.1, 1.2], [1.0])}
    subtitle = speedup_figure(overlapping, "cpu").layout.title.subtitle.text
    assert "tie within noise: GBV, SD (ranges overlap)" in subtitle and "SpecTr-GBV," not in subtitle
    everyone = {"sd": speedup_of([1.5, 2.1], [1.0]), "gbv": speedup_of([1.8, 2.4], [1.0])}
    assert "tie within noise: every method" in speedup_figure(everyone, "cpu").layout.title.subtitle.text
    assert len(speedup_figure(everyone, "cpu").layout.title.subtitle.text.split("<br>")) == 2  # no noisy bar
    many = {m: speedup_of([1.5, 2.1], [1.0]) for m in ("sd", "gbv", "spectr", "spectr_gbv")}
    many["as_bv"] = speedup_of([3.0, 3.2], [1.0])  # the top bar, clear of the rest
    many["as_bv_handoff"] = speedup_of([2.9, 3.3], [1.0])
    assert "tie within noise: AS-BV, AS-BV+H (ranges overlap)" in speedup_figure(many, "cpu").layout.title.subtitle.text
    many["as_bv_handoff"] = speedup_of([1.9, 3.3], [1.0])  # now it reaches the others: 6 of 6 tie
    many["as_bv"] = speedup_of([2.0, 3.2], [1.0])
    many["sd"] = speedup_of([1.0, 1.1], [1.0])  # and SD stays out: 5 of 6 tie, counted
    assert "tie within noise: 5 of 6 methods (ranges overlap)" in speedup_figure(many, "cpu").layout.title.subtitle.text


def test_wall_clock_figures_say_they_depend_on_the_hardware(records):
    fig = speedup_figure({"sd": speedup_of([8.0, 7.0, 9.0], [10.0, 10.0]),
                                  "spectr_gbv": speedup_of([12.0, 11.0, 14.0], [10.0, 13.0])}, "cpu")
    assert "hardware" in fig.layout.title.subtitle.text and list(fig.data[0].y) == pytest.approx([0.8, 12 / 11.3],
                                                                                               rel=1e-3)
    assert list(fig.data[0].error_y.array) == pytest.approx([0.1, 14 / 11.3 - 12 / 11.3], rel=1e-3)  # the range
    assert list(fig.data[0].x) == ["SD", "SpecTr-GBV (noisy)"]  # AR moved by 26 %: flagged on its tick
    single = speedup_figure({"sd": 0.8, "spectr_gbv": 1.2}, "cpu")  # one run each: no bars, the reason
    assert not single.data and "Repeats" in single.layout.annotations[0].text
    phases = {"ar": {"draft": 0.0, "target": 80.0, "verify": 0.0}, "sd": {"draft": 5.0, "target": 40.0, "verify": 2.0},
              "spectr_gbv": {"draft": 6.0, "target": 30.0, "verify": 4.0}}
    split = speedup_figure({"sd": speedup_of([17.0, 17.0], [10.0]), "spectr_gbv": speedup_of([20.0, 20.0], [10.0])},
                                   "cpu", phases)
    assert "hardware" in split.layout.title.subtitle.text and "median of 2+ runs" in split.layout.title.subtitle.text
    bars = {t.name: list(t.y) for t in split.data[1:]}
    assert bars["target"] == [80.0, 40.0, 30.0] and bars["draft"] == [0.0, 5.0, 6.0]
    # SD 1.7x and SpecTr-GBV 2.0x, each over one value: the ranges do not overlap, SpecTr-GBV leads
    assert "SpecTr-GBV leads: its range overlaps no other" in split.layout.title.subtitle.text
    hidden = speedup_figure({"sd": 9.0}, "cpu", phases, timed=False)
    assert not hidden.data and "lookup tables" in hidden.layout.annotations[0].text
    rows = [{"axis": "K", "value": k, "method": "spectr_gbv", "speedup_vs_ar": speedup_of([5.0, 6.0], [10.0, 11.0]).summary()}
            | point_stats([1 + k / 4], [None], [10]) for k in (1, 2)]
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
    assert all(r["temperature"] == r["value"] and r["repeat_tokens_per_second"][0] > 0 for r in rows)
    # Without interleaving, the one AR run of each temperature: the same rate for every method there.
    assert rows[0]["ar_tokens_per_second"] == rows[1]["ar_tokens_per_second"] != rows[2]["ar_tokens_per_second"]
    with pytest.raises(ValueError, match="axis"):
        sweep(target, draft, encode("the"), ["gbv"], "Z", [1], DecodeConfig())
    with pytest.raises(ValueError, match="num_drafts"):
        sweep(target, draft, encode("the"), ["gbv"], "K", [0], DecodeConfig())


def test_method_ticks_stand_upright_on_short_lines_and_the_fidelity_legend_clears_them():
    from spectr_gbv import METHODS

    labels = [figures.method_label(m) for m in METHODS]
    charts = [efficiency_band_figure({m: point_stats([1.5], [None], [10]) for m in METHODS}, coupled=True),
              figures.calls_per_token_figure([{"method": m, "block_efficiency": 2.0} for m in METHODS]),
              speedup_figure({m: speedup_of([12.0, 12.0], [10.0]) for m in METHODS}, "cpu")]
    for chart in charts:  # "SpecTr-GBV as released (lossy)" tilted was cut off under a half-screen chart
        axis = chart.layout.xaxis
        assert axis.tickangle == 0 and axis.automargin and list(axis.tickvals) == labels
        names = [re.sub(r"<br><i>.*</i>$", "", tick) for tick in axis.ticktext]  # the note under a name: its own line
        assert all(len(line) <= len("Traversal") for tick in names for line in tick.split("<br>"))
        assert [t.replace("<br>(", " (").replace("<br>", " ").replace("- ", "-") for t in names][:-1] == labels[:-1]
        assert "lossy" in names[-1]
    assert all(tick.endswith("<br><i>10 it.</i>") for tick in charts[0].layout.xaxis.ticktext)  # iterations: on the ticks
    assert charts[0].data[0].showlegend is False  # one swatch would show one method's colour for every bar
    assert all(len(line) <= SUBTITLE_CHARS for line in charts[0].layout.title.subtitle.text.split("<br>"))


def test_the_fidelity_legend_sits_above_the_plot_out_of_the_tilted_outcomes_way():
    import app

    *_, (_header, chart, data) = fidelity.run_fidelity("toy", "the cat", "sd", 1, 2, 1.0, 20, 3)
    assert data["runs"] == 20 and chart.layout.legend.y >= 1 and chart.layout.legend.yanchor == "bottom"
    assert chart.layout.xaxis.automargin


# ------------------------------------------------------------------ readable charts (issue 24)


def all_charts(records) -> dict:
    """One of every chart the app draws, from the toy runs: every method, the lossy one too."""
    from spectr_gbv import METHODS

    s = summaries(records)
    run = records["spectr_gbv"]
    it = next(i for i in records["sd"].iterations if i.final_kind == "correction")
    timed = {m: speedup_of([12.0, 11.0, 13.0], [10.0, 10.5]) for m in METHODS}
    phases = {"ar": {"draft": 0.0, "target": 80.0, "verify": 0.0}} | {m: {"draft": 5.0, "target": 40.0, "verify": 2.0}
                                                                     for m in METHODS}
    rows = [{"axis": "L", "value": v, "method": m, "speedup_vs_ar": speedup_of([9.0, 11.0], [10.0, 10.0]).summary()}
            | point_stats([1 + v / 4, 1.5 + v / 4], [0.5, 0.6], [10, 10]) for v in (1, 2, 4) for m in ("sd", "spectr_gbv")]
    sweep_efficiency, sweep_speed = sweep_band_figures(rows)
    return {
        "efficiency": efficiency_band_figure({x["method"]: point_from_summaries([x]) for x in s}, coupled=True, ceiling=1.5),
        "histogram": figures.histogram_figure(s), "per_position": figures.per_position_figure(s),
        "calls": figures.calls_per_token_figure(s), "speedup": speedup_figure(timed, "cpu", phases),
        "theory": figures.theory_figure({"spectr_gbv": ([i.num_accepted for i in run.iterations],
                                                        [i.expected_accepted for i in run.iterations])}),
        "distribution": figures.distribution_figure(it.final_top, decode([t.token for t in it.final_top]),
                                                    it.final_kind, it.final_token, "as_bv"),
        "sweep_efficiency": sweep_efficiency, "sweep_speed": sweep_speed,
    }


def test_legends_sit_at_the_bottom_of_the_figure_under_the_x_axis_title(records):
    """In container coordinates at the bottom edge, Plotly reserves the legend's height under the axes'
    own margin (ticks and title): the legend cannot reach up into the x-axis title, as it did when it
    hung under the plot in paper coordinates and the plot shrank."""
    legends = []
    for name, chart in all_charts(records).items():
        if not any(trace.showlegend is not False for trace in chart.data) or chart.layout.showlegend is False:
            continue
        legends.append(name)
        legend = chart.layout.legend
        assert (legend.orientation, legend.yref, legend.yanchor) == ("h", "container", "bottom"), name
        assert 0 <= legend.y <= 0.05 and legend.xref == "container", name
    assert set(legends) >= {"efficiency", "histogram", "per_position", "speedup", "theory", "distribution",
                            "sweep_efficiency", "sweep_speed"}
    assert figures.histogram_figure(summaries(records)).layout.xaxis.title.text  # there is a title to clear
    lossy = [t.name for t in figures.histogram_figure(summaries(records) + [{"method": "spectr_gbv_released"}]).data]
    assert lossy[-1] == "SpecTr-GBV as released<br>(lossy)"  # two entries side by side in a half-screen chart


def test_position_axes_have_whole_number_ticks(records):
    charts = all_charts(records)
    for name, first in (("histogram", 0), ("per_position", 1)):
        axis = charts[name].layout.xaxis
        assert (axis.tickmode, axis.tick0, axis.dtick) == ("linear", first, 1), name  # no 1.5 between positions
    theory = charts["theory"].layout.xaxis  # iterations: a whole step, on its own multiples
    assert theory.tickmode == "linear" and float(theory.dtick).is_integer() and theory.dtick >= 1
    from components.render.chart_layout import whole_step

    assert [whole_step(1, n) for n in (1, 4, 10, 11, 40, 64, 400)] == [1, 1, 1, 2, 5, 10, 50]
    assert whole_step(0, 1) == 1  # tau 0..1: ticks 0 and 1, not 0, 0.5, 1
    for name in ("sweep_efficiency", "sweep_speed"):  # the swept values themselves, no 1.5 drafts
        assert list(charts[name].layout.xaxis.tickvals) == [1, 2, 4], name


def test_nothing_is_written_over_the_bars_and_the_ceiling_is_named_in_the_legend(records):
    charts = all_charts(records)
    efficiency = charts["efficiency"]
    assert not efficiency.layout.annotations and not any(trace.text for trace in efficiency.data)
    (ceiling,) = efficiency.layout.shapes
    assert ceiling.line.dash == "dash" and ceiling.showlegend and "best any exact rule, on average (LP): 2.50" == ceiling.name
    bars = efficiency.data[0]
    assert all(tick.endswith(" it.</i>") for tick in efficiency.layout.xaxis.ticktext)  # the iterations, under the bars
    assert efficiency.layout.yaxis.range[1] > max(1.5 + 1, *bars.y)  # the line and every bar inside the axis
    # The speedup panels' titles sit above their panel, never over its bars.
    speedup = charts["speedup"]
    domains = [speedup.layout.yaxis.domain, speedup.layout.yaxis2.domain]
    for note, (low, high) in zip(speedup.layout.annotations, sorted(domains, key=lambda d: -d[1])):
        assert note.yref == "paper" and note.y >= high and note.yanchor == "bottom"
    assert not any(trace.text for trace in speedup.data)
    # "drawn": the arrow's tip on its token's tallest bar, the word above it, the axis tall enough for both.
    distribution = charts["distribution"]
    (drawn,) = distribution.layout.annotations
    at = list(distribution.data[0].x).index(drawn.x)
    assert drawn.y == pytest.approx(max(trace.y[at] for trace in distribution.data))
    assert (drawn.ay or -30) < 0 and distribution.layout.yaxis.range[1] >= 1.3 * max(max(t.y) for t in distribution.data)


def test_subtitles_are_short_lines_inside_a_top_margin_made_for_them(records):
    """Two charts side by side beside the open sidebar are about 480 px wide (down to 360): a subtitle
    line longer than SUBTITLE_CHARS was cut off at the chart's right edge."""
    from components.render.chart_layout import top_margin

    for name, chart in all_charts(records).items():
        subtitle = chart.layout.title.subtitle.text
        if not subtitle:
            continue
        assert all(len(line) <= SUBTITLE_CHARS for line in subtitle.split("<br>")), (name, subtitle)
        assert chart.layout.margin.t >= top_margin(subtitle), name
        assert chart.layout.title.yanchor == "top" and chart.layout.title.yref == "container", name
    speedup = all_charts(records)["speedup"]
    assert "hardware: cpu" in speedup.layout.title.subtitle.text and speedup.layout.xaxis2.automargin


# ------------------------------------------------------------------ the explorer's distribution chart


def wide_vocabulary_run():
    """SD on 20 tokens: the target spreads over 0..11, the draft puts 0.92 on token 15, which the
    target barely wants; its residual then has no mass on 15, the token it replaces."""
    from spectr_gbv.models import FunctionModel
    from spectr_gbv.toy import constant

    q = [0.99 / 12] * 12 + [0.01 / 8] * 8
    p = [0.08 / 19] * 20
    p[15] = 0.92
    target, draft = FunctionModel(constant(q), 20), FunctionModel(constant(p), 20)
    return generate(target, draft, [0], method="spectr_gbv", num_drafts=2, draft_length=3, temperature=1.0,
                    max_new_tokens=30, seed=0)


def test_the_distribution_chart_shows_every_drafts_token_at_the_stop_position():
    run = wide_vocabulary_run()
    corrections = [it for it in run.iterations if it.final_kind == "correction"]
    assert corrections
    for it in corrections:
        stop = it.num_accepted
        shown = [t.token for t in it.final_top]
        assert {row[stop] for row in it.draft_tokens} <= set(shown) and it.final_token in shown
        fig = figures.distribution_figure(it.final_top, [f"t{t}" for t in shown], it.final_kind, it.final_token, "spectr_gbv")
        assert {f"t{row[stop]}" for row in it.draft_tokens} <= set(fig.layout.xaxis.ticktext)
        replaced = next(t for t in it.final_top if t.token == it.draft_tokens[it.winning_draft or 0][stop])
        assert replaced.final_prob == pytest.approx(0.0, abs=1e-12) and replaced.draft_prob > 0  # no residual mass


def test_the_drawn_marker_stands_on_its_bar_by_position_even_for_a_numeral_token():
    from spectr_gbv.records import TopToken

    top = [TopToken(7, 0.5, 0.4, 0.1), TopToken(8, 0.3, 0.3, 0.3), TopToken(9, 0.2, 0.3, 0.6)]
    fig = figures.distribution_figure(top, ["the", "2", "0"], "correction", 8, "sd")
    (drawn,) = fig.layout.annotations
    assert list(fig.data[0].x) == [0, 1, 2] and drawn.x == 1  # a position, not the text "2" (category 2)
    assert list(fig.layout.xaxis.tickvals) == [0, 1, 2] and list(fig.layout.xaxis.ticktext) == ["the", "2", "0"]
    assert drawn.y == pytest.approx(0.3)


def test_a_token_drawn_from_q_itself_plots_q_once_on_an_axis_whose_ticks_stop_at_one(records):
    it = next(i for r in records.values() for i in r.iterations if i.final_kind == "bonus")  # q at L+1
    fig = figures.distribution_figure(it.final_top, decode([t.token for t in it.final_top]), it.final_kind, it.final_token)
    names = [t.name for t in fig.data]
    assert names[0] == "target q = q at L+1 (drawn from)" and "q at L+1 (drawn from)" not in names  # no twin series
    from spectr_gbv.records import TopToken

    sure = figures.distribution_figure([TopToken(7, 0.95, 0.95, 0.9), TopToken(8, 0.05, 0.05, 0.1)], ["a", "b"],
                                       "bonus", 7)
    assert sure.layout.yaxis.range[1] > 0.95 and max(sure.layout.yaxis.tickvals) == 1  # room for the arrow, no 1.2


def test_the_distribution_chart_has_short_upright_labels_and_the_whole_token_in_the_hover():
    from spectr_gbv.records import TopToken

    texts = [f" a_rather_long_token_{i}" for i in range(10)] + [" if"]
    top = [TopToken(i, 0.1, 0.1, 0.05) for i in range(11)]
    fig = figures.distribution_figure(top, texts, "correction", 3, "as_bv")
    axis = fig.layout.xaxis
    assert axis.tickangle == 0 and all(len(label) <= 10 for label in axis.ticktext)
    assert axis.ticktext[0].endswith("…") and axis.ticktext[-1] == "␣if"
    assert list(fig.data[0].customdata) == ["␣a_rather_long_token_0", *[f"␣a_rather_long_token_{i}" for i in range(1, 10)],
                                            "␣if"]
    assert fig.layout.title.subtitle.text.count("<br>") <= 1  # at most two subtitle lines over the plot
