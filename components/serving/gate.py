"""The door in front of Gradio's queue: a visitor's joins are counted and refused before Gradio queues them.

Gradio keeps one queue for the whole app (`max_size` waiting events); the lines of
components.serving.visitors only see a request once Gradio has queued it and a worker has
picked it up. So a visitor who posts joins faster than they are served fills Gradio's queue,
and everyone else gets "Queue is full". The gate is an ASGI middleware on the app Gradio
builds (launch passes it through `app_kwargs`); on the routes that queue work
(`/gradio_api/queue/join`, `/gradio_api/call/<endpoint>`) it answers at once, without a queue
slot, when

* the session's join rate is over its token bucket (`joins_per_minute`, refilled steadily,
  up to `join_burst` at once), or its address's over the address's (`address_joins_per_minute`,
  `address_join_burst`: a class of 60 pressing at once fits): HTTP 429 with Retry-After;
* the session already has `visitor_events` events in Gradio's queue, waiting or running,
  all events together, or its address `address_events`: HTTP 429;
* the join itself is malformed: a session hash over SESSION_HASH_CHARS (400), an event
  index the app does not have, or one that runs in the browser only (404), or a wrong
  number of arguments (422, naming the endpoint's signature; the public endpoints take
  exactly theirs, the UI's own events at least theirs, as Gradio does).

The direct calls the page makes for its unqueued events (`/gradio_api/run/predict` with an
event index, `/gradio_api/run/<name>`) are checked the same way for being malformed, but
not counted: they take no queue slot, and the page sends one on every settings change.
Gradio would answer each malformed one with a traceback in the log; the UI's events check
the values themselves (components.wiring.private).

It also refuses every upload (the app has no file input, so nothing is ever written to
Gradio's cache) and over-long session hashes on the event stream and heartbeat routes.
A visitor is a session (the join's session hash) at an address (`visitor_of`, with its proxy
hops), as in components.serving.visitors; the session hash is the client's choice, so the
address's own bucket and events bound what any number of sessions can send.
A 429 is held back up to HOLD_S seconds before it is sent, so a client that retries at once
cannot spend the server's CPU on refusals. Refusals are logged at INFO, one line per visitor
and reason every LOG_EVERY_S seconds (with the count), so a flood does not flood the log.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import time
from collections import OrderedDict
from typing import Callable

from starlette.requests import Request

from . import visitors

LOG = logging.getLogger("spectr_gbv.gate")
API = "/gradio_api/"
PUBLIC = ("generate", "compare", "race", "sweep", "grid", "grid_saved", "fidelity")  # the API's named endpoints
SESSION_HASH_CHARS = 128  # Gradio's browser client makes 11 characters, gradio_client a 36-character uuid
MAX_JOIN_BYTES = 256 * 1024  # a join's JSON body: the prompt is at most SPECTR_GBV_MAX_PROMPT_TOKENS tokens
MAX_VISITORS = 10_000  # token buckets kept; the least recently seen visitor's is dropped first
LOG_EVERY_S = 10.0
# A visitor over its rate or its events gets the 429 after up to HOLD_S seconds (at most HELD per
# visitor held at once; more are answered at once): a client that retries at once then joins at
# the pace of its connections, not as fast as the server can say no, which would take the CPU
# everyone else's requests need.
HOLD_S = 1.0
HELD = 32


class Refusal(Exception):
    """An answer the gate gives instead of Gradio: an HTTP status and a message in words."""

    def __init__(self, status: int, message: str, retry_after: float | None = None, reason: str = "refused"):
        super().__init__(message)
        self.status, self.message, self.retry_after, self.reason = status, message, retry_after, reason


# --------------------------------------------------------------------------- join rates


class Buckets:
    """A token bucket per visitor: `burst` joins at once, refilled at `per_minute` a minute."""

    def __init__(self, per_minute: int, burst: int, clock: Callable[[], float] = time.monotonic):
        self.rate, self.burst, self.clock = per_minute / 60.0, burst, clock
        self._levels: OrderedDict[str, tuple[float, float]] = OrderedDict()  # visitor -> (tokens, when)

    def take(self, visitor: str) -> float:
        """0 if the visitor may join now (a token is spent), else the seconds until it may."""
        now = self.clock()
        tokens, then = self._levels.pop(visitor, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - then) * self.rate)
        wait = 0.0 if tokens >= 1 else (1 - tokens) / self.rate
        self._levels[visitor] = (tokens - 1 if wait == 0 else tokens, now)
        while len(self._levels) > MAX_VISITORS:
            self._levels.popitem(last=False)
        return wait


# --------------------------------------------------------------------------- the middleware


class JoinGate:
    """ASGI middleware: the gate, in front of the Gradio app serving `demo`."""

    def __init__(self, app, demo):
        self.app, self.demo = app, demo
        fair = visitors.FAIR
        self.buckets = Buckets(fair.joins_per_minute, fair.join_burst)  # per session
        self.address_buckets = Buckets(fair.address_joins_per_minute, fair.address_join_burst)
        self.joining: dict[tuple[str, str], int] = {}  # (address, session) -> joins passed on, not yet answered
        self._logged: dict[tuple[str, str], tuple[float, int]] = {}  # (visitor, reason) -> (last line, since)
        self.held: dict[str, int] = {}  # visitor -> 429s being held back

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or API not in scope["path"]:
            return await self.app(scope, receive, send)
        route = scope["path"].split(API, 1)[1].rstrip("/")
        method = scope["method"]
        request = Request(scope)
        visitor = visitors.visitor_of(request, visitors.FAIR.proxy_hops)
        try:
            if method == "POST" and (route == "upload" or route.startswith("upload/")):
                raise Refusal(413, "this app takes no files: uploads are refused", reason="upload")
            if route == "queue/data":
                _check_session_hash(request.query_params.get("session_hash"))
            elif route.startswith("heartbeat/"):
                _check_session_hash(route.partition("/")[2])
            if method == "POST" and _is_join(route):
                body = await _read_body(receive)
                session = self._admit(visitor, route, body)
                self.joining[session] = self.joining.get(session, 0) + 1
                try:
                    return await self.app(scope, _replay(body, receive), send)
                finally:
                    self.joining[session] -= 1
                    if not self.joining[session]:
                        del self.joining[session]
            if method == "POST" and _is_direct_call(route):
                body = await _read_body(receive)
                self._check_call(route, body)
                return await self.app(scope, _replay(body, receive), send)
        except Refusal as refusal:
            self._log(visitor, route, refusal)
            if refusal.status == 429 and self.held.get(visitor, 0) < HELD:
                self.held[visitor] = self.held.get(visitor, 0) + 1
                try:
                    await asyncio.sleep(min(refusal.retry_after or HOLD_S, HOLD_S))
                finally:
                    self.held[visitor] -= 1
                    if not self.held[visitor]:
                        del self.held[visitor]
            return await _answer(send, refusal)
        return await self.app(scope, receive, send)

    def _admit(self, address: str, route: str, body: bytes) -> tuple[str, str]:
        """Refusal unless this join may go on to Gradio's queue; else its (address, session)."""
        fair = visitors.FAIR
        session = (address, _session_of(body))
        wait = max(self.buckets.take(session), self.address_buckets.take(address))
        if wait:
            raise Refusal(429, f"too many requests: at most {fair.join_burst} at once and {fair.joins_per_minute} a "
                               f"minute from one page, {fair.address_join_burst} at once and "
                               f"{fair.address_joins_per_minute} a minute from one network address: "
                               f"try again in {math.ceil(wait)} s", retry_after=wait, reason="rate")
        self._check_call(route, body)
        mine, ours = self._queued(session)
        mine += self.joining.get(session, 0)
        ours += sum(n for (where, _), n in self.joining.items() if where == address)
        if mine >= fair.visitor_events:
            raise Refusal(429, f"this page already has {mine} requests waiting or running (at most "
                               f"{fair.visitor_events} per page): wait for one to finish",
                          retry_after=2, reason="events")
        if ours >= fair.address_events:
            raise Refusal(429, f"your network address already has {ours} requests waiting or running (at most "
                               f"{fair.address_events} per address): wait for some to finish",
                          retry_after=2, reason="address events")
        return session

    def _check_call(self, route: str, body: bytes) -> None:
        """Refusal unless the body names an event of the app (one with a Python function) and its arguments."""
        try:
            payload = json.loads(body or b"null")
        except (ValueError, UnicodeDecodeError):
            raise Refusal(400, "the request's body is not JSON: send {\"data\": [...]} "
                               "(see the API page for each endpoint's arguments)", reason="junk") from None
        if not isinstance(payload, dict):
            raise Refusal(400, "the request's body must be a JSON object such as {\"data\": [...]}", reason="junk")
        if route == "queue/join" or _is_direct_call(route):
            _check_session_hash(payload.get("session_hash"))
        fn = self._event(route, payload)
        if fn is not None and fn.fn is None and not fn.cancels:
            raise Refusal(404, "this event runs in the browser only: the server has nothing to call",
                          reason="no such event")
        if fn is not None and not route.startswith("call/v2/"):  # /call/v2 takes named arguments: Gradio maps them
            _check_arguments(fn, payload.get("data"), route)

    def _event(self, route: str, payload: dict):
        """The event a join or call names (None where Gradio should answer itself); Refusal for one the app lacks."""
        fns = self.demo.fns
        if route == "queue/join" or (_is_direct_call(route) and payload.get("fn_index") is not None):
            index = payload.get("fn_index")
            if index is None:
                return None  # Gradio's own "No function index provided."
            if isinstance(index, bool) or not isinstance(index, int) or index not in fns:
                raise Refusal(404, f"this app has no event number {str(index)[:20]}: the public endpoints are "
                                   + ", ".join(f"/{name}" for name in PUBLIC) + " (see the API page)",
                              reason="no such event")
            return fns[index]
        name = route.split("/")[-1]
        found = next((fn for fn in fns.values() if fn.api_name == name), None)
        if found is None:
            raise Refusal(404, f"this app has no endpoint /{name[:40]}: the public endpoints are "
                               + ", ".join(f"/{name}" for name in PUBLIC), reason="no such event")
        return found

    def _queued(self, session: tuple[str, str]) -> tuple[int, int]:
        """The session's events in Gradio's queue, and its address's: waiting or running, all events together."""
        queue = getattr(self.demo, "_queue", None)
        events = getattr(queue, "event_ids_to_events", None) or {}
        hops = visitors.FAIR.proxy_hops
        mine = ours = 0
        for event in list(events.values()):
            if visitors.visitor_of(event.request, hops) == session[0]:
                ours += 1
                mine += getattr(event, "session_hash", None) == session[1]
        return mine, ours

    def _log(self, visitor: str, route: str, refusal: Refusal) -> None:
        key, now = (visitor, refusal.reason), time.monotonic()
        last, since = self._logged.get(key, (-math.inf, 0))
        if now - last < LOG_EVERY_S:
            self._logged[key] = (last, since + 1)
            return
        more = f" (and {since} more like it in the last {now - last:.0f} s)" if since else ""
        LOG.info("gate refused %s from %s (HTTP %d): %s%s", route, visitor, refusal.status, refusal.message, more)
        self._logged[key] = (now, 0)
        if len(self._logged) > MAX_VISITORS:
            self._logged.clear()


def _session_of(body: bytes) -> str:
    """The join's session hash ('' where it has none: /call's, which Gradio gives a session of its own)."""
    try:
        payload = json.loads(body or b"null")
    except (ValueError, UnicodeDecodeError):
        return ""
    session = payload.get("session_hash") if isinstance(payload, dict) else None
    return session[:SESSION_HASH_CHARS] if isinstance(session, str) else ""


def _is_join(route: str) -> bool:
    """Routes that put work in Gradio's queue (not /call/<endpoint>/<event id>, which reads a result)."""
    return route == "queue/join" or (route.startswith("call/") and route.count("/") == (2 if "/v2/" in route else 1))


def _is_direct_call(route: str) -> bool:
    """Gradio's unqueued calls: /run/<name> (the page's: /run/predict with an event index), and /api/<name>."""
    return route.split("/")[0] in ("run", "api") and route.count("/") == 1


def _check_session_hash(session_hash) -> None:
    if isinstance(session_hash, str) and len(session_hash) > SESSION_HASH_CHARS:
        raise Refusal(400, f"the session hash is {len(session_hash)} characters long; at most {SESSION_HASH_CHARS}",
                      reason="session hash")


def signature(fn) -> str:
    """The endpoint's arguments, in words: `/generate(pair_key, prompt, ...)`."""
    names = [p.name for p in inspect.signature(fn.fn).parameters.values()
             if p.name not in ("progress", "request") and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(names) != len(fn.inputs):  # a handler that takes its inputs otherwise: the inputs' labels instead
        names = [getattr(block, "label", None) or type(block).__name__.lower() for block in fn.inputs]
    return f"{'/' + fn.api_name if fn.api_name else fn.name}({', '.join(names)})"


def _check_arguments(fn, data, route: str) -> None:
    """A public endpoint takes exactly its arguments; the UI's own events at least theirs (as Gradio)."""
    if fn.fn is None or fn.cancels:
        return
    public = fn.api_name in PUBLIC and fn.api_visibility != "private"
    if not isinstance(data, list):
        raise Refusal(422, f"'data' must be a list of the arguments of {signature(fn)}", reason="arguments")
    taken = {len(fn.inputs)}
    if route.startswith("call/"):  # there (only) Gradio fills in the inputs the API skips, such as a gr.State
        taken.add(sum(not getattr(block, "skip_api", False) for block in fn.inputs))
    if len(data) in taken or (not public and len(data) > max(taken)):
        return
    count = max(taken) if public else len(fn.inputs)
    raise Refusal(422, f"{signature(fn)} takes {count} arguments; got {len(data)}", reason="arguments")


async def _read_body(receive) -> bytes:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise Refusal(400, "the client went away", reason="gone")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_JOIN_BYTES:
            raise Refusal(413, f"the request is over {MAX_JOIN_BYTES // 1024} KiB: shorten the prompt",
                          reason="too big")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive):
    """A `receive` that hands Gradio the body already read, then whatever the client sends next."""
    sent = False

    async def replayed():
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _answer(send, refusal: Refusal) -> None:
    body = json.dumps({"detail": refusal.message}).encode()  # FastAPI's shape, as Gradio's own refusals
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if refusal.retry_after is not None:
        headers.append((b"retry-after", str(max(1, math.ceil(refusal.retry_after))).encode()))
    await send({"type": "http.response.start", "status": refusal.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
