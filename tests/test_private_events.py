"""Junk posted to the UI's own events gets words, and the server's log no traceback (issue 25).

Every event the page wires for itself (api_visibility "private": the explorer's controls, the
caps on the sidebar's sliders, the examples, the link, the playground, the lesson, the
defaults that follow the pair, ...) can be posted to by its index: over
/gradio_api/queue/join, and the unqueued ones also over /gradio_api/run/predict, as the page
itself calls them (and by name: /gradio_api/run/<name>, /gradio_api/call/<name>). The app runs
in a child process (tests/app_server.py) whose whole output is the log a Space shows. For every
private event, each junk shape below (None, nested lists, a huge string, objects, numbers where
text belongs, NaN, lone surrogates, too few and too many arguments; junk event data for the
output's click) must get a refusal in words (the gate's 4xx, or the handler's message) or a
harmless answer, and no line of the log may be a traceback.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from app_server import app_process
from helpers import assert_clear
from raw_api import call, join, run

pytestmark = pytest.mark.slow

PUBLIC = {"generate", "compare", "race", "sweep", "grid", "grid_saved", "fidelity"}
JUNK = {  # each makes the arguments of an event taking n inputs
    "None": lambda n: [None] * n,
    "nested lists": lambda n: [[[1, [2, "x"]], []]] * n,
    "a huge string": lambda n: ["x" * 100_000] + [None] * (n - 1),
    "objects": lambda n: [{"value": 1, "__type__": "update"}] * n,
    "numbers": lambda n: [12345.5] * n,
    "NaN": lambda n: [float("nan")] * n,
    "lone surrogates": lambda n: ["the \ud800 cat"] * n,
    "too few": lambda n: [None] * (n - 1),
    "too many": lambda n: ["toy"] * (n + 3),
}
POSTS_AT_ONCE = 4
EVENT_DATA = [None, 5, "x", [1], {"index": "x"}, {"index": [1], "value": {"a": 1}}]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """(url, log, the private events' configs); one address here sends hundreds of posts, several at once,
    so its join rates (the sessions' and the address's) are opened, and so are its caps on events in the
    queue: on a loaded machine the gate once still counted six of a visitor's events in Gradio's queue
    after their answers had come back, and refused the next post (the gate and its caps are
    tests/test_gate.py's)."""
    log = tmp_path_factory.mktemp("private-events") / "server.log"
    wide = {"SPECTR_GBV_VISITOR_JOINS_PER_MINUTE": "60000", "SPECTR_GBV_VISITOR_JOIN_BURST": "1000",
            "SPECTR_GBV_VISITOR_EVENTS": "1000", "SPECTR_GBV_ADDRESS_JOINS_PER_MINUTE": "600000",
            "SPECTR_GBV_ADDRESS_JOIN_BURST": "10000", "SPECTR_GBV_ADDRESS_EVENTS": "1000"}
    with app_process(log, env=wide) as url:
        config = httpx.get(f"{url}config", timeout=30).json()
        yield url, log, [d for d in config["dependencies"] if d.get("api_name") not in PUBLIC]


def new_log_lines(log, since: int) -> str:
    return log.read_text(errors="replace")[since:]


def assert_clear_answer(event: dict, status: int, ok: bool, answer) -> None:
    """A result, or words: the gate's refusal (4xx) or the handler's message; never a bare 'Error', nor nothing."""
    where = f"event {event['id']} ({event.get('api_name')})"
    if ok:
        return
    assert status in (200, 404, 413, 422, 500), (where, status, answer)  # 500: /run's status for a handler's message
    try:
        assert_clear(answer)
    except AssertionError as error:
        raise AssertionError(f"{where}, HTTP {status}: {error}") from None


def test_every_event_but_the_api_is_private(server):
    _, _, events = server
    assert len(events) >= 40  # the lesson's 15, the explorer's 6, the caps' 9, the share, load and examples events...
    assert {d.get("api_visibility") for d in events} == {"private"}
    names = {d.get("api_name") for d in events}
    assert {"show_iteration", "play_tick", "toggle_play", "open_iteration", "load_example", "link_query",
            "cap_draft_length", "cap_fidelity_runs", "label_sweep_values"} <= names


def post_junk(url: str, event: dict, shape: str) -> list[tuple[dict, int, bool, object]]:
    """Every route the page has to `event`, with `shape`'s junk; each event its own session, so the
    events posted at once read their answers from their own streams."""
    n = len(event["inputs"])
    if shape == "too few" and n == 0:
        return []
    routes = (join, run) if event.get("queue") is False else (join,)
    return [(event, *route(url, event["id"], JUNK[shape](n), session_hash=f"junk-{shape[:4]}-{event['id']}"))
            for route in routes]


@pytest.mark.parametrize("shape", list(JUNK))
def test_junk_by_event_number_gets_words_and_no_traceback(server, shape):
    """The ~200 events are posted POSTS_AT_ONCE at a time, so the client's and the server's work
    overlap; every answer is still checked."""
    url, log, events = server
    since = len(log.read_text(errors="replace"))
    with ThreadPoolExecutor(POSTS_AT_ONCE) as pool:
        answers = [a for posted in pool.map(lambda event: post_junk(url, event, shape), events) for a in posted]
    assert len(answers) >= len(events) - 1
    for event, status, ok, answer in answers:
        assert_clear_answer(event, status, ok, answer)
    logged = new_log_lines(log, since)
    assert "Traceback" not in logged and " ERROR " not in logged, logged[-3000:]


def test_junk_event_data_for_a_click_on_the_output_gets_words(server):
    url, log, events = server
    since = len(log.read_text(errors="replace"))
    click = next(d for d in events if d.get("api_name") == "open_iteration")
    for data in EVENT_DATA:
        status, ok, answer = join(url, click["id"], [None], event_data=data)
        assert not ok and status == 200, answer
        assert_clear(answer)
    assert "Traceback" not in new_log_lines(log, since)


def test_the_real_values_still_work_without_gradios_preprocessing(server):
    """What the page sends (a slider's number, a dropdown's value, the methods' list, a dataset's index)."""
    url, _, events = server
    by_name = {d.get("api_name"): d for d in events}

    def answer_of(name, args):
        event = by_name[name]
        status, ok, answer = (run if event.get("queue") is False else join)(url, event["id"], args)
        assert ok, (name, status, answer)
        return answer

    assert answer_of("cap_draft_length", [8, "spectr_gbv", 12])[0]["maximum"] == 8  # 64 // K = 8
    assert answer_of("note_ignored_drafts", ["sd"])[0]["info"].startswith("ignored by SD")
    assert answer_of("cap_fidelity_runs", ["toy", "sd", 2, 3, 5000, 2])[0]["value"] <= 2000
    assert "at most 8" in answer_of("label_sweep_values", [[]])[0]["label"]  # none ticked: the label for one method
    assert answer_of("load_example", [5]) == [{"value": "two-token", "__type__": "update"},
                                             {"value": "A", "__type__": "update"}]
    link = answer_of("link_query", ["toy", "the cat", "sd", 2, 3, 0.7, 4, True, "2", "Lesson"])[0]
    assert link.startswith("?pair=toy") and link.endswith("&tab=lesson&present=1&step=2")
    assert answer_of("start_class", [])[0] == {"value": "toy", "__type__": "update"}
    assert "Generate something first" in answer_of("show_iteration", [None, 3])[0]  # no run in this session yet
    assert answer_of("repeats_for_pair", ["toy", ["sd", "gbv"]]) == [3]  # the Toy world fits the most repeats
    assert answer_of("values_for_axis", ["toy", "L", ["sd"]]) == ["1, 2, 4, 8"]
    assert "alpha = 0.6, K = 2, L = 4" in answer_of("update", [0.6, 2, 4, 0.1, "one batch (cost L c)", 0.05])[0]


def test_by_name_too_junk_gets_words(server):
    """The same events by their names (/gradio_api/run/<name>, /gradio_api/call/<name>)."""
    url, log, _ = server
    since = len(log.read_text(errors="replace"))
    for args in ([None], [[1, [2]], {"a": 1}, "x" * 1000]):
        answer = httpx.post(f"{url}gradio_api/run/cap_draft_length", json={"data": args}, timeout=30)
        assert answer.status_code in (422, 500), answer.text
        assert_clear(answer.json().get("detail") or answer.json().get("error"))
        ok, message = call(url, "/label_sweep_values", args[:1] if args[0] is not None else [7])
        assert not ok, message
        assert_clear(message)
    assert "Traceback" not in new_log_lines(log, since)
