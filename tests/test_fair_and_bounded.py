"""Fair and bounded in public (issue 17): budgets in every phase, visitors who leave, memory, fair turns.

Budget tests go through the app's handlers in-process on the Toy world. Server tests run the
app on loopback; where a "real model" is needed, the default pair is replaced by a stand-in
(the Toy world's tables behind a model that sleeps, or burns CPU, on every call), so the
tests measure the app's rules, not this machine's speed. Visitors are told apart by the
X-Forwarded-For address, as on a Space (one trusted proxy hop).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

import gradio as gr
import httpx
import pytest
from gradio_client import Client

import app
import components.serving.limits as limits_module
from app_server import free_port
from components.serving import visitors
from components.tabs import compare, generate, sweep
from components.wiring import inputs, settings
from components.wiring.admission import caps
from components.tabs import fidelity as fidelity_view
from helpers import last, stand_in_pair
from raw_api import call
from spectr_gbv.fidelity import fidelity
from spectr_gbv.pairs import DEFAULT_KEY, get_pair

pytestmark = pytest.mark.slow


# -------------------------------------------------------------- budgets, phase by phase


def test_fidelity_hands_the_budget_to_both_phases():
    """Every decoding iteration and every scoring call of the exact law goes through the caller's hooks."""
    pair = get_pair("toy")
    config = settings.settings(1, 2, 1.0, 1, 0).config("sd", with_theory=False)
    iterations, prefixes = [], []
    result = fidelity(pair.target, pair.draft, pair.encode("the"), config, 30, 2,
                      on_iteration=iterations.append, on_scoring=prefixes.append)
    assert len(iterations) >= 30  # at least one iteration per run
    outcomes = [r.outcome for r in result.rows]
    assert sorted(prefixes) == sorted({o[:i] for o in outcomes for i in range(len(o))})  # one per distinct prefix


def test_the_exact_law_stops_when_its_budget_says_so():
    pair = get_pair("toy")
    config = settings.settings(1, 2, 1.0, 1, 0).config("sd", with_theory=False)
    calls = []

    def stop_at_third(prefix):
        calls.append(prefix)
        if len(calls) == 3:
            raise ValueError("budget spent")

    with pytest.raises(ValueError, match="budget spent"):
        fidelity(pair.target, pair.draft, pair.encode("the"), config, 40, 3, on_scoring=stop_at_third)
    assert len(calls) == 3  # no scoring call after the stop


def _decoding_iterations(runs, tokens, method="sd", L=4):
    pair = get_pair("toy")
    config = settings.settings(1, L, 1.0, 1, 0).config(method, with_theory=False)
    counted = []
    fidelity(pair.target, pair.draft, pair.encode("the"), config, runs, tokens, on_iteration=counted.append)
    return len(counted)


def test_a_fidelity_request_is_stopped_in_its_decoding_phase(limits, monkeypatch):
    """A clock that jumps past the deadline during the first chunk of runs: nothing compared, so the answer is
    the runs that finished, counted, the budget's message and what would fit."""
    limits(seconds=60)
    real, runs_started = fidelity_view.fidelity_sample, []

    def late_third_run(*args, **kwargs):
        runs_started.append(1)
        if len(runs_started) == 3:
            start = time.monotonic()
            monkeypatch.setattr(limits_module.time, "monotonic", lambda: start + 3600)
        return real(*args, **kwargs)

    monkeypatch.setattr(fidelity_view, "fidelity_sample", late_third_run)
    header, figure, data = last(fidelity_view.run_fidelity("toy", "the", "sd", 1, 4, 1.0, 20, 2))
    assert len(runs_started) == 3  # no run after the stop
    assert "stopped at 0 / 20 runs compared: this request ran past this server's limit of 60 s" in header
    assert "2 of 20 runs had finished" in header and "not even 10 runs would fit" in header  # an hour a step
    assert figure is None and data["runs"] == 2 and not data["compared"] and sum(o["count"] for o in data["outcomes"]) == 2


def test_a_fidelity_request_stopped_later_keeps_the_runs_it_compared(limits, monkeypatch):
    """20 runs are compared 10 at a time: stopped in the second chunk, the first chunk's comparison stays."""
    # An estimate that is wrong (any N fits: components.wiring.admission.caps.max_fidelity_runs), so the request
    # starts and the true iterations spend the budget part way through.
    monkeypatch.setattr(caps, "max_fidelity_runs", lambda *args, **kwargs: 10**6)
    needed = _decoding_iterations(20, 2, L=1)
    limits(iterations=needed - 1)
    assert needed - 1 >= 20 + 1  # it starts
    header, figure, data = last(fidelity_view.run_fidelity("toy", "the", "sd", 1, 1, 1.0, 20, 2))
    assert data["runs"] == 10 and f"stopped at 10 / 20 runs: this request needs more than {needed - 1}" in header
    assert data["stopped"] and "10 runs" in figure.layout.title.subtitle.text


def test_a_fidelity_request_is_stopped_in_its_exact_law_phase(limits):
    """The runs fit the iteration budget exactly; the first scoring call of the exact law is one too many:
    the ten runs are counted, not compared, and fewer runs would not fit the iterations either."""
    needed = _decoding_iterations(10, 3, L=2)
    limits(iterations=needed)
    assert needed >= 10 + 1  # the up-front check lets it start
    header, _figure, data = last(fidelity_view.run_fidelity("toy", "the", "sd", 1, 2, 1.0, 10, 3))
    assert f"more than {needed} decoding iterations" in header and "10 of 10 runs had finished" in header
    assert data["runs"] == 10 and not data["compared"] and "not even 10 runs would fit" in header
    limits(iterations=needed + 80)
    assert last(fidelity_view.run_fidelity("toy", "the", "sd", 1, 2, 1.0, 10, 3))[-1]["runs"] == 10


def test_the_exact_law_phase_is_under_the_time_budget(limits, monkeypatch):
    """A clock that jumps past the deadline during the exact law stops the request there."""
    limits(seconds=60)
    real = fidelity_view.fidelity_result

    def jump_in_exact_law(*args, on_scoring, **kwargs):
        start = time.monotonic()

        def late(prefix):
            monkeypatch.setattr(limits_module.time, "monotonic", lambda: start + 3600)
            on_scoring(prefix)

        return real(*args, on_scoring=late, **kwargs)

    monkeypatch.setattr(fidelity_view, "fidelity_result", jump_in_exact_law)
    header, _figure, data = last(fidelity_view.run_fidelity("toy", "the", "sd", 1, 2, 1.0, 20, 2))
    assert "ran past this server's limit of 60 s" in header and data["runs"] == 10 and not data["compared"]


def test_settings_that_cannot_fit_are_refused_before_any_work(limits):
    start = time.perf_counter()
    with pytest.raises(gr.Error, match=r"N = 2000 runs of 3 token\(s\) is over what fits .* not started"):
        last(fidelity_view.run_fidelity("toy", "the", "ar", 1, 2, 1.0, 2000, 3))  # the slider's maximum, plain AR: one token a step
    limits(iterations=100)
    with pytest.raises(gr.Error, match="needs at least 105 decoding iterations"):  # AR 42, 2 methods + coupled 21 each
        last(compare.compare("toy", "the cat", ["sd", "gbv"], 2, 1, 0.7, 42, 0, True))
    with pytest.raises(gr.Error, match="needs at least 125 decoding iterations"):  # AR 50, 3 values x 25 at L = 1
        last(sweep.run_sweep("toy", "the", ["sd"], "K", "1, 2, 3", 2, 1, 0.7, 50, 0))
    assert time.perf_counter() - start < 2


# ------------------------------------------------------------ stand-in model pairs, a server


@pytest.fixture
def server(monkeypatch, free_estimates):
    """start(fairness, cost, seconds) -> (url, demo, calls): the app on loopback, 'default' a stand-in (whose
    runs the estimates, made for the real default pair, do not refuse)."""
    demos = []

    def start(fairness=None, cost="sleep", seconds=0.002):
        calls: list = []
        stand_in = stand_in_pair(cost, seconds, calls)
        real = inputs.get_pair
        monkeypatch.setattr(inputs, "get_pair", lambda key, **kw: stand_in if key == DEFAULT_KEY else real(key, **kw))
        demo = app.build_demo(default_pair="toy", default_prompt="the cat")
        port = free_port()
        app.launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                   fairness=fairness or dataclasses.replace(visitors.FAIR, proxy_hops=1, joins_per_minute=60_000,
                                                            join_burst=1_000))  # the join rate: test_gate.py
        demos.append(demo)
        return f"http://127.0.0.1:{port}/", demo, calls

    yield start
    for demo in demos:
        demo.close()
    visitors.configure(visitors.Fairness.from_env())


# ----------------------------------------------------------------- a visitor who leaves


def _join_and_leave(url: str, api_name: str, args: list, after_s: float) -> None:
    """What a vanished visitor does: join the queue, watch the stream until the run starts, then close it."""
    config = httpx.get(f"{url}config", timeout=10).json()
    fn_index = next(d["id"] for d in config["dependencies"] if d.get("api_name") == api_name)
    session = "leaver" + str(time.monotonic_ns())
    body = {"data": args, "fn_index": fn_index, "session_hash": session, "event_data": None, "trigger_id": None}
    with httpx.Client(timeout=30, headers={"X-Forwarded-For": "198.51.100.7"}) as http:
        http.post(f"{url}gradio_api/queue/join", json=body).raise_for_status()
        with http.stream("GET", f"{url}gradio_api/queue/data", params={"session_hash": session}) as stream:
            started = None
            for line in stream.iter_lines():  # progress and heartbeats arrive at least every 2 s
                if "process_starts" in line:
                    started = time.monotonic()
                if started is not None and time.monotonic() - started >= after_s:
                    break  # leaving the loop closes the stream: the visitor is gone


def test_compare_stops_within_10_s_of_its_visitor_leaving(server):
    url, _demo, calls = server(cost="cpu", seconds=0.002)
    args = ["default", "the cat", ["sd", "gbv", "spectr", "spectr_gbv"], 4, 4, 0.8, 200, 0, True, 1, None, None]
    _join_and_leave(url, "compare", args, after_s=1.0)
    left = time.monotonic()
    assert len(calls) > 50  # it was computing
    while time.monotonic() - left < 10:
        before, cpu = len(calls), time.process_time()
        time.sleep(1.0)
        if len(calls) == before and time.process_time() - cpu < 0.15:
            break  # idle: no model call and (nearly) no CPU for a second
    assert time.monotonic() - left < 10, f"still computing {time.monotonic() - left:.1f} s after the visitor left"
    settled = len(calls)
    time.sleep(1.0)
    assert len(calls) == settled
    assert not any(visitors.LINES["model"].counts())  # its slot is free
    ok, answer = call(url, "/generate", ["default", "the cat", "sd", 2, 2, 0.7, 5, 0])  # and the next request is served
    assert ok, answer


# ---------------------------------------------------------------------- bounded memory


def test_uploads_are_refused_and_monitoring_is_off(server):
    url, _demo, _ = server()
    upload = httpx.post(f"{url}gradio_api/upload", files={"files": ("big.bin", b"x" * 65536)}, timeout=10)
    assert upload.status_code == 413, upload.text
    assert httpx.get(f"{url}monitoring", timeout=10).status_code == 403
    assert httpx.get(f"{url}monitoring/summary", timeout=10).status_code == 403


def test_sessions_beyond_the_capacity_are_dropped(server, limits):
    limits(sessions=10, state_seconds=600)
    url, demo, _ = server()
    for i in range(25):  # every /call request is a session of its own
        ok, answer = call(url, "/generate", ["toy", "the cat", "sd", 1, 2, 0.7, 3, i])
        assert ok, answer
    kept = demo.state_holder.session_data
    assert len(kept) <= 10 and demo.state_holder.capacity == 10
    state = next(b for b in demo.blocks.values() if isinstance(b, gr.State))
    assert state.time_to_live == 600


# ------------------------------------------------------------------------ fair turns


def _client(url: str, address: str) -> Client:
    return Client(url, verbose=False, headers={"X-Forwarded-For": address})


def test_a_toy_request_never_waits_behind_model_runs_and_other_addresses_get_their_turn(server):
    fairness = visitors.Fairness(model_slots=2, model_waiting=8, teaching_slots=4, teaching_waiting=8,
                                 visitor_waiting=1, proxy_hops=1)
    url, _demo, _ = server(fairness, cost="sleep", seconds=0.004)
    line, starts = visitors.LINES["model"], []  # the order in which visitors got a model slot
    enter = line.enter

    def recording_enter(visitor, *args, **kwargs):
        ticket = enter(visitor, *args, **kwargs)
        starts.append(visitor.address)
        return ticket

    line.enter = recording_enter
    heavy = ["default", "the cat", "sd", 2, 4, 0.8, 120, 0]  # about 2 s of sleeping model calls a run
    school = [_client(url, "203.0.113.1") for _ in range(3)]  # three pages behind one address
    a_jobs = [page.submit(*heavy[:-1], seed, api_name="/generate") for seed, page in enumerate(school)]
    time.sleep(0.5)
    b_job = _client(url, "203.0.113.2").submit(*heavy[:-1], 20, api_name="/generate")  # another address
    time.sleep(0.5)
    running, waiting = visitors.LINES["model"].counts()
    assert (running, waiting) == (2, 2)
    again = school[0].submit(*heavy[:-1], 10, api_name="/generate")  # its second: waiting, the page's one place
    time.sleep(0.3)
    with pytest.raises(Exception, match="this page already has 2 model runs going or waiting"):
        school[0].predict(*heavy[:-1], 11, api_name="/generate")  # a third from that page: refused, with the reason
    d_job = _client(url, "203.0.113.4").submit(*heavy[:-1], 21, api_name="/generate")  # another address, admitted
    c = _client(url, "203.0.113.3")
    latencies = []
    for seed in range(8):
        start = time.perf_counter()
        assert c.predict("toy", "the cat", "spectr_gbv", 3, 4, 0.8, 20, seed, api_name="/generate")[2]["new_tokens"] == 20
        latencies.append(time.perf_counter() - start)
    assert visitors.LINES["model"].counts()[0] == 2  # the model slots stayed full meanwhile
    assert sorted(latencies)[-1] < 2.0, latencies
    finished = {}

    def wait(name, job):
        finished[name] = (job.result(timeout=120)[2]["new_tokens"], time.monotonic())

    waiters = [threading.Thread(target=wait, args=item) for item in
               [("a1", a_jobs[0]), ("a2", a_jobs[1]), ("a3", a_jobs[2]), ("a4", again), ("b", b_job), ("d", d_job)]]
    for waiter in waiters:
        waiter.start()
    for waiter in waiters:
        waiter.join(130)
    assert sorted(finished) == ["a1", "a2", "a3", "a4", "b", "d"] and all(n == 120 for n, _ in finished.values())
    # Turns go round-robin across addresses: D, which came after the school's four, starts before the school's
    # third and fourth (asserted on the start order: when runs finish depends on the machine's load)
    school_starts = [i for i, address in enumerate(starts) if address == "203.0.113.1"]
    assert len(school_starts) == 4 and starts.index("203.0.113.4") < school_starts[2], starts


# ----------------------------------------------------------------- words, and the log


def test_a_refused_request_logs_one_line_and_only_an_internal_error_a_traceback(caplog, monkeypatch):
    from spectr_gbv import METHODS

    with caplog.at_level(logging.INFO, logger="spectr_gbv"):
        with pytest.raises(gr.Error) as refused:
            list(generate.generate_stream("toy", "the <b>zebra</b>", "sd", 2, 2, 0.7, 5, 0))
    records = [r for r in caplog.records if r.name.startswith("spectr_gbv")]
    assert len(records) == 1 and records[0].exc_info is None and "generate_stream refused" in records[0].getMessage()
    assert not refused.value.print_exception  # Gradio prints no traceback either
    assert "&lt;b&gt;zebra&lt;/b&gt;" in refused.value.message and "<b>" not in refused.value.message  # shown as text

    def broken(inp, rng):
        raise RuntimeError("boom")

    monkeypatch.setitem(METHODS, "sd", dataclasses.replace(METHODS["sd"], verify=broken))
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="spectr_gbv"):
        with pytest.raises(gr.Error, match="internal error"):
            list(generate.generate_stream("toy", "the cat", "sd", 2, 2, 0.7, 5, 0))
    records = [r for r in caplog.records if r.name.startswith("spectr_gbv")]
    assert len(records) == 1 and records[0].exc_info is not None  # the one traceback, for the operator
