"""One line of runs: `slots` at once, the rest waiting their turn, fairly, with an estimated start.

Whose turn it is. A visitor is a browser session within an address (`Visitor`): a class behind
one school address is thirty visitors, not one. A free slot goes round-robin across addresses,
then across an address's sessions: the waiting request whose address was served longest ago
(never served counts as longest), among those the one whose session was served longest ago,
then the oldest. A session with a run going waits for it: one run at a time per session.
So one address flooding the line gets every other start at most while another address waits,
and one session flooding gets its turn among its own address's sessions.

What a line holds (memory stays bounded whatever the traffic):
* per session `per_session_waiting` runs waiting beyond its one going;
* per address `per_address` runs going and waiting, all its sessions together (a class of 60
  sessions, each with one going and one waiting, fits the default 128);
* `waiting_cap` waiting in all;
* a request waits only while its estimated start is within `max_wait_s`; past it, it is
  refused at once with the estimate (`Refused.wait_s`), so the handler can say what to do instead.

The estimate replays the rule above on the costs each request was given at the door (the same
cost model as the budget check): a running run is taken to need what is left of its estimate
(at least `OVERRUN_S`), and each waiting one starts on the slot that frees first. It is
recomputed when the line changes, and at most every `PLAN_EVERY_S` while it does not.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

LOG = logging.getLogger("spectr_gbv.visitors")
POLL_S = 0.25  # how often a waiting request looks at its visitor and the slots
PLAN_EVERY_S = 1.0  # the positions and estimates are recomputed at least this often
OVERRUN_S = 0.5  # what a run already past its estimate is still taken to need
REPORT_EVERY_S = 2.0  # a waiting request's place is reported when it moves, and at least this often
REMEMBERED = 10_000  # addresses and sessions whose last turn is remembered (the least recent forgotten first)


class Refused(ValueError):
    """A request the line does not take (a cap, or a start estimated past the bound): said at once."""

    def __init__(self, message: str, wait_s: float | None = None):
        super().__init__(message)
        self.wait_s = wait_s  # the estimated start, where that is why


class ClientGone(RuntimeError):
    """The visitor left while its request waited."""


@dataclass(frozen=True)
class Visitor:
    address: str  # as the proxy reports it (components.serving.visitors.visitor_of)
    session: str  # Gradio's session hash: one browser tab, one gradio_client

    def __str__(self) -> str:
        return f"{self.address}/{self.session[:8]}"


@dataclass(eq=False)
class Ticket:
    visitor: Visitor
    alive: Callable[[], bool]
    cost_s: float = 1.0  # the run's estimated seconds
    executing: bool = True  # a streamed run between two steps is not executing
    done: bool = False
    steps: object = None  # a streamed run's generator, closed when the slot is taken back
    arrived: float = field(default_factory=time.monotonic)
    started: float | None = None


@dataclass(frozen=True)
class Place:
    """Where a waiting request stands: 1 is next; `start_s` from now."""

    position: int
    waiting: int
    running: int
    start_s: float


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def about_seconds(seconds: float) -> str:
    if seconds < 1.5:
        return "about a second"
    if seconds < 90:
        return f"about {round(seconds)} s"
    return f"about {seconds / 60:.1f} min"


def place_text(name: str, place: Place) -> str:
    """What a waiting visitor is shown, updated while they wait."""
    return (f"In line for a {name} slot: {_ordinal(place.position)} of {place.waiting} waiting, "
            f"{place.running} running; estimated start in {about_seconds(place.start_s)}")


class _Turns:
    """When each key last got a slot (a counter, not a clock), bounded: the least recent is forgotten first."""

    def __init__(self):
        self._last: OrderedDict[object, int] = OrderedDict()

    def of(self, key) -> int:
        return self._last.get(key, -1)

    def served(self, key, turn: int) -> None:
        self._last.pop(key, None)
        self._last[key] = turn
        while len(self._last) > REMEMBERED:
            self._last.popitem(last=False)

    def copy(self) -> dict:
        return dict(self._last)


def next_up(waiting: list[Ticket], busy_sessions: set[Visitor], address_turn: Callable, session_turn: Callable):
    """The waiting ticket whose turn it is: round-robin across addresses, then sessions, then arrival.
    None when every waiting ticket's session already has a run going."""
    best, best_key = None, None
    for order, ticket in enumerate(waiting):
        if ticket.visitor in busy_sessions:
            continue
        key = (address_turn(ticket.visitor.address), session_turn(ticket.visitor), order)
        if best_key is None or key < best_key:
            best, best_key = ticket, key
    return best


def round_robin_order(waiting: list[Ticket], address_turn: Callable, session_turn: Callable) -> list[Ticket]:
    """The order `next_up` would start `waiting` in if no session were busy, in O(n log n): an address's j-th
    request goes in round j, and each round takes the addresses in the order of the first (the one they had
    before any was served again); within an address, its sessions' k-th requests go in round k, likewise."""
    by_session: dict[Visitor, list[Ticket]] = {}
    for ticket in waiting:
        by_session.setdefault(ticket.visitor, []).append(ticket)
    by_address: dict[str, list[tuple]] = {}
    for visitor, tickets in by_session.items():
        session_rank = (session_turn(visitor), tickets[0].arrived, id(tickets[0]))
        for k, ticket in enumerate(tickets):
            by_address.setdefault(visitor.address, []).append(((k, session_rank), ticket))
    order = []
    for address, items in by_address.items():
        items.sort(key=lambda item: item[0])
        address_rank = (address_turn(address), items[0][0][1])  # its first request's session rank breaks ties
        order.extend(((j, address_rank), ticket) for j, (_, ticket) in enumerate(items))
    order.sort(key=lambda item: item[0])
    return [ticket for _, ticket in order]


class Line:
    """A line of runs (module docstring): `slots` at once, fair turns, bounded, with estimated starts."""

    def __init__(self, name: str, slots: int, waiting: int, per_session_waiting: int, per_address: int,
                 max_wait_s: float, clock: Callable[[], float] = time.monotonic):
        self.name, self.slots, self.waiting_cap = name, slots, waiting
        self.per_session_waiting, self.per_address, self.max_wait_s = per_session_waiting, per_address, max_wait_s
        self.clock = clock
        self._changed = threading.Condition()
        self._running: list[Ticket] = []
        self._waiting: list[Ticket] = []
        self._turn = itertools.count()
        self._address_turns, self._session_turns = _Turns(), _Turns()
        self._plan: dict[Ticket, Place] = {}
        self._planned_at = -float("inf")
        self._version = self._planned_version = 0
        self._next: tuple[int, Ticket | None] = (-1, None)  # (version, the ticket whose turn it is)

    # ------------------------------------------------------------------ reading

    def counts(self) -> tuple[int, int]:
        with self._changed:
            return len(self._running), len(self._waiting)

    # ------------------------------------------------------------------ entering and leaving

    def enter(self, visitor: Visitor, alive: Callable[[], bool], cost_s: float = 1.0,
              report: Callable[[str], None] = lambda text: None) -> Ticket:
        """Wait for this request's turn, reporting its place; Refused at once if the line will not take it,
        ClientGone if the visitor left while waiting."""
        ticket = Ticket(visitor, alive, max(float(cost_s), 0.0), arrived=self.clock())
        with self._changed:
            self._take_back_abandoned()
            self._admit(ticket)
            self._waiting.append(ticket)
            self._touch()
            reported, reported_at = None, -float("inf")
            while not self._may_start(ticket):
                if not alive():
                    self._waiting.remove(ticket)
                    self._touch()
                    raise ClientGone(f"the visitor left while waiting for a {self.name} slot")
                place = self._places().get(ticket)
                # Reported when its position moves, else every REPORT_EVERY_S: each report is a message
                # through the server's event loop, and a full line holds a hundred waiting requests.
                if place is not None and (reported is None or place.position != reported.position
                                          or self.clock() - reported_at >= REPORT_EVERY_S):
                    report(place_text(self.name, place))
                    reported, reported_at = place, self.clock()
                self._changed.wait(POLL_S)
                self._take_back_abandoned()
            self._waiting.remove(ticket)
            ticket.started = self.clock()
            self._running.append(ticket)
            turn = next(self._turn)
            self._address_turns.served(visitor.address, turn)
            self._session_turns.served(visitor, turn)
            self._touch()  # the next in line may be able to start too
            return ticket

    def leave(self, ticket: Ticket) -> None:
        with self._changed:
            self._release(ticket)

    def _admit(self, ticket: Ticket) -> None:
        """Refused unless the line may hold `ticket` (called with the lock held)."""
        visitor, everyone = ticket.visitor, self._running + self._waiting
        mine = sum(t.visitor == visitor for t in everyone)
        if mine >= 1 + self.per_session_waiting:
            raise Refused(f"this page already has {mine} {self.name} runs going or waiting (at most "
                          f"{1 + self.per_session_waiting} per page): wait for one to finish")
        from_address = sum(t.visitor.address == visitor.address for t in everyone)
        if from_address >= self.per_address:
            raise Refused(f"your network address already has {from_address} {self.name} runs going or waiting "
                          f"(at most {self.per_address} per address): wait for some to finish")
        if len(self._waiting) >= self.waiting_cap and not self._could_start_now(ticket):
            raise Refused(f"the line for {self.name} runs is full ({self.waiting_cap} waiting, at most)")
        if self._waiting or len(self._running) >= self.slots:
            start = self._schedule(self._waiting + [ticket])[ticket].start_s
            if start > self.max_wait_s:
                raise Refused(f"the line for {self.name} runs would start this one in {about_seconds(start)}, "
                              f"more than this server's {about_seconds(self.max_wait_s)} of waiting", wait_s=start)

    def _could_start_now(self, ticket: Ticket) -> bool:
        return len(self._running) < self.slots and ticket.visitor not in {t.visitor for t in self._running}

    def _release(self, ticket: Ticket) -> None:
        if not ticket.done:
            ticket.done = True
            self._running.remove(ticket)
            self._touch()

    def _touch(self) -> None:
        self._version += 1
        self._changed.notify_all()

    def _may_start(self, ticket: Ticket) -> bool:
        if len(self._running) >= self.slots:
            return False
        if self._next[0] != self._version:  # one pick per change, however many waiting requests ask
            busy = {t.visitor for t in self._running}
            self._next = (self._version, next_up(self._waiting, busy, self._address_turns.of, self._session_turns.of))
        return self._next[1] is ticket

    def _take_back_abandoned(self) -> None:
        """Slots of streamed runs whose visitor left between two steps (Gradio will not ask for more)."""
        for ticket in list(self._running):
            if not ticket.executing and not ticket.alive():
                self._release(ticket)
                LOG.info("%s slot taken back from a streamed run whose visitor left", self.name)
                steps, ticket.steps = ticket.steps, None
                if steps is not None:
                    try:
                        steps.close()  # frees the run's records (Gradio keeps the paused generator)
                    except ValueError:  # it started a step after all: it ends at its next tick
                        pass

    # ------------------------------------------------------------------ the estimate

    def _places(self) -> dict[Ticket, Place]:
        now = self.clock()
        stale = now - self._planned_at
        if (self._planned_version != self._version and stale > POLL_S) or stale > PLAN_EVERY_S:
            self._plan = self._schedule(self._waiting)
            self._planned_at, self._planned_version = now, self._version
        return self._plan

    def _schedule(self, waiting: list[Ticket]) -> dict[Ticket, Place]:
        """Each waiting ticket's place: the turn rule replayed on the estimated costs (called with the lock held).
        The round-robin order is fixed first (`round_robin_order`); a ticket whose session still has a run
        going when a slot frees lets the next in that order go first."""
        now = self.clock()
        busy_until = {t.visitor: max(t.cost_s - (now - (now if t.started is None else t.started)), OVERRUN_S)
                      for t in self._running}
        slots = list(busy_until.values()) + [0.0] * max(self.slots - len(self._running), 0)
        heapq.heapify(slots)
        order = round_robin_order(waiting, self._address_turns.of, self._session_turns.of)
        places, position = {}, 0
        while order and slots:
            free_at = heapq.heappop(slots)
            index = next((i for i, t in enumerate(order) if busy_until.get(t.visitor, 0.0) <= free_at), None)
            if index is None:  # every waiting session has a run going: this slot frees when the first of them ends
                heapq.heappush(slots, min(busy_until[t.visitor] for t in order))
                continue
            ticket = order.pop(index)
            position += 1
            places[ticket] = Place(position, len(waiting), len(self._running), free_at)
            end = free_at + max(ticket.cost_s, 0.0)
            busy_until[ticket.visitor] = end
            heapq.heappush(slots, end)
        return places
