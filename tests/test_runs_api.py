"""Nothing lost, numbers to quote (issue 16), through the public API (gradio_client, app on loopback).

* A budget that runs out mid-request (the server's limits swapped by the `limits` fixture:
  the server runs in this process) returns what finished, under a header that says where it
  stopped and why, instead of an error.
* Repeats over seeds give a mean and a 95 % band that narrows with more repeats.
* The UI's caps (components.caps, read from the built app) are what the server accepts: the
  maximum is accepted, one more is refused before any work.
"""

from __future__ import annotations

import dataclasses
import json
import re

import pytest
from gradio_client import Client
from scipy import stats

import app
from spectr_gbv import METHODS
from app_server import running_app
from components.wiring.admission import caps, cost
from components.wiring import inputs, settings
from components.serving import limits as limits_module
from components.serving.limits import fewest_iterations

pytestmark = pytest.mark.api

REFUSED = re.compile(r"not started|must be in|limit of \d+ runs|at most \d+ sweep values|K x L")


@pytest.fixture(scope="module")
def client():
    with running_app() as url:
        yield Client(url, verbose=False)


def error_of(client, *args, api_name):
    try:
        client.predict(*args, api_name=api_name)
    except Exception as error:  # noqa: BLE001 - the message is what is checked
        return str(error)
    return None


def fewest(runs: list[tuple[int, int]], tokens: int) -> int:
    """The up-front check's lower bound on the Toy world (no end-of-text token): (how many, L) runs."""
    return sum(n * fewest_iterations(tokens, length, can_stop_early=False) for n, length in runs)


# ------------------------------------------------------------------------ budget stops


def test_generate_stopped_by_its_budget_keeps_its_tokens_and_fills_the_explorer(client, limits):
    limits(iterations=3)
    html, line, data, _slider, grid, _plot, details = client.predict("toy", "the cat", "sd", 1, 1, 0.8, 40, 0,
                                                                     api_name="/generate")
    assert data["target_calls"] == 3 and html.count('class="tok ') == data["new_tokens"] < 40
    assert f"stopped at {data['new_tokens']} / 40 tokens" in line and "more than 3 decoding iterations" in line
    assert "Toy world" in line and "seed 0" in line and "L = 1" in line  # the header names what made it
    assert "~~K = 1~~ (ignored)" in line  # SD verifies one draft: K is shown as ignored
    assert grid.count('class="grid-row"') == 1 and details["iteration"] == 1


def test_compare_stopped_by_its_budget_keeps_the_methods_that_finished(client, limits):
    methods = ["spectr_gbv", "sd", "gbv"]
    limits(iterations=fewest([(1, 0), (len(methods), 4)], 20))  # AR and one method fit; the next one does not
    *outputs, data = client.predict("toy", "the cat", methods, 4, 4, 0.8, 20, 0, False, 1, api_name="/compare")
    side_by_side, efficiency, *_ = outputs
    finished = data["finished_methods"]
    assert finished and finished == methods[:len(finished)] and len(finished) < len(methods)
    assert side_by_side.count('class="compare-column"') == len(finished)
    assert re.search(rf"stopped at \d+ / {1 + len(methods)} runs: this request needs more than", side_by_side)
    assert data["stopped"] and [r["method"] for r in data["independent"]] == finished
    assert efficiency is not None and "independent" in side_by_side  # what the charts are made of is said


def test_sweep_stopped_by_its_budget_keeps_the_points_that_finished(client, limits):
    limits(iterations=fewest([(1, 0), (3, 4)], 20))
    header, efficiency, _speed, data = client.predict("toy", "the cat", ["sd"], "K", "1, 2, 4", 2, 4, 0.8, 20, 0, 1,
                                                      api_name="/sweep")
    done = len(data["rows"])
    assert 1 <= done < 3 and f"stopped at {done} / 3 points" in header and data["stopped"]
    assert [r["value"] for r in data["rows"]] == [1, 2, 4][:done] and efficiency is not None


def test_fidelity_stopped_by_its_budget_keeps_the_runs_it_compared(client, limits, monkeypatch):
    # An estimate that is wrong: every draft accepted, so 100 runs of 3 tokens at L = 2 look like one iteration
    # each (components.wiring.admission.cost); the true 1.5 a run spend the 110 iterations part way through.
    monkeypatch.setitem(cost.PAIR_COSTS, "two-token", dataclasses.replace(cost.PAIR_COSTS["two-token"], alpha=1.0))
    limits(iterations=110)
    header, _figure, data = client.predict("two-token", "A", "spectr_gbv_released", 1, 2, 1.0, 100, 3,
                                           api_name="/fidelity")
    assert data["stopped"] and 20 <= data["runs"] < 100 and data["runs"] % 20 == 0  # compared in chunks of 20
    assert f"stopped at {data['runs']} / 100 runs" in header and "N = 100 runs" in header


# ----------------------------------------------------------------------------- repeats


def test_more_repeats_give_a_narrower_band_around_the_mean_of_the_seeds(client):
    def point(repeats):
        # L = 2 on the Toy world: block efficiencies that differ between seeds (at L = 3 most seeds
        # accept every block, and three equal values would leave no band at all)
        *_, data = client.predict("toy", "the cat", ["spectr_gbv"], "K", "2", 2, 2, 1.0, 30, 0, repeats,
                                  api_name="/sweep")
        return data["rows"][0]

    few, many = point(3), point(10)
    for row in (few, many):
        values = row["repeat_block_efficiency"]
        assert row["repeats"] == len(values) and row["seeds"] == list(range(len(values)))
        assert row["mean_block_efficiency"] == pytest.approx(sum(values) / len(values))
        low, high = stats.t.interval(0.95, len(values) - 1, loc=row["mean_block_efficiency"], scale=stats.sem(values))
        assert (row["band_low"], row["band_high"]) == pytest.approx((low, high))
        assert row["iterations"] == sum(row["repeat_target_calls"]) and row["theory_acceptance_length"] > 1
    assert many["band_high"] - many["band_low"] < few["band_high"] - few["band_low"]


def test_compare_repeats_coupled_runs_over_seeds_and_says_so(client):
    *outputs, data = client.predict("toy", "the cat", ["sd", "spectr_gbv"], 3, 4, 1.0, 20, 5, True, 4,
                                    api_name="/compare")
    side_by_side, efficiency = outputs[0], outputs[1]
    assert data["coupled_seeds"] == [5, 6, 7, 8] and "4 seeds (5 to 8)" in side_by_side
    point = data["block_efficiency_over_seeds"]["spectr_gbv"]
    assert point["repeats"] == 4 and point["band_low"] <= point["mean_block_efficiency"] <= point["band_high"]
    figure = json.loads(efficiency["plot"])
    assert figure["layout"]["title"]["text"] == "Block efficiency, coupled runs" and figure["layout"]["yaxis"]["range"][0] == 1
    bars = figure["data"][0]
    top = figure["layout"]["yaxis"]["range"][1]  # fitted to the bars: a band past it is clipped there, and said so
    half_width = min(point["band_high"], top) - point["mean_block_efficiency"]
    assert (point["band_high"] > top) == ("band clipped" in figure["layout"]["title"]["subtitle"]["text"])
    # the JSON is rounded for display (10 significant digits); the chart keeps full precision
    assert bars["error_y"]["array"][1] == pytest.approx(half_width) and bars["y"][1] == pytest.approx(point["mean_block_efficiency"])
    theory = figure["data"][1]
    assert theory["y"][1] == pytest.approx(point["theory_acceptance_length"])  # the theory marker, 1 + mean E[tau]
    assert "Charts: coupled runs" in side_by_side and "Texts and speedups: independent runs" in side_by_side


# -------------------------------------------------------------------------------- caps


def test_l_is_capped_at_what_the_memory_limit_accepts_for_each_k(client):
    for k in range(1, settings.MAX_DRAFTS + 1):
        cap = caps.max_draft_length(k)
        assert error_of(client, "toy", "the", "spectr_gbv", k, cap, 0.8, 1, 0, api_name="/generate") is None
        assert REFUSED.search(error_of(client, "toy", "the", "spectr_gbv", k, cap + 1, 0.8, 1, 0, api_name="/generate"))


def test_sweep_values_are_capped_by_the_number_of_methods(client):
    methods = list(METHODS)

    def values(count):  # K values, repeating 1..8
        return ", ".join(str(i % settings.MAX_DRAFTS + 1) for i in range(count))

    for n in (1, 3, len(methods)):
        cap = caps.max_sweep_values(n)
        accepted = error_of(client, "toy", "the", methods[:n], "K", values(cap), 2, 2, 0.7, 1, 0, 1, api_name="/sweep")
        assert accepted is None, accepted
        refused = error_of(client, "toy", "the", methods[:n], "K", values(cap + 1), 2, 2, 0.7, 1, 0, 1, api_name="/sweep")
        assert refused is not None and REFUSED.search(refused), refused
    assert caps.sweep_values_label(3) == f"Values (at most {caps.max_sweep_values(3)} with 3 method(s))"


@pytest.mark.parametrize("pair", ["toy", "two-token", "default"])
def test_fidelity_n_is_capped_at_what_the_server_accepts_for_the_pair(client, monkeypatch, pair):
    prompt = {"toy": "the", "two-token": "A", "default": "Name a fruit."}[pair]
    demo = app.build_demo(default_pair=pair)
    slider = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "fidelity-runs")
    assert slider.maximum == caps.max_fidelity_runs(pair, inputs.DEFAULT_METHOD, 4, 3) and slider.value <= slider.maximum
    # Accepted requests start and stop at their first step (a budget already spent, the estimates as they are):
    # no run is needed to tell them apart.
    made = limits_module.Budget.__init__

    def spent(budget, *args, **kwargs):
        made(budget, *args, **kwargs)
        budget.deadline = budget.started - 1

    monkeypatch.setattr(limits_module.Budget, "__init__", spent)
    for method, length, tokens in ((inputs.DEFAULT_METHOD, 4, 3), ("ar", 4, 3), ("sd", 1, 2)):
        most = caps.max_fidelity_runs(pair, method, length, tokens)
        header, _figure, data = client.predict(pair, prompt, method, 2, length, 1.0, most, tokens, api_name="/fidelity")
        assert "ran past" in header and data["runs"] == 0, header  # started, and stopped in its first run
        refused = error_of(client, pair, prompt, method, 2, length, 1.0, most + 1, tokens, api_name="/fidelity")
        assert refused is not None and REFUSED.search(refused), refused
