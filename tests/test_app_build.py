"""The app builds without launching, and its handlers work as plain functions (no server)."""

from __future__ import annotations

import gradio as gr
import pytest

import app
from components.tabs import explorer, generate, sweep
from components.wiring import inputs
from helpers import last
from spectr_gbv import METHODS
from spectr_gbv.toy import WORDS, toy_pair

pytestmark = pytest.mark.unit


def test_demo_builds_with_every_view():
    demo = app.build_demo()
    assert isinstance(demo, gr.Blocks)
    tabs = [b.label for b in demo.blocks.values() if isinstance(b, gr.Tab)]
    assert tabs == ["Generate", "Iteration explorer", "Compare", "Race", "Sweep", "Grid", "Fidelity", "Lesson", "Playground",
                    "About"]


@pytest.mark.parametrize("method", ["ar", *METHODS])
def test_toy_world_streams_and_colours_every_token(method, monkeypatch):
    monkeypatch.setattr(generate, "UPDATE_EVERY_S", 0.0)  # no coalescing: every iteration shown
    steps = list(generate.generate_stream("toy", "the cat", method, 3, 4, 0.8, 25, 1))
    html, line, data, state, *_ = steps[-1]
    assert len(steps) == data["target_calls"] + 1  # one partial update per iteration, then the final one
    assert html.count('class="tok ') == 25 == data["new_tokens"]
    assert data["method"] == method and data["block_efficiency"] >= 1.0
    assert state.record.tokens == inputs.get_pair("toy").encode(data["text"])


def test_streamed_updates_are_coalesced_and_the_last_one_always_comes(monkeypatch):
    monkeypatch.setattr(generate, "UPDATE_EVERY_S", 3600.0)  # a run faster than the pace: only its final update
    steps = list(generate.generate_stream("toy", "the cat", "gbv", 3, 4, 0.8, 25, 1))
    assert len(steps) == 1 and steps[0][2]["new_tokens"] == 25


def test_explorer_steps_through_the_stored_run():
    *_, state, slider, grid, figure, details = last(generate.generate_stream("toy", "the", "spectr_gbv", 4, 3, 1.0, 30, 2))
    n = len(state.record.iterations)
    assert slider["maximum"] >= n >= 2
    update, grid2, figure2, details2 = explorer.step_iteration(state, 1, delta=1)
    assert update["value"] == 2 and details2["iteration"] == 2
    assert grid2.count('class="grid-row"') == 4 and figure2 is not None
    update, *_ = explorer.step_iteration(state, n, delta=1)
    assert update["value"] == n  # clamped at the last iteration


@pytest.mark.parametrize(
    "pair, prompt, kwargs, message",
    [
        ("toy", "", {}, "empty"),
        ("default", "   ", {}, "empty"),
        ("toy", "the zebra", {}, "zebra"),
        ("toy", "the", {"num_drafts": 0}, "K"),
        ("toy", "the", {"temperature": -1}, "T \\(temperature\\)"),
        ("toy", "the", {"max_new_tokens": None}, "max new tokens is missing"),
        ("no such pair", "hello", {}, "unknown model pair"),
    ],
)
def test_bad_input_becomes_a_clear_ui_error(pair, prompt, kwargs, message):
    values = {"method": "spectr_gbv", "num_drafts": 2, "draft_length": 3, "temperature": 1.0, "max_new_tokens": 5, "seed": 0}
    values.update(kwargs)
    with pytest.raises(gr.Error, match=message):
        last(generate.generate_stream(pair, prompt, **values))


def test_sweep_values_are_checked():
    assert sweep.parse_values("K", "1, 2 4") == [1, 2, 4]
    assert sweep.parse_values("T", "0.1;0.7") == [0.1, 0.7]
    for axis, text, message in [("K", "", "give the values"), ("K", "9", "must be in"), ("L", "1.5", "whole number"),
                                ("K", ",".join(["1"] * 9), "at most"), ("Q", "1", "axis")]:
        with pytest.raises(ValueError, match=message):
            sweep.parse_values(axis, text)


def test_hub_pair_without_the_hub_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(gr.Error, match="needs the Hugging Face Hub"):
        last(generate.generate_stream("qwen2.5-1.5b", "hello", "sd", 1, 2, 0.7, 5, 0))


def test_toy_world_distributions_are_proper():
    target, draft = toy_pair()
    for previous in range(len(WORDS)):
        for model in (target, draft):
            probs = model.next_token_probs([previous])
            assert probs.min() > 0 and abs(probs.sum().item() - 1) < 1e-12


def test_space_front_matter_matches_the_pinned_gradio():
    from pathlib import Path

    root = Path(app.__file__).parent
    front = root.joinpath("README.md").read_text().split("---")[1]
    fields = dict(line.split(":", 1) for line in front.strip().splitlines() if ":" in line and not line.startswith(" "))
    pinned = next(l.split("==")[1].strip() for l in root.joinpath("requirements.txt").read_text().splitlines()
                  if l.startswith("gradio=="))
    assert fields["sdk"].strip() == "gradio" and fields["app_file"].strip() == "app.py"
    assert fields["sdk_version"].strip() == pinned == gr.__version__


# ------------------------------------------------------------------ run buttons (issue 24)


def test_every_run_button_is_busy_during_its_run_and_a_failure_replaces_its_outputs():
    """Wiring, as Gradio's page reads it: click -> the button disabled at once (unqueued) -> the public
    run -> the button back (`.then`) and, on failure, the message where the outputs were (`.failure`,
    which is all the page runs after a failed event: it carries the button back too)."""
    from components.wiring.run_events import RUNNING

    demo = app.build_demo(default_pair="toy", default_prompt="the cat")
    fns = demo.fns
    by_id = {b._id: b for b in demo.blocks.values()}
    for name, button in (("generate", "generate-button"), ("compare", "compare-button"), ("sweep", "sweep-button"),
                         ("fidelity", "fidelity-button")):
        run_index, run = next((i, fn) for i, fn in fns.items() if fn.api_name == name)
        busy = fns[run.trigger_after]
        assert not busy.queue and [by_id[o._id].elem_id for o in busy.outputs] == [button]
        assert busy.fn().value == RUNNING and busy.fn().interactive is False
        after = [fn for fn in fns.values() if fn.trigger_after == run_index]
        back = next(fn for fn in after if not fn.trigger_only_on_failure)
        failed = next(fn for fn in after if fn.trigger_only_on_failure)
        assert not back.queue and back.fn().interactive is True and back.fn().value != RUNNING
        assert button in [getattr(by_id[o._id], "elem_id", None) for o in failed.outputs] and not failed.queue


def test_a_failed_run_puts_its_message_where_its_outputs_were():
    import types

    from components.wiring.errors import FAILURES, translate_error
    from components.wiring.run_events import failure_outputs

    outputs = {"output": gr.HTML(), "metrics_line": gr.Markdown(), "data": gr.JSON(), "grid": gr.HTML()}
    button = gr.Button("Generate")
    show = failure_outputs("generate_stream", outputs, "output", ("metrics_line", "data"), button)
    FAILURES.note("session-1", "generate_stream", translate_error(ValueError("unknown word <zebra>")).message)
    shown = show(types.SimpleNamespace(session_hash="session-1"))
    assert "unknown word &lt;zebra&gt;" in shown[outputs["output"]] and 'class="run-failed"' in shown[outputs["output"]]
    assert shown[outputs["metrics_line"]] is None and shown[outputs["data"]] is None
    assert shown[outputs["grid"]] == gr.skip()  # the explorer keeps the last finished run
    assert shown[button].interactive is True
    again = show(types.SimpleNamespace(session_hash="session-1"))  # taken once; another session never sees it
    assert "the run failed" in again[outputs["output"]]
    FAILURES.note("session-2", "generate_stream", "x")
    assert FAILURES.take("session-3", "generate_stream") is None and FAILURES.take("session-2", "compare") is None


def test_the_about_tab_shows_the_algorithms_document_in_a_closed_accordion():
    """docs/algorithms.md, read at build: a visitor cannot open a repository file, so the tab shows it."""
    from components.tabs import about

    demo = app.build_demo()
    by_id = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    fold, text = by_id["about-algorithms"], by_id["about-algorithms-text"]
    assert isinstance(fold, gr.Accordion) and fold.open is False and text in fold.children
    assert fold.label == about.ALGORITHMS_TITLE and text.latex_delimiters == []
    headings = [line for line in text.value.splitlines() if line.startswith("#")]
    for section in ("SpecTr-GBV, exact", "as released", "Why GBV is exact", "AS-BV with hand-off", "References"):
        assert any(section in heading for heading in headings), section
    assert "$" not in about.ALGORITHMS.read_text()  # LaTeX off loses nothing
    assert "](" not in "".join(line for line in text.value.splitlines() if ".md" in line)  # no dead file links
    assert "the derivations are in the section below" in about.about_markdown()


def test_private_answers_carry_no_lone_surrogate():
    """A handler that echoes a lone surrogate must answer text JSON can carry (else the stream closes wordless)."""
    import json

    from components.tabs.sidebar import pair_name_html
    from components.wiring.errors import carrying

    def echo(text):
        return [text, {"__type__": "update", "value": text}, (text, 3)]

    def echoes(text):
        yield echo(text)

    junk = "the \ud800 cat"
    with pytest.raises(UnicodeEncodeError):
        json.dumps(echo(junk), ensure_ascii=False).encode()
    for answer in (carrying(echo)(junk), next(carrying(echoes)(junk))):
        assert json.dumps(answer, ensure_ascii=False).encode().decode() == json.dumps(
            ["the \\ud800 cat", {"__type__": "update", "value": "the \\ud800 cat"}, ["the \\ud800 cat", 3]],
            ensure_ascii=False)
    assert carrying(echo).__name__ == "echo"  # Gradio names the event after it
    assert "\\ud800" in pair_name_html(junk) and "\ud800" not in pair_name_html(junk)


def launched_queue_settings() -> tuple[int, int]:
    """(records kept, summarised every n-th event) of Gradio's queue as `app.launch` makes it."""
    from app_server import free_port

    with gr.Blocks() as demo:
        gr.Button("x").click(lambda: None)
    app.launch(demo, server_name="127.0.0.1", server_port=free_port(), prevent_thread_lock=True, quiet=True)
    try:
        return demo._queue.ANALYTICS_MAX_EVENTS, demo._queue.ANAYLTICS_CACHE_FREQUENCY  # Gradio's spelling
    finally:
        demo.close()


def test_gradio_summarises_a_short_record_rarely_unless_monitoring_is_on(monkeypatch):
    """With /monitoring off, Gradio's queue keeps 500 events' records and summarises them every 500th
    event (not the last 10,000 after every event, which was half the server's CPU under small events)."""
    for name in app.GRADIO_ANALYTICS:
        monkeypatch.delenv(name, raising=False)
    assert launched_queue_settings() == (500, 500)
    monkeypatch.setenv("GRADIO_ANALYTICS_CACHE_FREQUENCY", "7")  # the operator's own setting stays
    assert launched_queue_settings()[1] == 7
