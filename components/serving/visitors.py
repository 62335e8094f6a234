"""Fair turns in public: who is asking, whether they are still there, and whose turn it is.

Gradio's queue knows one concurrency group per event, but one event (say /compare) serves
both a teaching pair (milliseconds of lookup tables) and a real model (seconds to minutes).
So every public handler passes through `served`, which picks the request's own line
(components.serving.line: the rules of a line, its fair turns and its estimated starts):

* the **model line**: `model_slots` runs at once (SPECTR_GBV_CONCURRENCY);
* the **teaching line** (toy, two-token): its own `teaching_slots`, so a teaching request
  never waits behind a model run.

A visitor is a browser session within an address (`line.Visitor`). A class behind one school
address is thirty visitors: each session may have one run going and `visitor_waiting` waiting
per line (SPECTR_GBV_VISITOR_WAITING), an address `address_runs` going and waiting
(SPECTR_GBV_ADDRESS_RUNS: a class of 60 fits), and turns go round-robin across addresses, then
across an address's sessions. A request waits while its estimated start is within `max_wait_s`
(SPECTR_GBV_MAX_WAIT_SECONDS), seeing its place and its estimated start as its progress; past
it, it is refused with the estimate and what to do instead. The session hash is the client's
choice, so the address bounds what any number of sessions can hold; the gate in front of Gradio's
queue (components.serving.gate) bounds their joins the same way, per session and per address.

The address is the client's as the proxy reports it: on a Space (SPACE_ID set) the address
Hugging Face's proxy appended to X-Forwarded-For, the entry `proxy_hops` from the right
(SPECTR_GBV_PROXY_HOPS; entries further left are the client's own claim and are ignored);
elsewhere the socket's address.

A request identical to one running or recently finished (the same view and run inputs, seed
included) is served once (components.serving.shared_runs): it joins that run, or gets its
stored outputs, and takes no slot.

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
from dataclasses import dataclass
from typing import Callable

from spectr_gbv.pairs import PAIRS, is_teaching, pair_key_of

from . import limits
from .limits import ClientGone, _env_int, watching_client
from .line import Line, Refused, Visitor
from .line import ClientGone as LeftTheLine
from .request import Inputs, RunRequest
from .shared_runs import SharedRuns
from .steps import each_step

LOG = logging.getLogger("spectr_gbv.visitors")


@dataclass(frozen=True)
class Fairness:
    model_slots: int  # model runs at once
    model_waiting: int  # model runs waiting, all visitors together (a bound on memory and threads)
    teaching_slots: int  # teaching-pair runs at once (1: a lookup-table run is Python and torch ops too small to
    # share the interpreter; run together they only slow each other down: tests/teaching_concurrency.py)
    teaching_waiting: int
    visitor_waiting: int  # per session and line, beyond its one running request
    proxy_hops: int  # trusted proxies in front of the app; 0: the socket's address is the visitor's address
    address_runs: int = 128  # per address and line: runs going and waiting, all its sessions together
    max_wait_s: int = 180  # a request waits while its estimated start is within this; past it, refused
    # At the door of Gradio's queue (components.serving.gate), all events together:
    visitor_events: int = 6  # per session: events in Gradio's queue, waiting or running
    address_events: int = 130  # per address: the same, all its sessions together (a class of 60, one going and
    # one waiting each; at most the lines' own address_runs, so a flooding address is refused at the gate, cheaply)
    joins_per_minute: int = 120  # per session: joins refilled a minute (the explorer's autoplay sends 40)
    join_burst: int = 10  # per session: joins at once
    address_joins_per_minute: int = 2400  # per address, all its sessions together
    address_join_burst: int = 180  # per address: a class of 60 pressing at once, three events each
    shared_runs: int = 16  # finished runs kept for identical requests (0: none kept)
    shared_seconds: int = 600  # how long a finished run is kept for them

    @classmethod
    def from_env(cls) -> "Fairness":
        on_a_space = bool(os.environ.get("SPACE_ID"))
        return cls(
            model_slots=_env_int("SPECTR_GBV_CONCURRENCY", 2),
            model_waiting=_env_int("SPECTR_GBV_QUEUE_SIZE", 128),
            teaching_slots=_env_int("SPECTR_GBV_TEACHING_CONCURRENCY", 1),
            teaching_waiting=_env_int("SPECTR_GBV_TEACHING_QUEUE_SIZE", 128),
            visitor_waiting=_env_int("SPECTR_GBV_VISITOR_WAITING", 1),
            proxy_hops=int(os.environ.get("SPECTR_GBV_PROXY_HOPS", "1" if on_a_space else "0")),
            address_runs=_env_int("SPECTR_GBV_ADDRESS_RUNS", 128),
            max_wait_s=_env_int("SPECTR_GBV_MAX_WAIT_SECONDS", 180),
            visitor_events=_env_int("SPECTR_GBV_VISITOR_EVENTS", 6),
            address_events=_env_int("SPECTR_GBV_ADDRESS_EVENTS", 130),
            joins_per_minute=_env_int("SPECTR_GBV_VISITOR_JOINS_PER_MINUTE", 120),
            join_burst=_env_int("SPECTR_GBV_VISITOR_JOIN_BURST", 10),
            address_joins_per_minute=_env_int("SPECTR_GBV_ADDRESS_JOINS_PER_MINUTE", 2400),
            address_join_burst=_env_int("SPECTR_GBV_ADDRESS_JOIN_BURST", 180),
            shared_runs=int(os.environ.get("SPECTR_GBV_SHARED_RUNS", "16")),
            shared_seconds=_env_int("SPECTR_GBV_SHARED_SECONDS", 600),
        )

    @property
    def gradio_workers(self) -> int:
        """Gradio's concurrency for the public events: one worker per slot and waiting place."""
        return self.model_slots + self.model_waiting + self.teaching_slots + self.teaching_waiting


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


def session_visitor(request, proxy_hops: int) -> Visitor:
    """The visitor: the session (Gradio's session hash; a request without one is a session of its own) at its address."""
    session = getattr(request, "session_hash", None) or f"request-{id(request):x}"
    return Visitor(visitor_of(request, proxy_hops), str(session))


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


FAIR = Fairness.from_env()
LINES: dict[str, Line] = {}
SHARED = SharedRuns()


def configure(fairness: Fairness | None = None) -> Fairness:
    """(Re)build the lines and forget shared runs (at launch; tests pass their own Fairness)."""
    global FAIR, SHARED
    FAIR = fairness or FAIR
    LINES.clear()
    for key, name, slots, waiting in (("model", "model", FAIR.model_slots, FAIR.model_waiting),
                                      ("teaching", "teaching-pair", FAIR.teaching_slots, FAIR.teaching_waiting)):
        LINES[key] = Line(name, slots, waiting, FAIR.visitor_waiting, FAIR.address_runs, FAIR.max_wait_s)
    SHARED = SharedRuns(max(FAIR.shared_runs, 0), FAIR.shared_seconds)
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


def too_long(error: Refused, teaching: bool) -> Refused:
    """A refusal for a start past the bound, with what to do instead."""
    if error.wait_s is None:
        return error
    instead = ("try again in a few minutes" if teaching else
               "try the Toy world (its runs are lookup tables and start at once), fewer new tokens, or again in a "
               "few minutes")
    return Refused(f"{error}: {instead}", wait_s=error.wait_s)


def share_key(view: str, run: RunRequest):
    """The key of identical requests: the view, every run input and the server's limits; None if not hashable."""
    try:
        key = (view, repr(run), repr(limits.LIMITS))
        hash(key)
        return key
    except Exception:  # noqa: BLE001 - an odd value: served alone
        return None


def _same_run_note(classmates: int) -> str:
    return (f"The same run as {classmates} other request{'s' if classmates != 1 else ''} with these settings and seed "
            "(a classmate's, say): a seed fixes every draw, so these are the tokens you would get; the timings shown "
            "are that one run's.")


# ------------------------------------------------------------------------------ decorator


def served(translate: Callable[[BaseException, str], BaseException], inputs: Inputs,
           estimate: Callable[[RunRequest], float] | None = None) -> Callable:
    """Decorator factory: the handler (its parameters: `inputs`) waits its turn in the line of its
    RunRequest's pair, and its Budget watches the visitor. `estimate` gives the request's expected
    seconds (its place in line, the start estimate); `translate` turns a refusal into the user's error.
    An identical request joins a running run, or gets a finished one's outputs (module docstring)."""

    def decorate(fn):
        def seconds_of(run: RunRequest) -> float:
            try:
                return float(estimate(run)) if estimate is not None else 1.0
            except Exception:  # noqa: BLE001 - settings the handler will refuse: it ends at once
                return 0.1

        def admit(run: RunRequest, event):
            line = line_for(run.pair_key)
            alive = (lambda: event.alive) if event is not None else (lambda: True)
            if line is None or event is None:  # no pair, or not a request Gradio serves (a test's direct call)
                return None, None, alive
            visitor = session_visitor(_current_request(), FAIR.proxy_hops)
            try:
                return line, line.enter(visitor, alive, seconds_of(run), report=_report), alive
            except Refused as error:
                raise translate(too_long(error, line is LINES["teaching"]), fn.__name__) from None
            except LeftTheLine as error:
                raise translate(ClientGone(str(error)), fn.__name__) from None

        def sharing(run: RunRequest, event):
            """(key, shared run, leads) for a request Gradio serves; (None, None, True) otherwise."""
            key = share_key(fn.__name__, run) if event is not None else None
            if key is None:
                return None, None, True
            shared, leads = SHARED.lead_or_follow(key, session_visitor(_current_request(), FAIR.proxy_hops))
            return key, shared, leads

        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def stream(*args, **kwargs):
                run, event = inputs.request(args, kwargs, partial=True), _gradio_event()
                key, shared, leads = sharing(run, event)
                if not leads:
                    _report(_same_run_note(shared.followers))  # on its progress: a toast would cover a projector's tabs
                    try:
                        yield from shared.follow((lambda: event.alive) if event is not None else (lambda: True))
                        return
                    except LookupError:  # the run it joined was cut short: this request runs on its own
                        key, shared = None, None
                cut, failed = [False], True
                try:
                    line, ticket, alive = admit(run, event)
                    steps = fn(*args, **kwargs)
                    if ticket is not None:
                        ticket.steps = steps

                    @contextlib.contextmanager
                    def executing():  # a step: the ticket is executing and its visitor watched
                        if ticket is not None:
                            ticket.executing = True
                        try:
                            with watching_client(alive, cut):
                                yield
                        finally:
                            if ticket is not None:
                                ticket.executing = False

                    try:
                        for update in each_step(steps, executing, stop=lambda: ticket is not None and ticket.done):
                            if shared is not None:
                                shared.add(update)
                            yield update
                        failed = cut[0] or (ticket is not None and ticket.done)
                    finally:
                        if ticket is not None:
                            line.leave(ticket)
                finally:
                    if shared is not None:
                        SHARED.end(key, shared, failed)

            return stream

        @functools.wraps(fn)
        def call(*args, **kwargs):
            run, event = inputs.request(args, kwargs, partial=True), _gradio_event()
            key, shared, leads = sharing(run, event)
            if not leads:
                _report(_same_run_note(shared.followers))  # on its progress: a toast would cover a projector's tabs
                try:
                    return list(shared.follow((lambda: event.alive) if event is not None else (lambda: True)))[-1]
                except (LookupError, IndexError):
                    key, shared = None, None
            cut, failed = [False], True
            try:
                line, ticket, alive = admit(run, event)
                try:
                    with watching_client(alive, cut):
                        result = fn(*args, **kwargs)
                    if shared is not None:
                        shared.add(result)
                    failed = cut[0]
                    return result
                finally:
                    if ticket is not None:
                        line.leave(ticket)
            finally:
                if shared is not None:
                    SHARED.end(key, shared, failed)

        return call

    return decorate


def threads_per_run(cores: int, model_slots: int) -> int:
    """torch threads for one model run: the cores shared by the runs allowed at once (2 cores, 2 runs: one each).
    Torch's default (every core per run) oversubscribes them when two visitors' runs overlap."""
    return max(1, cores // max(model_slots, 1))
