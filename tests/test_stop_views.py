"""Stop ends Compare, Sweep and Fidelity at their next step, as it ends Generate and the race.

The handlers run on the Toy world with a session; the session asks to stop (components.wiring.runs.STOPS,
what the page's Stop button does) after the first streamed output. The next step ends the run: its
last output keeps what finished, and the header says it was stopped. A Stop pressed before a run
does not end it. Picking another pair during a run stops it the same way, saying so.
"""

from __future__ import annotations

import types

import pytest

from components.tabs import compare, fidelity, sweep
from components.wiring.runs import STOPS

pytestmark = pytest.mark.unit

STOPPED = "you pressed Stop"


def session(name: str):
    return types.SimpleNamespace(session_hash=name)


def stopped_after_first(stream, name: str) -> tuple[tuple, tuple, int]:
    """(first output, last output, outputs after the first) of `stream`, Stop asked right after the first."""
    first = next(stream)
    STOPS.ask(name)
    rest = list(stream)
    return first, rest[-1], len(rest)


def test_stop_ends_compare_with_the_methods_that_finished():
    methods = ["sd", "gbv", "spectr", "as_bv"]
    stream = compare.compare("toy", "the cat", methods, 2, 2, 0.7, 30, 0, True, 1, request=session("compare-stop"))
    first, (texts, *_charts, data), more = stopped_after_first(stream, "compare-stop")
    assert more == 1  # the next step stopped it: one last output, no further method
    finished = data["finished_methods"]
    assert finished == first[-1]["finished_methods"] and 1 <= len(finished) < len(methods)
    assert data["stopped"].startswith("stopped at") and data["stopped"].endswith(STOPPED)
    assert f"{STOPPED}</b>. What finished is shown." in texts
    assert texts.count('class="compare-column"') == len(finished)
    assert "sweep values" not in texts and "what would fit" not in texts.lower()


def test_stop_ends_a_sweep_with_the_points_that_finished():
    stream = sweep.run_sweep("toy", "the cat", ["sd", "spectr_gbv"], "K", "1, 2, 3, 4", 2, 2, 0.7, 20, 0, 1,
                             request=session("sweep-stop"))
    first, (header, efficiency, _speed, data), more = stopped_after_first(stream, "sweep-stop")
    assert more == 1 and len(data["rows"]) == len(first[-1]["rows"]) == 1 < 8
    assert f"stopped at 1 / 8 points: {STOPPED}" in header and data["stopped"].endswith(STOPPED)
    assert efficiency is not None and data["table"]  # the finished point is drawn and offered


def test_stop_ends_fidelity_with_the_runs_it_compared():
    stream = fidelity.run_fidelity("toy", "the", "spectr_gbv", 2, 2, 1.0, 100, 2, request=session("fidelity-stop"))
    first, (header, figure, data), more = stopped_after_first(stream, "fidelity-stop")
    assert more == 1 and data["runs"] == first[-1]["runs"] == 20  # the first chunk's comparison stays
    assert f"stopped at 20 / 100 runs: {STOPPED}" in header and figure is not None and data["stopped"]


def test_a_stop_pressed_before_a_run_does_not_end_it():
    STOPS.ask("early")
    *_, (header, _figure, data) = fidelity.run_fidelity("toy", "the", "sd", 1, 2, 1.0, 20, 1, request=session("early"))
    assert data["runs"] == 20 and not data["stopped"] and "stopped" not in header


def test_stop_ends_only_its_own_session():
    stream = sweep.run_sweep("toy", "the cat", ["sd"], "K", "1, 2, 3", 2, 2, 0.7, 20, 0, 1, request=session("mine"))
    next(stream)
    STOPS.ask("someone-else")
    *_, (header, _efficiency, _speed, data) = stream
    assert len(data["rows"]) == 3 and data["stopped"] is None and STOPPED not in header
    assert STOPS.take("someone-else")  # still waiting for that session's own run


def test_another_pair_picked_during_a_run_stops_it_and_says_why(monkeypatch):
    from components.tabs import generate, sidebar
    from components.wiring.runs import PAIR_CHANGED

    monkeypatch.setattr(generate, "UPDATE_EVERY_S", 0.0)  # an update per iteration, as a slow run's
    request = session("pair-switch")
    stream = generate.generate_stream("toy", "the cat", "sd", 2, 2, 0.7, 60, 0, request=request)
    next(stream), next(stream)
    sidebar.stop_for_the_new_pair(request)  # what the pair dropdown's input event runs
    _html, line, data, *_ = list(stream)[-1]
    assert data["stopped"] == f"stopped at {data['new_tokens']} / 60 tokens: {PAIR_CHANGED}"
    assert PAIR_CHANGED in line and data["new_tokens"] < 60
