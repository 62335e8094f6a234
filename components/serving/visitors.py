"""Fair turns in public: who is asking, whether they are still there, and whose turn it is.

Gradio's queue knows one concurrency group per event, but one event (say /compare) serves
both a teaching pair (milliseconds of lookup tables) and a real model (seconds to minutes).
So every public handler passes through `served`, which picks the request's own line:

* the **model line**: `model_slots` runs at once (SPECTR_GBV_CONCURRENCY), at most
  `model_waiting` waiting (SPECTR_GBV_QUEUE_SIZE);
* the **teaching line** (toy, two-token): its own `teaching_slots`, so a teaching request
  never waits behind a model run;
* in each line a visitor has at most one run going and `visitor_waiting` waiting
  (SPECTR_GBV_VISITOR_WAITING); more is refused at once, with the reason. A free slot goes
  to the first waiting request whose visitor has nothing running, so one visitor's backlog
  never holds up another visitor.

A visitor is the client address as the proxy reports it: on a Space (SPACE_ID set) the
address Hugging Face's proxy appended to X-Forwarded-For, the entry `proxy_hops` from the
right (SPECTR_GBV_PROXY_HOPS; entries further left are the client's own claim and are
ignored); elsewhere the socket's address. The session hash is the client's choice, so it is
not the key.

A visitor who leaves is noticed: Gradio marks the request's queue event dead when its
event stream closes, a waiting request then leaves the line, and a running one stops at its
next budget tick (components.limits.watching_client). A streamed run that Gradio stops
iterating gives its slot back as soon as its visitor is gone.

Gradio's own group for these events gets a worker for every slot and waiting place of both
lines (`gradio_workers`), so requests start at once and wait here, where the rules are.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from spectr_gbv.pairs import PAIRS, is_teaching, pair_key_of

from . import limits
from .limits import ClientGone, _env_int, watching_client
from .request import Inputs
from .steps import each_step

LOG = logging.getLogger("spectr_gbv.visitors")
POLL_S = 0.25  # how often a waiting request looks at its visitor and the slots


@dataclass(frozen=True)
class Fairness:
    model_slots: int  # model runs at once
    model_waiting: int  # model runs waiting, all visitors together
    teaching_slots: int  # teaching-pair runs at once
    teaching_waiting: int
    visitor_waiting: int  # per visitor and line, beyond its one running request
    proxy_hops: int  # trusted proxies in front of the app; 0: the socket's address is the visitor
    # At the door of Gradio's queue (components.serving.gate), per visitor, all events together:
    visitor_events: int = 6  # events in Gradio's queue, waiting or running (the lines hold 2 x 3 of them)
    joins_per_minute: int = 120  # joins refilled a minute (the explorer's autoplay sends 40)
    join_burst: int = 10  # joins at once

    @classmethod
    def from_env(cls) -> "Fairness":
        on_a_space = bool(os.environ.get("SPACE_ID"))
        return cls(
            model_slots=_env_int("SPECTR_GBV_CONCURRENCY", 2),
            model_waiting=_env_int("SPECTR_GBV_QUEUE_SIZE", 8),
            teaching_slots=_env_int("SPECTR_GBV_TEACHING_CONCURRENCY", 4),
            teaching_waiting=_env_int("SPECTR_GBV_TEACHING_QUEUE_SIZE", 16),
            visitor_waiting=_env_int("SPECTR_GBV_VISITOR_WAITING", 2),
            proxy_hops=int(os.environ.get("SPECTR_GBV_PROXY_HOPS", "1" if on_a_space else "0")),
            visitor_events=_env_int("SPECTR_GBV_VISITOR_EVENTS", 6),
            joins_per_minute=_env_int("SPECTR_GBV_VISITOR_JOINS_PER_MINUTE", 120),
            join_burst=_env_int("SPECTR_GBV_VISITOR_JOIN_BURST", 10),
        )

    @property
    def gradio_workers(self) -> int:
        """Gradio's concurrency for the public events: one worker per slot and waiting place."""
        return self.model_slots + self.model_waiting + self.teaching_slots + self.teaching_waiting


class Refused(ValueError):
    """A request the line does not take (the visitor's cap, or the line is full): said at once."""


# ------------------------------------------------------------------------- who is asking


def visitor_of(request, proxy_hops: int) -> str:
    """The visitor's address: X-Forwarded-For's entry `proxy_hops` from the right, else the socket's.

    The entries of every X-Forwarded-For line are joined in order (as uvicorn does): a client
    that sends a line of its own only adds entries further left, which are never read."""
    if request is None:
        return "local"
    if proxy_hops > 0:
        forwarded = [part.strip() for line in _header_lines(request.headers, "x-forwarded-for")
                     for part in line.split(",") if part.strip()]
        if len(forwarded) >= proxy_hops:
            return forwarded[-proxy_hops]
    client = getattr(request, "client", None)
    return getattr(client, "host", None) or "unknown"


def _header_lines(headers, name: str) -> list[str]:
    """Every line of header `name`: Starlette's headers keep them all; a plain dict (a pickled request) has one."""
    if hasattr(headers, "getlist"):
        return headers.getlist(name)
    value = headers.get(name) if headers is not None else None
    return [value] if value else []


def _gradio_event():
    """The queue event of the request this thread is serving (Gradio's context), or None."""
    from gradio.context import LocalContext

    blocks, event_id = LocalContext.blocks.get(None), LocalContext.event_id.get(None)
    queue = getattr(blocks, "_queue", None)
    if queue is None or event_id is None:
        return None
    for job in list(queue.active_jobs):
        for event in job or []:
            if event._id == event_id:
                return event
    return None


def _current_request():
    from gradio.context import LocalContext

    return LocalContext.request.get(None)


def _report(text: str) -> None:
    """Show `text` as the request's progress (best effort; also wakes Gradio's event stream)."""
    from gradio.helpers import Progress

    try:
        Progress()(None, desc=text)
    except Exception:  # noqa: BLE001 - progress is a courtesy
        pass


# ---------------------------------------------------------------------------------- lines


@dataclass(eq=False)
class Ticket:
    visitor: str
    alive: Callable[[], bool]
    executing: bool = True  # a streamed run between two steps is not executing
    done: bool = False
    steps: object = None  # a streamed run's generator, closed when the slot is taken back
    arrived: float = field(default_factory=time.monotonic)


class Line:
    """`slots` runs at once; per visitor one running and `per_visitor_waiting` waiting; `waiting` in all."""

    def __init__(self, name: str, slots: int, waiting: int, per_visitor_waiting: int):
        self.name, self.slots, self.waiting_cap, self.per_visitor_waiting = name, slots, waiting, per_visitor_waiting
        self._changed = threading.Condition()
        self._running: list[Ticket] = []
        self._waiting: list[Ticket] = []

    def counts(self) -> tuple[int, int]:
        with self._changed:
            return len(self._running), len(self._waiting)

    def enter(self, visitor: str, alive: Callable[[], bool], report: Callable[[str], None] = _report) -> Ticket:
        """Wait for this request's turn; Refused at once if the line will not take it, ClientGone if the visitor left."""
        ticket = Ticket(visitor, alive)
        with self._changed:
            self._take_back_abandoned()
            mine = sum(t.visitor == visitor for t in self._running + self._waiting)
            if mine >= 1 + self.per_visitor_waiting:
                raise Refused(f"you already have {mine} {self.name} runs going or waiting (at most "
                              f"{1 + self.per_visitor_waiting} per visitor): "
                              "wait for one to finish")
            self._waiting.append(ticket)
            if not self._may_start(ticket) and len(self._waiting) > self.waiting_cap:
                self._waiting.remove(ticket)
                raise Refused(f"the line for {self.name} runs is full ({self.waiting_cap} waiting, "
                              "at most): try again in a minute")
            while not self._may_start(ticket):
                if not alive():
                    self._waiting.remove(ticket)
                    self._changed.notify_all()
                    raise ClientGone(f"the visitor left while waiting for a {self.name} slot")
                ahead = self._waiting.index(ticket)
                report(f"waiting for a {self.name} slot ({len(self._running)} running, {ahead} ahead)")
                self._changed.wait(POLL_S)
                self._take_back_abandoned()
            self._waiting.remove(ticket)
            self._running.append(ticket)
            self._changed.notify_all()  # the next in line may be able to start too
            return ticket

    def leave(self, ticket: Ticket) -> None:
        with self._changed:
            self._release(ticket)

    def _release(self, ticket: Ticket) -> None:
        if not ticket.done:
            ticket.done = True
            self._running.remove(ticket)
            self._changed.notify_all()

    def _may_start(self, ticket: Ticket) -> bool:
        if len(self._running) >= self.slots:
            return False
        busy = {t.visitor for t in self._running}
        first = next((t for t in self._waiting if t.visitor not in busy), None)
        return first is ticket

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


FAIR = Fairness.from_env()
LINES: dict[str, Line] = {}


def configure(fairness: Fairness | None = None) -> Fairness:
    """(Re)build the lines (at launch; tests pass their own Fairness)."""
    global FAIR
    FAIR = fairness or FAIR
    LINES.clear()
    LINES["model"] = Line("model", FAIR.model_slots, FAIR.model_waiting, FAIR.visitor_waiting)
    LINES["teaching"] = Line("teaching-pair", FAIR.teaching_slots, FAIR.teaching_waiting, FAIR.visitor_waiting)
    return FAIR


configure()


def line_for(pair_key) -> Line | None:
    """The line a request on `pair_key` waits in; None for a key no pair has (refused at once by the handler)."""
    if not isinstance(pair_key, str):
        return None
    key = pair_key_of(pair_key)
    if is_teaching(key):
        return LINES["teaching"]
    if key in PAIRS or (limits.LIMITS.allow_any_model and "," in key):
        return LINES["model"]
    return None


# ------------------------------------------------------------------------------ decorator


def served(translate: Callable[[BaseException, str], BaseException], inputs: Inputs) -> Callable:
    """Decorator factory: the handler (its parameters: `inputs`) waits its turn in the line of its
    RunRequest's pair, and its Budget watches the visitor. `translate` turns a refusal into the user's error."""

    def decorate(fn):
        def admit(args, kwargs):
            line = line_for(inputs.request(args, kwargs, partial=True).pair_key)
            event = _gradio_event()
            alive = (lambda: event.alive) if event is not None else (lambda: True)
            if line is None or event is None:  # no pair, or not a request Gradio serves (a test's direct call)
                return None, None, alive
            visitor = visitor_of(_current_request(), FAIR.proxy_hops)
            try:
                return line, line.enter(visitor, alive), alive
            except (Refused, ClientGone) as error:
                raise translate(error, fn.__name__) from None

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def stream(*args, **kwargs):
                line, ticket, alive = admit(args, kwargs)
                steps = fn(*args, **kwargs)
                if ticket is not None:
                    ticket.steps = steps

                @contextlib.contextmanager
                def executing():  # a step: the ticket is executing and its visitor watched
                    if ticket is not None:
                        ticket.executing = True
                    try:
                        with watching_client(alive):
                            yield
                    finally:
                        if ticket is not None:
                            ticket.executing = False

                try:
                    yield from each_step(steps, executing, stop=lambda: ticket is not None and ticket.done)
                finally:
                    if ticket is not None:
                        line.leave(ticket)

            return stream

        @functools.wraps(fn)
        def call(*args, **kwargs):
            line, ticket, alive = admit(args, kwargs)
            try:
                with watching_client(alive):
                    return fn(*args, **kwargs)
            finally:
                if ticket is not None:
                    line.leave(ticket)

        return call

    return decorate


def threads_per_run(cores: int, model_slots: int) -> int:
    """torch threads for one model run: the cores shared by the runs allowed at once (2 cores, 2 runs: one each).
    Torch's default (every core per run) oversubscribes them when two visitors' runs overlap."""
    return max(1, cores // max(model_slots, 1))
