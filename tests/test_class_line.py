"""A line that holds a class: visitors are sessions within an address, turns go round-robin across addresses
then sessions, a request waits while its estimated start is within the bound, and identical requests are
served once (components.serving.line, components.serving.shared_runs)."""

from __future__ import annotations

import dataclasses
import random
import threading
import time

import gradio as gr

import pytest

from components.serving.line import Line, Refused, Ticket, Visitor, next_up, place_text, round_robin_order
from components.serving.shared_runs import SharedRuns, latest

pytestmark = pytest.mark.unit


def _line(slots=2, waiting=128, per_session_waiting=1, per_address=128, max_wait_s=180.0, clock=None):
    return Line("model", slots, waiting, per_session_waiting, per_address, max_wait_s,
                **({"clock": clock} if clock else {}))


def _waiting(line: Line, *tickets: Ticket) -> None:
    """Put tickets in the line as if they had joined and were waiting (no threads)."""
    with line._changed:
        line._waiting.extend(tickets)
        line._touch()


def _running(line: Line, visitor: Visitor, cost_s: float, started: float) -> Ticket:
    ticket = Ticket(visitor, lambda: True, cost_s, started=started)
    with line._changed:
        line._running.append(ticket)
        line._touch()
    return ticket


# ------------------------------------------------------------------------ whose turn


def test_turns_go_round_robin_across_addresses_then_sessions():
    school = [Ticket(Visitor("school", f"s{i}"), lambda: True) for i in range(4)]
    home = Ticket(Visitor("home", "h"), lambda: True)
    waiting = [*school, home]  # the school's four arrived first
    served: dict = {}

    def turn(key):
        return served.get(key, -1)

    order = []
    for n in range(5):
        ticket = next_up(waiting, set(), turn, turn)
        order.append(ticket.visitor)
        waiting.remove(ticket)
        served[ticket.visitor.address] = served[ticket.visitor] = n
    # the home address gets the second turn, not the fifth; the school's sessions in their order
    assert order == [school[0].visitor, home.visitor, school[1].visitor, school[2].visitor, school[3].visitor]


def test_the_fixed_order_the_estimates_use_is_the_order_the_turns_give():
    rng = random.Random(7)
    for _ in range(200):
        waiting = [Ticket(Visitor(f"a{rng.randrange(4)}", f"s{rng.randrange(6)}"), lambda: True, arrived=float(i))
                   for i in range(rng.randrange(1, 25))]
        served = {key: rng.randrange(-1, 5) for key in {t.visitor.address for t in waiting} | {t.visitor for t in waiting}}
        turns = dict(served)
        dynamic, left, n = [], list(waiting), 100
        while left:  # next_up one at a time, each start updating the turns (no session busy)
            ticket = next_up(left, set(), lambda k: turns.get(k, -1), lambda k: turns.get(k, -1))
            dynamic.append(ticket)
            left.remove(ticket)
            turns[ticket.visitor.address] = turns[ticket.visitor] = n
            n += 1
        fixed = round_robin_order(waiting, lambda k: served.get(k, -1), lambda k: served.get(k, -1))
        assert [t.visitor.address for t in fixed] == [t.visitor.address for t in dynamic]


def test_a_session_with_a_run_going_waits_for_it():
    mine = Ticket(Visitor("a", "s"), lambda: True)
    other = Ticket(Visitor("a", "t"), lambda: True)
    assert next_up([mine, other], {Visitor("a", "s")}, lambda _: -1, lambda _: -1) is other
    assert next_up([mine], {Visitor("a", "s")}, lambda _: -1, lambda _: -1) is None


def test_a_flooding_address_gets_every_other_start_while_another_waits():
    line = _line(slots=1)
    flood = [Ticket(Visitor("flood", f"f{i}"), lambda: True, 1.0) for i in range(20)]
    student = Ticket(Visitor("school", "s"), lambda: True, 1.0)
    _waiting(line, *flood, student)  # the student arrived last, behind twenty
    place = line._schedule(line._waiting)[student]
    assert place.position == 2  # the flood's first, then the other address
    assert place.start_s == pytest.approx(1.0)


# ------------------------------------------------------------------------ what a line holds


def test_an_address_holds_a_class_of_60_each_with_one_going_and_one_waiting():
    line = _line(slots=120, per_address=128)
    for student in range(60):
        for _ in range(2):
            line._admit(Ticket(Visitor("school", f"s{student}"), lambda: True, 0.0))
            line._waiting.append(Ticket(Visitor("school", f"s{student}"), lambda: True, 0.0))
    assert len(line._waiting) == 120


def test_a_third_request_of_one_page_is_refused_with_the_reason():
    line = _line()
    page = Visitor("school", "s")
    _running(line, page, 1.0, time.monotonic())
    _waiting(line, Ticket(page, lambda: True))
    with pytest.raises(Refused, match="this page already has 2 model runs going or waiting .at most 2 per page"):
        line._admit(Ticket(page, lambda: True))
    line._admit(Ticket(Visitor("school", "t"), lambda: True))  # a classmate is admitted


def test_one_address_is_bounded_whatever_its_sessions_and_another_address_is_not():
    line = _line(slots=1, per_address=5)
    _waiting(line, *[Ticket(Visitor("flood", f"f{i}"), lambda: True, 0.1) for i in range(5)])
    with pytest.raises(Refused, match="your network address already has 5 model runs"):
        line._admit(Ticket(Visitor("flood", "new"), lambda: True))
    line._admit(Ticket(Visitor("school", "s"), lambda: True))


def test_a_start_estimated_past_the_bound_is_refused_with_the_estimate():
    now = [100.0]
    line = _line(slots=2, max_wait_s=10, clock=lambda: now[0])
    _running(line, Visitor("a", "1"), 4.0, started=100.0)
    _running(line, Visitor("b", "2"), 4.0, started=100.0)
    _waiting(line, *[Ticket(Visitor(f"c{i}", "x"), lambda: True, 4.0) for i in range(3)])
    # slots free at 4, 4; then 8, 8 (two of the three waiting), so a fourth request starts at 8 s: admitted
    line._admit(Ticket(Visitor("d", "y"), lambda: True, 4.0))
    _waiting(line, Ticket(Visitor("d", "y"), lambda: True, 4.0))
    with pytest.raises(Refused, match="would start this one in about 12 s") as refused:
        line._admit(Ticket(Visitor("e", "z"), lambda: True, 4.0))
    assert refused.value.wait_s == pytest.approx(12.0)


def test_places_and_estimates_replay_the_turns_on_the_costs():
    now = [0.0]
    line = _line(slots=2, clock=lambda: now[0])
    _running(line, Visitor("a", "1"), 3.0, started=0.0)
    now[0] = 1.0  # 2 s left on the running run; the other slot is free
    tickets = [Ticket(Visitor(f"v{i}", "s"), lambda: True, 1.0) for i in range(4)]
    _waiting(line, *tickets)
    places = line._schedule(line._waiting)
    assert [places[t].position for t in tickets] == [1, 2, 3, 4]
    assert [places[t].start_s for t in tickets] == pytest.approx([0.0, 1.0, 2.0, 2.0])
    text = place_text("model", places[tickets[2]])
    assert text == "In line for a model slot: 3rd of 4 waiting, 1 running; estimated start in about 2 s"
    now[0] = 10.0  # the running run is past its estimate: it is taken to need a little more, not a negative time
    assert line._schedule(line._waiting)[tickets[1]].start_s == pytest.approx(0.5)


def test_a_waiting_request_reports_its_place_then_starts_when_a_slot_frees():
    line = _line(slots=1)
    first = line.enter(Visitor("a", "1"), lambda: True, 0.5)
    reports, started = [], []

    def second():
        started.append(line.enter(Visitor("b", "2"), lambda: True, 0.5, report=reports.append))

    waiter = threading.Thread(target=second)
    waiter.start()
    time.sleep(0.4)
    assert not started and reports and reports[0].startswith("In line for a model slot: 1st of 1 waiting, 1 running")
    line.leave(first)
    waiter.join(5)
    assert started and line.counts() == (1, 0)


# ------------------------------------------------------------------------ identical requests


def test_identical_requests_join_the_running_run_then_read_the_finished_one():
    runs = SharedRuns(size=2, ttl_s=60)
    shared, leads = runs.lead_or_follow("k")
    joined, leads_too = runs.lead_or_follow("k")
    assert leads and not leads_too and joined is shared
    got = []
    follower = threading.Thread(target=lambda: got.extend(joined.follow()))
    follower.start()
    for update in ("a", "b", "c"):
        shared.add(update)
    runs.end("k", shared, failed=False)
    follower.join(5)
    assert got == ["a", "b", "c"]
    later, leads_later = runs.lead_or_follow("k")
    assert not leads_later and list(later.follow()) == ["a", "b", "c"] and later.followers == 2


@dataclasses.dataclass
class _Shown:  # a view's outputs, as the served views yield them (NamedOutputs are dataclasses)
    text: object
    chart: object
    note: object


def _page_after(updates) -> dict:
    """What each output shows after the updates in turn, as Gradio applies them: a skip leaves it, an
    update sets the properties it names, a plain value sets the value."""
    page = {name: {} for name in ("text", "chart", "note")}
    for update in updates:
        for name in page:
            value = getattr(update, name)
            if isinstance(value, dict) and value.get("__type__") == "update":
                page[name].update({k: v for k, v in value.items() if k != "__type__"})
            else:
                page[name]["value"] = value
    return page


def test_updates_handed_over_at_once_reach_a_follower_as_one_that_leaves_the_page_the_same():
    runs = SharedRuns()
    shared, _ = runs.lead_or_follow("k")
    updates = [_Shown("run 1 of 3", gr.skip(), gr.update(visible=True)), _Shown("run 2 of 3", "figure 2", gr.skip()),
               _Shown(gr.skip(), "figure 3", gr.update(value="done"))]
    for update in updates:
        shared.add(update)
    runs.end("k", shared, failed=False)
    got = list(runs.lead_or_follow("k")[0].follow())
    assert got == [_Shown("run 2 of 3", "figure 3", {"__type__": "update", "visible": True, "value": "done"})]

    rng = random.Random(7)  # any sequence: one merged update leaves every output as the sequence does
    choices = [gr.skip, lambda: "v%d" % rng.randrange(5), lambda: gr.update(visible=rng.random() < 0.5),
               lambda: gr.update(value="u%d" % rng.randrange(5)), lambda: gr.update(value="w", interactive=False)]
    for _ in range(300):
        sequence = [_Shown(*(rng.choice(choices)() for _ in range(3))) for _ in range(rng.randrange(1, 6))]
        assert _page_after([latest(sequence)]) == _page_after(sequence), sequence
    assert latest(["a", "b"]) is None  # not outputs it knows: handed over one by one


def test_a_session_asking_again_for_its_own_finished_run_runs_it_again():
    runs = SharedRuns()
    shared, _ = runs.lead_or_follow("k", "teacher")
    runs.end("k", shared, failed=False)
    assert not runs.lead_or_follow("k", "student")[1]  # a classmate reads it
    assert runs.lead_or_follow("k", "teacher")[1] and runs.lead_or_follow("k", "student")[1] is False


def test_a_run_cut_short_is_not_shared_and_its_followers_run_on_their_own():
    runs = SharedRuns()
    shared, _ = runs.lead_or_follow("k")
    joined, _ = runs.lead_or_follow("k")
    shared.add("a")
    runs.end("k", shared, failed=True)
    with pytest.raises(LookupError):
        list(joined.follow())
    assert runs.lead_or_follow("k")[1]  # the next identical request runs it again


def test_finished_runs_are_bounded_in_count_and_time():
    now = [0.0]
    runs = SharedRuns(size=2, ttl_s=10, clock=lambda: now[0])
    for key in "abc":
        shared, _ = runs.lead_or_follow(key)
        runs.end(key, shared, failed=False)
    assert runs.counts() == (0, 2) and runs.lead_or_follow("a")[1]  # "a" was dropped for "c"
    now[0] = 11.0
    assert runs.lead_or_follow("b")[1]  # expired
