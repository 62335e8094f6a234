"""A budget that stops a request before its first unit of work finishes still answers with a result (issue 25).

The server's limits are swapped for a test (the `limits` fixture), and the estimates made free
(`free_estimates`, so the runs pass the pre-start check): SPECTR_GBV_MAX_SECONDS = 0
stops a request at its first check, after its first decoding step, and a budget of a second or
two stops a Compare or a Sweep inside its first run when the pair's models sleep SLOW_S a call
(the Toy world's tables as the default pair, tests/test_fair_and_bounded.py). Generate then
shows its first iteration; Compare and Sweep the tokens of the run in progress; Fidelity its
runs so far, counted. Where nothing finished, the stop says what would fit at the speed the
request measured, and each stop is one INFO line in the log.
"""

from __future__ import annotations

import logging
import re

import pytest

from app_server import running_app
from components.tabs import compare, fidelity, sweep
from components.wiring import inputs
from raw_api import call
from helpers import last, stand_in_pair, toy_generate

pytestmark = pytest.mark.api

SLOW_S = 0.05  # a model call of the stand-in pair: AR's 30 tokens take 1.5 s


@pytest.fixture
def slow_default(monkeypatch, free_estimates):
    """The default pair replaced by the Toy world's tables behind models that sleep SLOW_S a call (which the
    estimates do not know: the runs pass the pre-start check)."""
    stand_in = stand_in_pair("sleep", SLOW_S, [])
    monkeypatch.setattr(inputs, "get_pair", lambda key, **kwargs: stand_in)
    return stand_in


def stop_lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "spectr_gbv.app" and "stopped by its budget" in r.getMessage()]


def test_generate_stopped_at_its_first_check_shows_its_first_iteration(limits, free_estimates, caplog):
    limits(seconds=0)
    caplog.set_level(logging.INFO, logger="spectr_gbv")
    _html, line, data, state, _slider, grid, _figure, details = toy_generate(L=2, tokens=40)
    assert data["target_calls"] == 1 and 1 <= data["new_tokens"] <= 3 and data["stopped"]
    assert f"stopped at {data['new_tokens']} / 40 tokens: this request ran past this server's limit of 0 s" in line
    assert len(state.record.iterations) == 1 and details["iteration"] == 1 and 'class="grid-row"' in grid
    [logged] = stop_lines(caplog)
    assert logged.startswith(f"generate stopped by its budget at {data['new_tokens']} / 40 tokens: this request ran")


def test_compare_stopped_inside_its_first_run_shows_that_run_and_what_would_fit(limits, slow_default, caplog):
    limits(seconds=2)  # AR's 30 tokens take 1.5 s: stopped in AR or in SD's first run
    caplog.set_level(logging.INFO, logger="spectr_gbv")
    texts, *_charts, data = last(compare.compare("default", "the cat", ["sd", "gbv"], 2, 2, 0.7, 30, 0, True))
    partial = data["partial_run"]
    assert partial["run"] in ("the AR baseline", "SD, seed 0") and 1 <= partial["new_tokens"] < 30 and partial["text"]
    assert data["finished_methods"] == [] and data["independent"] == []
    said = re.search(r"stopped at [01] / 6 runs: this request ran past this server's limit of 2 s .* no method had "
                     rf"finished after \d+ s \(\d+ decoding steps, [\d.]+ s each on this server; {partial['run']} had "
                     rf"decoded {partial['new_tokens']} of 30 tokens in \d+ target calls?\): "
                     r"about (\d+) tokens? per run would fit", data["stopped"])
    assert said, data["stopped"]
    assert 1 <= int(said.group(1)) < 30  # fewer tokens for 3 AR runs, the two methods and the coupled run
    assert "the run in progress, stopped after" in texts and texts.count('class="tok ') == partial["new_tokens"]
    assert len(stop_lines(caplog)) == 1


def test_sweep_stopped_inside_its_first_run_shows_that_run_and_what_would_fit(limits, slow_default):
    limits(seconds=1)  # AR's 30 tokens take 1.5 s
    header, _efficiency, _speed, data = last(sweep.run_sweep("default", "the", ["sd"], "K", "1, 2", 2, 2, 0.7, 30, 0))
    assert data["rows"] == [] and data["partial_run"]["run"] == "the AR baseline"
    assert 1 <= data["partial_run"]["new_tokens"] < 30
    assert re.search(r"stopped at 0 / 2 points: .* no point had finished after 1 s .* the AR baseline had decoded "
                     r"\d+ of 30 tokens .*: about \d+ tokens? per run would fit", header), header


def test_fidelity_stopped_before_its_first_comparison_counts_its_runs(limits, slow_default):
    limits(seconds=1)  # ten 3-token runs take about 3 s
    header, figure, data = last(fidelity.run_fidelity("default", "the", "sd", 1, 2, 1.0, 10, 3))
    assert figure is None and not data["compared"] and 1 <= data["runs"] < 10
    assert sum(o["count"] for o in data["outcomes"]) == data["runs"] and "exact" not in data["outcomes"][0]
    assert "stopped at 0 / 10 runs compared" in header and f"{data['runs']} of 10 runs had finished" in header
    assert re.search(r"(about \d+ runs?|not even 10 runs) would fit", header), header


def test_fidelity_stopped_inside_its_first_run_says_what_would_fit(limits, free_estimates):
    limits(seconds=0)
    header, figure, data = last(fidelity.run_fidelity("two-token", "A", "sd", 1, 2, 1.0, 10, 3))
    assert figure is None and data["runs"] == 0 and data["outcomes"] == []
    assert "0 of 10 runs had finished" in header and "not even 10 runs would fit: fewer tokens compared" in header


def test_over_the_api_a_stop_before_anything_finished_is_a_result_not_an_error(limits, free_estimates):
    with running_app(default_pair="toy", default_prompt="the cat") as url:
        limits(seconds=0)  # after the page is built: its Fidelity slider would have no room at all
        ok, outputs = call(url, "/compare", ["toy", "the cat", ["sd", "gbv"], 2, 2, 0.7, 10, 0, True, 1, None, None])
    assert ok, outputs
    data = outputs[-1]
    assert data["stopped"].startswith("stopped at 0 / 4 runs") and data["partial_run"]["run"] == "the AR baseline"
    assert "not even 1 token per run would fit: fewer methods or repeats" in data["stopped"]
