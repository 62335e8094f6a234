"""The gate before Gradio's queue (issue 25): one trusted address, rates, refusals in words, no files kept.

Unit tests give `visitor_of` Starlette requests with chosen X-Forwarded-For lines, and the
token bucket and the events cap a fake clock and a fake queue. Server tests run the app on
loopback as on a Space (one proxy hop) with the gate's defaults, each test from an address
of its own so that buckets do not carry over: wrong argument counts, unknown event indexes,
over-long session hashes and uploads get a 4xx whose message says why; 500 tiny uploads
leave no file in Gradio's upload folder; a refusal is one INFO log line.
"""

from __future__ import annotations

import dataclasses
import json
from concurrent.futures import ThreadPoolExecutor
import logging
import types

import httpx
import pytest
from starlette.requests import Request

import app
from app_server import free_port
from components.serving import gate, visitors
from raw_api import call

pytestmark = pytest.mark.api


def _request(*lines: str, client: str = "10.0.0.9") -> Request:
    headers = [(b"x-forwarded-for", line.encode()) for line in lines]
    return Request({"type": "http", "method": "GET", "path": "/", "query_string": b"", "headers": headers,
                    "client": (client, 1234)})


# ------------------------------------------------------------------ one trusted address


def test_every_forwarded_line_is_joined_before_counting_hops_from_the_right():
    assert visitors.visitor_of(_request("1.1.1.1, 2.2.2.2", "3.3.3.3"), 1) == "3.3.3.3"
    assert visitors.visitor_of(_request("1.1.1.1, 2.2.2.2", "3.3.3.3"), 2) == "2.2.2.2"


def test_entries_a_client_adds_on_the_left_or_on_a_line_of_its_own_are_never_read():
    # the proxy appends the socket's address to the last line; what the client sent comes before
    spoofed = _request("203.0.113.9", "198.51.100.1, 203.0.113.77")
    assert visitors.visitor_of(spoofed, 1) == "203.0.113.77"
    assert visitors.visitor_of(_request("6.6.6.6, 7.7.7.7,  203.0.113.77 "), 1) == "203.0.113.77"


def test_a_missing_or_short_header_falls_back_to_the_socket():
    assert visitors.visitor_of(_request(), 1) == "10.0.0.9"
    assert visitors.visitor_of(_request(" , "), 1) == "10.0.0.9"
    assert visitors.visitor_of(_request("1.1.1.1"), 2) == "10.0.0.9"
    assert visitors.visitor_of(_request("1.1.1.1"), 0) == "10.0.0.9"  # no trusted proxy: the header is the client's
    pickled = types.SimpleNamespace(headers={"x-forwarded-for": "1.1.1.1, 2.2.2.2"}, client=None)  # a dict of headers
    assert visitors.visitor_of(pickled, 1) == "2.2.2.2"


# -------------------------------------------------------------------- rates and the cap


def test_the_bucket_allows_a_burst_then_its_rate():
    now = [0.0]
    buckets = gate.Buckets(per_minute=60, burst=3, clock=lambda: now[0])
    assert [buckets.take("a") for _ in range(3)] == [0, 0, 0]
    assert buckets.take("a") == pytest.approx(1.0)  # one a second
    assert buckets.take("b") == 0  # another visitor has a bucket of its own
    now[0] = 1.0
    assert buckets.take("a") == 0 and buckets.take("a") > 0
    now[0] = 100.0
    assert [buckets.take("a") for _ in range(4)][-1] > 0  # refilled up to the burst, no further


def _door_with_events(monkeypatch, events, **fair):
    monkeypatch.setattr(visitors, "FAIR", dataclasses.replace(visitors.FAIR, proxy_hops=1, **fair))
    fn = types.SimpleNamespace(api_name="generate", api_visibility="public", fn=lambda: None, cancels=[], inputs=[])
    demo = types.SimpleNamespace(_queue=types.SimpleNamespace(event_ids_to_events=events), fns={21: fn})
    return gate.JoinGate(None, demo)


def _body(session: str) -> bytes:
    return json.dumps({"fn_index": 21, "data": [], "session_hash": session}).encode()


def test_a_session_with_its_events_in_the_queue_is_refused_and_its_classmates_are_not(monkeypatch):
    events = {str(i): types.SimpleNamespace(request=_request("203.0.113.5"), session_hash="s") for i in range(2)}
    door = _door_with_events(monkeypatch, events, visitor_events=2)
    door._admit("203.0.113.6", "queue/join", _body("s"))  # another address: admitted
    door._admit("203.0.113.5", "queue/join", _body("t"))  # another session at the same address: admitted
    with pytest.raises(gate.Refusal, match="this page already has 2 requests waiting or running .*per page"):
        door._admit("203.0.113.5", "queue/join", _body("s"))


def test_an_address_with_its_events_in_the_queue_is_refused_whatever_the_session(monkeypatch):
    events = {str(i): types.SimpleNamespace(request=_request("203.0.113.5"), session_hash=f"s{i}") for i in range(5)}
    door = _door_with_events(monkeypatch, events, visitor_events=2, address_events=5)
    with pytest.raises(gate.Refusal, match="your network address already has 5 requests .*per address"):
        door._admit("203.0.113.5", "queue/join", _body("new"))
    door._admit("203.0.113.6", "queue/join", _body("new"))  # another address: admitted


def test_a_class_of_60_pressing_at_once_behind_one_address_passes_the_door(monkeypatch):
    door = _door_with_events(monkeypatch, {})
    for student in range(60):  # each page's joins: the default per-session and per-address buckets
        door._admit("203.0.113.9", "queue/join", _body(f"student{student}"))
    flooder = [door.buckets.take(("203.0.113.10", "one")) for _ in range(visitors.FAIR.join_burst + 1)]
    assert flooder[-1] > 0  # one page still has its own burst


# ------------------------------------------------------------------------ a server


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    folder = tmp_path_factory.mktemp("gradio-uploads")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("GRADIO_TEMP_DIR", str(folder))
        demo = app.build_demo(default_pair="toy", default_prompt="the cat")
        port = free_port()
        app.launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                   fairness=dataclasses.replace(visitors.Fairness.from_env(), proxy_hops=1))
        yield f"http://127.0.0.1:{port}/", demo, folder
        demo.close()
    visitors.configure(visitors.Fairness.from_env())


SIGNATURES = {
    "/generate": "/generate(pair_key, prompt, method, num_drafts, draft_length, temperature, max_new_tokens, seed)",
    "/compare": "/compare(pair_key, prompt, methods, num_drafts, draft_length, temperature, max_new_tokens, seed, "
                "coupled, repeats, prompt_set, baseline)",
    "/sweep": "/sweep(pair_key, prompt, methods, axis, values, num_drafts, draft_length, temperature, "
              "max_new_tokens, seed, repeats, prompt_set)",
    "/fidelity": "/fidelity(pair_key, prompt, method, num_drafts, draft_length, temperature, num_runs, num_tokens)",
    "/race": "/race(pair_key, prompt, method, num_drafts, draft_length, temperature, max_new_tokens, seed)",
}


@pytest.mark.parametrize("endpoint, count", [("/generate", 7), ("/generate", 0), ("/generate", 9), ("/compare", 9),
                                             ("/sweep", 5), ("/fidelity", 3), ("/race", 4)])
def test_a_wrong_number_of_arguments_names_the_signature(served, endpoint, count):
    url, _, _ = served
    ok, message = call(url, endpoint, ["toy"] * count, headers={"X-Forwarded-For": f"192.0.2.{count + 10}"})
    assert not ok and message.startswith("HTTP 422"), message
    assert SIGNATURES[endpoint] in message and f"got {count}" in message, message


def _join(url, body, address):
    return httpx.post(f"{url}gradio_api/queue/join", json=body, headers={"X-Forwarded-For": address}, timeout=10)


def test_unknown_events_and_long_session_hashes_get_words_not_500(served):
    url, demo, _ = served
    generate = next(i for i, fn in demo.fns.items() if fn.api_name == "generate")
    for index in (999, -1, "x", 1.5):
        answer = _join(url, {"data": [], "fn_index": index, "session_hash": "abc"}, "192.0.2.30")
        assert answer.status_code == 404 and "no event number" in answer.json()["detail"], answer.text
    toy = ["toy", "the cat", "sd", 1, 2, 0.7, 3, 0]
    answer = _join(url, {"data": toy, "fn_index": generate, "session_hash": "h" * 10_000}, "192.0.2.31")
    assert answer.status_code == 400 and "session hash is 10000 characters" in answer.json()["detail"]
    stream = httpx.get(f"{url}gradio_api/queue/data", params={"session_hash": "h" * 10_000}, timeout=10)
    assert stream.status_code == 400
    answer = _join(url, {"data": toy[:5], "fn_index": generate, "session_hash": "ok"}, "192.0.2.32")
    assert answer.status_code == 422 and SIGNATURES["/generate"] in answer.json()["detail"]
    junk = httpx.post(f"{url}gradio_api/queue/join", content=b"\xff{", timeout=10)
    assert junk.status_code == 400 and "not JSON" in junk.json()["detail"]
    assert call(url, "/generate", toy, headers={"X-Forwarded-For": "192.0.2.33"})[0]  # and the app serves on


def test_500_tiny_uploads_are_refused_and_leave_no_file(served):
    url, demo, folder = served
    assert demo.server_app.uploaded_file_dir == str(folder)
    with httpx.Client(timeout=10) as http:
        statuses = {http.post(f"{url}gradio_api/upload", files={"files": (f"f{i}.bin", b"x" * (i % 2))}).status_code
                    for i in range(500)}
    assert statuses == {413}
    assert not [p for p in folder.rglob("*") if p.is_file()]


def test_joins_over_the_rate_are_refused_with_a_retry_time_and_others_are_not(served, caplog):
    url, demo, _ = served
    fidelity = next(i for i, fn in demo.fns.items() if fn.api_name == "fidelity")
    body = {"data": [], "fn_index": fidelity, "session_hash": "rate"}  # refused after the rate check: no work queued
    burst = visitors.FAIR.join_burst
    with caplog.at_level(logging.INFO, logger="spectr_gbv.gate"):
        with ThreadPoolExecutor(4) as pool:  # at once: a loaded machine's slow answers would refill the bucket
            answers = list(pool.map(lambda _: _join(url, body, "192.0.2.40"), range(burst + 8)))
    statuses = [a.status_code for a in answers]
    assert statuses.count(422) >= burst and 429 in statuses, statuses  # (a token refills every 0.5 s)
    refused = next(a for a in answers if a.status_code == 429)
    assert "too many requests: at most" in refused.json()["detail"]
    assert int(refused.headers["retry-after"]) >= 1
    assert _join(url, body, "192.0.2.41").status_code == 422  # another visitor: its own bucket
    lines = [r for r in caplog.records if r.name == "spectr_gbv.gate" and "192.0.2.40" in r.getMessage()]
    # one line per visitor and reason (10 s apart at most): the first wrong count, the first over the rate
    assert [("HTTP 422" in r.getMessage(), "HTTP 429" in r.getMessage()) for r in lines] == [(True, False), (False, True)]
