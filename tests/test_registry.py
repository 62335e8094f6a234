"""One registry: every METHODS entry, walked through every view, and a method added by one entry alone.

The views never test a method's name; they read its entry (label, colour, symbol, exactness
tier, residual text, view flags). So a twin of GBV registered under a new name, with its own
look, must appear in the page's choices and heading, run in Generate, Compare, Sweep and
Fidelity, show its residual text in the explorer's panel, and draw in its own colour, with no
other code changed.
"""

from __future__ import annotations

import dataclasses

import pytest

import app
from components.tabs import compare, fidelity, generate, sweep
from components.tabs.about import about_markdown
from components.wiring.inputs import DEFAULT_METHOD, compare_choices, default_compare, method_choices
from components.render.palette import line_style, method_colour, method_symbol
from components.render.residuals import final_token_rule
from helpers import last
from spectr_gbv import METHODS
from spectr_gbv.methods import LOSSY_RED

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("name", list(METHODS))
def test_every_entry_sets_how_every_view_shows_it(name):
    spec = METHODS[name]
    assert method_colour(name) == spec.colour and method_symbol(name) == spec.symbol
    assert (spec.colour == LOSSY_RED) == (not spec.exact)  # red means lossy, and nothing else
    assert line_style(name)["line"]["dash"] == ("solid" if spec.exact else "dash")
    assert final_token_rule(name, "correction") == spec.residual
    assert (spec.label, name) in method_choices() and (spec.label, name) in compare_choices()
    assert spec.label in app.heading()
    assert spec.exact_counterpart is None or METHODS[spec.exact_counterpart].exact
    assert spec.compare_by_default == (name in default_compare())


def test_exactly_one_method_is_the_app_default_and_the_page_opens_on_it():
    defaults = [name for name, spec in METHODS.items() if spec.app_default]
    assert len(defaults) == 1 and defaults == [DEFAULT_METHOD]
    assert METHODS[DEFAULT_METHOD].exact and METHODS[DEFAULT_METHOD].compare_by_default


def test_one_exact_method_is_compares_default_baseline():
    from components.tabs.compare_set import check_baseline

    baselines = [name for name, spec in METHODS.items() if spec.compare_baseline]
    assert len(baselines) == 1 and METHODS[baselines[0]].exact
    others = [name for name in METHODS if name not in baselines]
    assert check_baseline(None, others[:2] + baselines) == baselines[0]
    assert check_baseline("", others[:2]) == others[0]  # not ticked: the first ticked


def test_about_names_the_lossy_rule_and_its_exact_counterpart():
    text = about_markdown()
    for spec in METHODS.values():
        if not spec.exact:
            assert spec.label in text and METHODS[spec.exact_counterpart].label in text


@pytest.fixture
def twin(monkeypatch):
    """GBV's rule registered again as a new method with a look of its own: one registry entry, nothing else."""
    spec = dataclasses.replace(METHODS["gbv"], name="gbv_twin", label="GBV twin", colour="#123456", symbol="pentagon",
                               residual="the twin's residual, in its own words", plots_its_residual=False)
    monkeypatch.setitem(METHODS, "gbv_twin", spec)
    return spec


def test_a_method_added_by_one_registry_entry_reaches_every_view(twin):
    assert ("GBV twin", "gbv_twin") in method_choices() and "gbv_twin" in default_compare()
    assert "GBV twin" in app.heading()
    app.build_demo(default_pair="toy", default_prompt="the cat")  # the page builds with it

    # Generate, and the explorer's panel at a correction token: the twin's own residual text
    *_, state, _slider, _grid, _figure, _details = last(generate.generate_stream("toy", "the", "gbv_twin", 1, 3, 1.0,
                                                                                   30, 2))
    assert state.record.config.method == "gbv_twin"
    from components.tabs import explorer

    corrections = [i for i, it in enumerate(state.record.iterations) if it.final_kind == "correction"]
    assert corrections, "no correction token in 30 tokens at T = 1"
    grid_html, figure, _ = explorer.shown(state, corrections[0] + 1)
    assert "the twin&#x27;s residual" in grid_html or "the twin's residual" in grid_html
    assert "its residual is not norm" in figure.layout.title.subtitle.text  # it does not plot its residual

    # Compare: its column and its bar in its own colour; the coupled run includes it
    outputs = last(compare.compare("toy", "the cat", ["sd", "gbv_twin"], 1, 3, 0.8, 12, 0, True))
    assert 'data-method="gbv_twin"' in outputs.texts and "#123456" in outputs.texts
    assert "#123456" in [bar.marker.color for bar in outputs.histogram.data] or any(
        "#123456" in str(trace.marker.color) for trace in outputs.efficiency.data)
    assert [r["method"] for r in outputs.data["coupled_runs"]] == ["sd", "gbv_twin"]

    # Sweep and Fidelity
    swept = last(sweep.run_sweep("toy", "the", ["gbv_twin"], "L", "1, 2", 1, 3, 0.8, 10, 0))
    assert [(r["method"], r["value"]) for r in swept.data["rows"]] == [("gbv_twin", 1), ("gbv_twin", 2)]
    checked = last(fidelity.run_fidelity("two-token", "A", "gbv_twin", 1, 2, 1.0, 20, 2))
    assert checked.data["runs"] == 20


def test_a_pairs_kind_is_its_one_entry_and_the_app_reads_it():
    """The teaching pairs are the ones whose entry says so: their vocabulary is their words', and the
    serving line, GPU request and timing follow the kind, never a pair's name."""
    from components.serving import gpu, visitors
    from components.wiring.admission import cost
    from spectr_gbv.pairs import PAIRS, TEACHING, get_pair, is_teaching

    teaching = [key for key, info in PAIRS.items() if info.kind == TEACHING]
    assert teaching and all(PAIRS[key].vocabulary == len(get_pair(key).words) for key in teaching)
    for key, info in PAIRS.items():
        assert is_teaching(key) == is_teaching(info.label) == info.teaching
        assert cost.is_timed(key) == (not info.teaching)
        assert (visitors.line_for(key) is visitors.LINES["teaching"]) == info.teaching
        assert (gpu.generate_cost(key, "the cat", "gbv", 2, 4, 0.7, 8, 0) is None) == info.teaching
