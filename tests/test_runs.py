"""The pieces behind "nothing lost" and "numbers to quote", in-process: headers, bands, caps, Stop.

The API tests (test_runs_api.py) check the same behaviour end to end; these pin the rules
themselves on small inputs, against scipy and the server's own checks.
"""

from __future__ import annotations

import math

import gradio as gr
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

import app
from spectr_gbv import METHODS
from components.wiring.admission import caps
from components.wiring.runs import Stop, header_html, header_line, ignored_settings, mean_band
from components.tabs import generate
from components.wiring import inputs

pytestmark = pytest.mark.unit


def test_the_header_names_what_made_the_output_and_where_it_stopped():
    line = header_line("toy", ["sd", "spectr_gbv"], 3, 4, 0.7, 5, ["20 tokens"],
                       Stop(15, 256, "tokens", "the budget ran out"))
    assert "**Toy world" in line and "SD, SpecTr-GBV" in line and "T = 0.7" in line and "seed 5" in line
    assert "K = 3 (ignored by SD)" in line and "L = 4 ·" in line and "20 tokens" in line
    assert "stopped at 15 / 256 tokens: the budget ran out" in line
    assert "~~K = 3~~ (ignored)" in header_line("toy", ["ar"], 3, 4, 0.7, 0)  # AR drafts nothing: K and L struck
    assert "K swept" in header_line("toy", ["sd"], 3, 4, 0.7, 0, swept="K")
    html = header_html(header_line("toy", ["<b>"], 3, 4, 0.7, 0))
    assert "&lt;b&gt;" in html and "<b>Toy world" in html  # the input is escaped, the markup kept


def test_ignored_settings_follow_the_methods_own_descriptions():
    ignored = ignored_settings(list(METHODS) + ["ar"])
    assert set(ignored["K"]) == {METHODS[m].label for m in METHODS if not METHODS[m].multi_draft} | {"AR"}
    assert ignored["L"] == ["AR"]


@settings(deadline=None)
@given(st.lists(st.floats(1, 9, allow_nan=False), min_size=2, max_size=30))
def test_the_band_is_the_student_t_interval_of_the_mean(values):
    mean, low, high = mean_band(values)
    assert mean == pytest.approx(sum(values) / len(values))
    if len(set(values)) == 1:  # greedy decoding repeats itself: the band is the point
        assert low == high == mean
    else:
        expected = stats.t.interval(0.95, len(values) - 1, loc=mean, scale=stats.sem(values))
        assert (low, high) == pytest.approx(expected) and low <= mean <= high


def test_one_value_has_no_band_and_none_a_nan_mean():
    assert mean_band([2.5]) == (2.5, None, None)
    mean, low, high = mean_band([])
    assert math.isnan(mean) and low is None and high is None


def test_the_sliders_start_at_their_caps(limits):
    limits(block_tokens=20, fidelity_runs_llm=120)
    demo = app.build_demo()  # the default pair: a real model
    by_id = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    assert by_id["draft-length"].maximum == caps.max_draft_length(2) == 10  # 20 // K = 2
    assert by_id["fidelity-runs"].maximum == 120 and by_id["fidelity-runs"].value == 120  # N = 500 would be refused
    assert "ignored by" not in (by_id["num-drafts"].info or "")  # AS-BV+H (the default method) uses K drafts
    assert caps.ignored_info("sd", "K") and caps.ignored_info("ar", "L") and not caps.ignored_info("spectr", "L")


def test_a_cancelling_stop_fills_the_explorer_with_the_iterations_so_far(monkeypatch):
    monkeypatch.setattr(generate, "UPDATE_EVERY_S", 0.0)  # an update per iteration, as a slow run's
    """On ZeroGPU Stop cancels the run (its worker cannot see the request) and fills the explorer from the state."""
    steps = generate.generate_stream("toy", "the cat", "spectr_gbv", 2, 3, 0.8, 60, 0)
    for _ in range(4):  # four iterations streamed, then the visitor presses Stop
        *_, state, _slider, _grid, _plot, _details = next(steps)
    steps.close()
    line, slider, grid, _plot, details = generate.fill_explorer_on_stop(state)
    tokens = len(state.record.tokens)
    assert f"stopped at {tokens} / 60 tokens: you pressed Stop" in line and "Toy world" in line
    assert slider["maximum"] == 4 and slider["interactive"] and grid.count('class="grid-row"') == 2
    assert details["iteration"] == 1
    assert generate.fill_explorer_on_stop(None)[0] == gr.skip()  # nothing generated yet: nothing to fill


def test_a_model_pair_says_it_is_loading_and_a_teaching_pair_does_not(monkeypatch):
    said = []
    real = inputs.get_pair
    monkeypatch.setattr(inputs, "get_pair", lambda key, **kwargs: real("toy"))  # no model load in this test
    inputs.prepare("default", "the cat", lambda value, desc=None: said.append(desc))
    assert len(said) == 1 and said[0].startswith(inputs.LOADING_NOTE)
    assert "about a minute the first time" in inputs.LOADING_NOTE
    said.clear()
    inputs.prepare("toy", "the cat", lambda value, desc=None: said.append(desc))
    assert said == []


def test_a_slow_model_load_names_its_stages_and_never_shows_a_frozen_percentage(monkeypatch):
    """A cold start: the line changes while the load runs, names the loader's stage, and carries no
    fraction (Gradio shows a number as "0.0%" for as long as the load takes)."""
    import time

    from components.wiring import loading
    from spectr_gbv.models.load_stage import current, stage

    real = inputs.get_pair

    def slow_load(key, **kwargs):
        with stage("dequantising the model file"):
            time.sleep(0.5)
        with stage("choosing this CPU's fastest kernel"):
            time.sleep(0.5)
        return real("toy")

    monkeypatch.setattr(inputs, "get_pair", slow_load)
    monkeypatch.setattr(loading, "POLL_S", 0.05)
    calls = []
    pair, ids = inputs.prepare("default", "the cat", lambda value, desc=None: calls.append((value, desc)))
    assert pair.info.key == "toy" and ids == real("toy").encode("the cat")
    assert calls and all(value is None for value, _ in calls)  # a line, no percentage
    lines = [desc for _, desc in calls]
    assert all(line.startswith(inputs.LOADING_NOTE) for line in lines)
    assert any("dequantising the model file" in line for line in lines)
    assert any("choosing this CPU's fastest kernel" in line for line in lines)
    assert any(" 1 s so far" in line for line in lines)  # the seconds move on
    assert current() == ""  # the stages end with the load


def test_a_failed_model_load_reaches_the_visitor_as_its_own_error(monkeypatch):
    def broken(key, **kwargs):
        raise ValueError("could not load model 'x': no such local folder on this server")

    monkeypatch.setattr(inputs, "get_pair", broken)
    with pytest.raises(ValueError, match="no such local folder"):
        inputs.prepare("default", "the cat", lambda value, desc=None: None)


def test_sweep_charts_fit_the_points_and_draw_the_band_and_the_theory_per_method():
    from components.render.band_figures import sweep_band_figures
    from components.render.chart_layout import legend_name
    from components.render.palette import method_colour
    from components.wiring.runs import sweep_point
    from spectr_gbv.config import DecodeConfig
    from spectr_gbv.pairs import get_pair
    from spectr_gbv.sweep import sweep

    pair = get_pair("toy")
    rows = sweep(pair.target, pair.draft, pair.encode("the cat"), ["spectr_gbv", "spectr_gbv_released"], "K", [1, 3],
                 DecodeConfig(max_new_tokens=15, temperature=1.0), repeats=3)
    efficiency, speed = sweep_band_figures([sweep_point(r) for r in rows], timed=False)
    traces = {t.name: t for t in efficiency.data}
    means = [r["mean_block_efficiency"] for r in map(sweep_point, rows)]
    low, high = efficiency.layout.yaxis.range  # fitted to the points, not to AR's 1 or the bands
    assert low < min(means) and high > max(means) and "3 seeds" in efficiency.layout.title.subtitle.text
    for method, label in (("spectr_gbv", "SpecTr-GBV"), ("spectr_gbv_released", "SpecTr-GBV as released (lossy)")):
        measured, band = traces[legend_name(method)], traces[f"{label} 95 % band"]  # the legend's name may wrap
        assert measured.line.color == band.fillcolor == method_colour(method)
        assert len(band.x) == 4  # the band's outline: up the highs, back down the lows
        if METHODS[method].expected_accepted is None:  # a rule without a theory of E[tau | drafts] gets no line
            assert f"{label} theory" not in traces
            continue
        theory = traces[f"{label} theory"]
        mine = [r for r in rows if r["method"] == method]
        assert theory.line.dash == "dot" and theory.line.color == method_colour(method)
        assert list(theory.y) == pytest.approx([sweep_point(r)["theory_acceptance_length"] for r in mine])
    assert traces[legend_name("spectr_gbv_released")].line.dash == "dash" and traces["SpecTr-GBV"].line.dash == "solid"
    assert not speed.data  # the Toy world's timings mean nothing: no speed lines
    one = sweep_band_figures([sweep_point(r) | {"band_low": None, "band_high": None} for r in rows], timed=False)[0]
    assert not any("band" in (t.name or "") for t in one.data)  # one seed: no band drawn


def test_stop_ends_the_run_at_its_next_iteration_with_the_explorer_filled(monkeypatch):
    monkeypatch.setattr(generate, "UPDATE_EVERY_S", 0.0)  # an update per iteration, as a slow run's
    class Visitor:  # what Gradio hands the handler as its gr.Request
        session_hash = "stop-test-session"

    generate.ask_to_stop(Visitor())  # pressed before the run: it does not end the next run
    steps = generate.generate_stream("toy", "the cat", "spectr_gbv", 2, 3, 0.8, 60, 0, request=Visitor())
    for _ in range(3):
        html, *_ = next(steps)
    generate.ask_to_stop(Visitor())
    html, line, data, state, slider, grid, _plot, details = next(steps)  # no further iteration: the last output
    assert data["stopped"] == f"stopped at {data['new_tokens']} / 60 tokens: you pressed Stop"
    assert data["target_calls"] == 3 and html.count('class="tok ') == data["new_tokens"] < 60
    assert "you pressed Stop" in line and slider["maximum"] == 3 and grid.count('class="grid-row"') == 2
    assert details["iteration"] == 1 and len(state.record.iterations) == 3
    with pytest.raises(StopIteration):
        next(steps)


def test_the_line_under_the_pair_box_names_the_whole_pair_and_takes_any_value():
    import html

    from components.tabs.sidebar import pair_name_html
    from spectr_gbv.pairs import PAIRS

    for key, info in PAIRS.items():
        assert pair_name_html(key) == f'<div class="pair-name">{html.escape(info.label)}</div>'
        assert pair_name_html(info.label) == pair_name_html(key)  # a label as the box may send it
    assert pair_name_html("<b>org/a, org/b</b>") == '<div class="pair-name">&lt;b&gt;org/a, org/b&lt;/b&gt;</div>'
    for junk in (None, 3, ["x"], {"a": 1}, "y" * 10_000):
        assert pair_name_html(junk).startswith('<div class="pair-name">') and len(pair_name_html(junk)) < 300
