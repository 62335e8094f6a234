"""The explorer's controls as plain functions: Play / pause, the autoplay tick, a click on an
output token (no server; the browser side is tests/test_browser_explorer.py)."""

from __future__ import annotations

from html.parser import HTMLParser

import gradio as gr
import pytest

from components.tabs import explorer, generate

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def run():
    """(the Generate output's HTML, the session's RunState) of a finished run."""
    *_, final = generate.generate_stream("toy", "the cat", "gbv", 1, 3, 1.0, 20, 4)
    return final[0], final[3]


@pytest.fixture(scope="module")
def state(run):
    return run[1]


VOID = ("br", "wbr")  # tags without an end tag


def page_text(output_html: str) -> str:
    """What the output's click handler sends (explorer_js.OUTPUT_JS): the text content of every token
    span (those with data-iteration), joined."""
    class Reader(HTMLParser):
        depth, texts = 0, []

        def handle_starttag(self, tag, attrs):
            if tag in VOID:
                return
            if self.depth or ("data-iteration" in dict(attrs)):
                self.depth += 1
                if self.depth == 1:
                    self.texts.append("")

        def handle_endtag(self, tag):
            if tag not in VOID and self.depth:
                self.depth -= 1

        def handle_data(self, data):
            if self.depth:
                self.texts[-1] += data

    reader = Reader()
    reader.feed(output_html)
    return "".join(reader.texts)


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


def test_a_clicked_output_token_opens_its_iteration(run):
    output, state = run
    n = len(state.record.iterations)
    text = page_text(output)
    tabs, slider, grid, _figure, details = explorer.open_iteration(state, gr.SelectData(None, {"index": 2, "value": text}))
    assert tabs.selected == "explorer" and slider["value"] == 2 == details["iteration"] and "Iteration 2:" in grid
    assert explorer.open_iteration(state, gr.SelectData(None, {"index": 10_000, "value": text}))[1]["value"] == n  # clamped
    for stale, shown in ((None, text), (state, text[: len(text) // 2])):  # no run yet; a run still streaming
        with pytest.raises(gr.Error, match="not a finished Generate run"):
            explorer.open_iteration(stale, gr.SelectData(None, {"index": 1, "value": shown}))


@pytest.mark.parametrize("index", ["x", 1.5, [3], -2])
def test_a_bad_click_gets_words_not_a_crash(run, index):
    output, state = run
    text = page_text(output)
    with pytest.raises(gr.Error, match="the iteration"):
        explorer.open_iteration(state, gr.SelectData(None, {"index": index, "value": text}))
