"""The explorer's controls as plain functions: Play / pause, the autoplay tick, a click on an
output token (no server; the browser side is tests/test_browser_explorer.py)."""

from __future__ import annotations

import gradio as gr
import pytest

from components.tabs import explorer, generate

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def state():
    *_, final = generate.generate_stream("toy", "the cat", "gbv", 1, 3, 1.0, 20, 4)
    return final[3]


def test_play_ticks_through_every_iteration_then_stops(state):
    n = len(state.record.iterations)
    assert n >= 3
    playing, timer, button, start = explorer.toggle_play(state, 1, False)
    assert playing is True and timer.active is True and "Pause" in button.value
    index, shown = 1, []
    while playing:
        update, playing, timer, button, grid, _figure, details = explorer.play_tick(state, index)
        index = update["value"]
        shown.append(details["iteration"])
        assert f"Iteration {index}:" in grid
    assert shown == list(range(2, n + 1)) and timer.active is False and "Play" in button.value
    # Play at the last iteration starts over from the first; pressing it while playing pauses.
    assert explorer.toggle_play(state, n, False)[3]["value"] == 1
    playing, timer, button, _ = explorer.toggle_play(state, 2, True)
    assert playing is False and timer.active is False and "Play" in button.value


def test_play_without_a_run_does_nothing():
    playing, timer, *_ = explorer.toggle_play(None, 1, False)
    assert playing is False and timer.active is False


def test_a_clicked_output_token_opens_its_iteration(state):
    n = len(state.record.iterations)
    text = "".join(state.texts[t] for t in state.record.tokens)
    tabs, slider, grid, _figure, details = explorer.open_iteration(state, gr.SelectData(None, {"index": 2, "value": text}))
    assert tabs.selected == "explorer" and slider["value"] == 2 == details["iteration"] and "Iteration 2:" in grid
    assert explorer.open_iteration(state, gr.SelectData(None, {"index": 10_000, "value": text}))[1]["value"] == n  # clamped
    for stale, shown in ((None, text), (state, text[: len(text) // 2])):  # no run yet; a run still streaming
        with pytest.raises(gr.Error, match="not a finished Generate run"):
            explorer.open_iteration(stale, gr.SelectData(None, {"index": 1, "value": shown}))


@pytest.mark.parametrize("index", ["x", 1.5, [3], -2])
def test_a_bad_click_gets_words_not_a_crash(state, index):
    text = "".join(state.texts[t] for t in state.record.tokens)
    with pytest.raises(gr.Error, match="the iteration"):
        explorer.open_iteration(state, gr.SelectData(None, {"index": index, "value": text}))
