"""Every view's defaults finish on the first click, sized from a cost estimate (issue 24).

Methodology: the estimate (components.wiring.admission.cost) is unit-tested on cases with a closed form
(the two-token example's iterations, AR's one a token) and on the default pair, whose costs
were measured on a 2-core CPU beside another process (docs/views.md): its defaults must be
estimated inside cost.DEFAULT_FRACTION of the time budget, and Sweep's inside its own limit on
runs. Then each view runs end to end at the defaults the page opens with, on the teaching pairs
(lookup tables: the whole file takes seconds), and must finish without a budget stop. Compare's
order (the default method, then the coupled run) and its interleaved AR timing are checked on
the toy pair made to count as timed.
"""

from __future__ import annotations

import dataclasses

import pytest

import app  # noqa: F401  (first: it sets Gradio's environment before gradio is imported)
from components.serving import visitors
from components.serving import limits
from components.wiring.admission import caps, cost
from components.tabs import compare, fidelity, generate, sweep
from components.wiring.inputs import DEFAULT_METHOD, DEFAULT_SETTINGS, default_compare, prepare
from components.wiring.runs import NOISY_AR_SPREAD, speedup_of
from helpers import last, page_defaults
from spectr_gbv.pairs import DEFAULT_KEY, HUB

pytestmark = pytest.mark.unit


# ------------------------------------------------------------------ the estimate


def test_iterations_are_expected_not_fewest():
    """Two-token example, 3 tokens, L = 4, alpha = 2/3: E[n] = 1 + (1/3)(4/3) + (2/9)(1) = 5/3 (fewest: 1)."""
    mean, var = cost.iteration_law(3, 2 / 3, 4)
    assert mean == pytest.approx(5 / 3) and var > 0
    assert cost.iteration_law(40, 0.5, 0) == (40.0, 0.0)  # AR: one iteration a token
    assert cost.iteration_law(1, 0.3, 4) == pytest.approx((1.0, 0.0), abs=1e-12)  # one token: one iteration, always
    assert cost.iteration_law(10, 1.0, 4)[0] == pytest.approx(2.0)  # every draft accepted: 5 tokens an iteration


def test_fidelity_cap_fits_the_iteration_budget_in_expectation():
    """The bug: N = 1,999 was allowed on the two-token example and stopped at 1,200 (1.67 iterations a run)."""
    most = caps.max_fidelity_runs("two-token", DEFAULT_METHOD, 4, 3)
    assert most * 5 / 3 + cost.scoring_bound("two-token", most, 3) <= limits.LIMITS.iterations
    assert most < 1999 and caps.max_fidelity_runs("two-token", DEFAULT_METHOD, 4, 1) == 1999  # 1 token: 1 iteration


def test_the_default_pair_defaults_fit_half_the_budget():
    k, length, tokens = DEFAULT_SETTINGS
    methods = len(default_compare())
    repeats = compare.default_repeats(DEFAULT_KEY)
    assert repeats >= 2  # a median of speedups, not one run
    assert cost.compare_seconds(DEFAULT_KEY, methods, k, length, tokens, repeats, True) <= (
        cost.DEFAULT_FRACTION * limits.LIMITS.seconds)
    values = [float(v) for v in sweep.default_values(DEFAULT_KEY, "K", methods).split(",")]
    assert methods * len(values) <= limits.LIMITS.sweep_runs  # "7 methods x 4 values = 28 runs is over ... 24"
    assert len(values) <= caps.max_sweep_values(methods)
    # Sweep opens at two seeds per point (a band, and a speed chart) on at least two values, within the budget's cap
    sweep_repeats = sweep.default_repeats(DEFAULT_KEY, "K", methods)
    assert sweep_repeats >= 2 and len(values) >= 2
    assert cost.sweep_seconds(DEFAULT_KEY, methods, "K", values, k, length, tokens, sweep_repeats) <= (
        cost.CAP_FRACTION * limits.LIMITS.seconds)
    runs = fidelity.default_runs(DEFAULT_KEY)
    assert cost.fidelity_seconds(DEFAULT_KEY, DEFAULT_METHOD, k, length, runs, 3) <= (
        cost.DEFAULT_FRACTION * limits.LIMITS.seconds)
    assert runs <= caps.max_fidelity_runs(DEFAULT_KEY, DEFAULT_METHOD, length, 3)


def test_a_slower_pair_gets_smaller_defaults():
    hub = "smollm2-360m"
    assert compare.default_repeats(hub) <= compare.default_repeats(DEFAULT_KEY)
    assert fidelity.default_runs(hub) < fidelity.default_runs(DEFAULT_KEY)
    assert caps.max_fidelity_runs(hub, DEFAULT_METHOD, 4, 3) < caps.max_fidelity_runs(DEFAULT_KEY, DEFAULT_METHOD, 4, 3)


def test_fidelity_refuses_up_front_what_its_cap_refuses():
    most = caps.max_fidelity_runs("two-token", DEFAULT_METHOD, 4, 3)
    with pytest.raises(ValueError, match="so it was not started"):
        last(fidelity.run_fidelity("two-token", "A", DEFAULT_METHOD, 2, 4, 1.0, most + 1, 3))


# ------------------------------------------------------------------ each view at its defaults, end to end


@pytest.mark.parametrize("pair, prompt", [("toy", "the cat"), ("two-token", "A")])
def test_every_view_finishes_at_its_defaults(pair, prompt):
    d = page_defaults(pair, prompt)
    settings = (d["K"], d["L"], d["T"], d["tokens"], d["seed"])
    *_, state, _slider, _grid, _figure, _details = last(generate.generate_stream(pair, prompt, d["method"], *settings))
    assert state.record.summary()["new_tokens"] == d["tokens"]
    compared = last(compare.compare(pair, prompt, d["methods"], *settings, True, d["repeats"]))
    assert compared.data["stopped"] is None and compared.data["finished_methods"] == compare.run_order(d["methods"])
    swept = last(sweep.run_sweep(pair, prompt, d["methods"], "K", d["values"], *settings, 1))
    assert swept.data["stopped"] is None and len(swept.data["rows"]) == len(d["methods"]) * len(d["values"].split(","))
    checked = last(fidelity.run_fidelity(pair, prompt, d["method"], d["K"], d["L"], d["T"], d["runs"],
                                         d["fidelity_tokens"]))
    assert checked.data["stopped"] is None and checked.data["runs"] == d["runs"]


# ------------------------------------------------------------------ Compare's order and timing


@pytest.fixture
def timed_toy(monkeypatch):
    """The toy pair as if it were a model pair: Compare and Sweep time it (AR after every method)."""
    def timed_prepare(pair_key, prompt, progress=None):
        pair, ids = prepare(pair_key, prompt, progress)
        return dataclasses.replace(pair, info=dataclasses.replace(pair.info, kind=HUB), words=None), ids

    monkeypatch.setattr(compare, "prepare", timed_prepare)
    monkeypatch.setattr(sweep, "prepare", timed_prepare)


def test_compare_runs_the_default_method_and_the_coupled_run_first(timed_toy):
    methods = ["sd", "gbv", DEFAULT_METHOD]
    steps = list(compare.compare("toy", "the cat", methods, 2, 3, 0.8, 8, 0, True, 2))
    first = steps[0]
    assert first.data["finished_methods"] == [DEFAULT_METHOD]  # the default method ran first
    assert first.data["coupled_runs"] is None
    after_coupled = steps[1]  # then the coupled runs: every method on the charts, one text so far
    assert [r["method"] for r in after_coupled.data["coupled_runs"]] == [DEFAULT_METHOD, "sd", "gbv"]
    final = steps[-1].data
    assert len(final["ar_tokens_per_second"]) == len(methods) + 1  # AR before, between and after the methods
    assert all(s["runs"] == 2 and s["low"] <= s["median"] <= s["high"] for s in final["speedup_vs_ar"].values())


def test_one_timed_run_stays_out_of_the_speedup_chart(timed_toy):
    outputs = last(compare.compare("toy", "the cat", ["sd"], 2, 3, 0.8, 8, 0, False, 1))
    assert not outputs.speedup.data and "one timed run" in outputs.speedup.layout.title.text.lower()
    assert outputs.data["speedup_vs_ar"]["sd"]["runs"] == 1  # the single run is in the data


def test_sweep_times_each_method_against_the_ar_runs_around_it_as_compare_does(timed_toy):
    outputs = last(sweep.run_sweep("toy", "the cat", ["sd", "gbv"], "K", "1, 2", 2, 3, 0.8, 8, 0, 2))
    rows = outputs.data["rows"]
    assert all(len(r["ar_tokens_per_second"]) == 2 for r in rows)  # AR just before and just after its runs
    for before, after in zip(rows, rows[1:]):  # the AR run after a method is the one before the next (K: one T)
        assert before["ar_tokens_per_second"][1] == after["ar_tokens_per_second"][0]
    for row in rows:  # Compare's statistic: median over the repeats, range, noisy flag
        expected = speedup_of(row["repeat_tokens_per_second"], row["ar_tokens_per_second"]).summary()
        assert row["speedup_vs_ar"] == pytest.approx(expected) and row["speedup_vs_ar"]["runs"] == 2
    lines = {t.name: t for t in outputs.speed.data}
    # swept over K: the single-draft rules are named as ignoring it
    assert set(lines) == {"SD (ignores K)", "GBV (ignores K)"} and all(len(t.error_y.array) == 2 for t in lines.values())
    assert list(lines["SD (ignores K)"].y) == pytest.approx([r["speedup_vs_ar"]["median"] for r in rows if r["method"] == "sd"])


def test_a_sweep_timed_once_per_point_keeps_its_speedups_out_of_the_chart(timed_toy):
    outputs = last(sweep.run_sweep("toy", "the cat", ["sd"], "K", "1, 2", 2, 3, 0.8, 8, 0, 1))
    assert not outputs.speed.data and "one timed run per point" in outputs.speed.layout.title.text.lower()
    rows = outputs.data["rows"]
    assert all(r["speedup_vs_ar"]["runs"] == 1 for r in rows)  # the single runs are in the data
    assert rows[0]["ar_tokens_per_second"] == rows[1]["ar_tokens_per_second"]  # one AR run: nothing is charted


@pytest.mark.parametrize("axis, values", [("K", [1, 2, 4]), ("T", [0.5, 0.5, 1.0])])
def test_the_estimate_counts_the_ar_runs_the_sweep_makes(monkeypatch, axis, values):
    from spectr_gbv import sweep as library_sweep
    from spectr_gbv.config import DecodeConfig
    from spectr_gbv.pairs import get_pair

    ar_runs = []
    real = library_sweep.generate_config

    def counted(target, draft, prompt_ids, config, on_iteration=None):
        ar_runs.extend([config.temperature] if config.method == "ar" else [])
        return real(target, draft, prompt_ids, config, on_iteration)

    monkeypatch.setattr(library_sweep, "generate_config", counted)
    pair = get_pair("toy")
    base = DecodeConfig(max_new_tokens=6)
    for interleaved in (False, True):
        ar_runs.clear()
        library_sweep.sweep(pair.target, pair.draft, pair.encode("the cat"), ["sd", "gbv"], axis, values, base,
                            repeats=2, interleave_ar=interleaved)
        assert len(ar_runs) == cost.sweep_ar_runs(axis, values, 2, interleaved)
    # Sweep's defaults are sized with one repeat: no interleaving, the same estimate as before, inside the budget.
    assert not cost.sweep_interleaves_ar(DEFAULT_KEY, 1) and cost.sweep_interleaves_ar(DEFAULT_KEY, 2)
    assert not cost.sweep_interleaves_ar("toy", 3)  # a teaching pair's timings mean nothing


def test_a_speedup_is_the_median_and_is_noisy_when_ar_moved():
    steady = speedup_of([10.0, 20.0, 30.0], [10.0, 10.0])
    assert (steady.median, steady.low, steady.high, steady.runs) == (2.0, 1.0, 3.0, 3) and not steady.noisy
    moved = speedup_of([10.0, 12.0], [10.0, 10.0 * (1 + 2 * NOISY_AR_SPREAD)])
    assert moved.noisy and moved.ar_spread > NOISY_AR_SPREAD
    assert speedup_of([10.0], [10.0]).ar_spread is None  # AR after the method not run yet: no verdict


def test_threads_per_run_share_the_cores_between_the_model_slots():
    assert visitors.threads_per_run(2, 2) == 1 and visitors.threads_per_run(16, 2) == 8 and visitors.threads_per_run(1, 4) == 1
