"""Identical requests served once: a class following its teacher sends the same settings thirty times.

Two requests are identical when they call the same view with the same run inputs (pair, prompt,
method(s), K, L, T, tokens, seed and the view's own controls: the whole `RunRequest`). A seed
fixes every draw of a run, so the outputs of one run are the outputs each identical request would
have got on its own; only the timings are that one run's. So a request identical to one

* **running** joins it: it takes no slot, waits for the run's updates and gets each of them;
* **recently finished** (at most `size` kept, each at most `ttl_s`) gets its stored updates at once,
  unless it comes from a session that already had them: that session's request runs again.

A run is stored only when it ended on its own (not by its visitor leaving or pressing Stop, nor an
error): `finished(outputs)` decides, and a joined run that did not end so leaves its followers
to run on their own. Updates are kept as they were yielded (a streamed view's updates may set
only some outputs). A follower handed several at once (a stored run's hundreds, or those that came
while it was busy) gets them as one update, each output at its last value (`latest`): the page
ends the same, and a browser does not draw every chart a hundred times over. A run of more than
`MAX_UPDATES` updates is shared while it runs but not stored.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable, Hashable, Iterator

MAX_UPDATES = 600  # updates of one run kept for later identical requests
# A follower's hand-overs while the run goes: each costs the server an encoding and a send per follower, and
# 29 classmates following one default-pair Generate at the leader's 10 a second cost 8 s of CPU for a 2 s run.
FOLLOW_EVERY_S = 1.0
UPDATE = "__type__"  # what marks Gradio's gr.update(...) dicts; gr.skip() is one with no other key


def _is_update(value) -> bool:
    return isinstance(value, dict) and value.get(UPDATE) == "update"


def _then(before, after):
    """One output's value after `before`, then `after`: a skip changes nothing, an update's properties
    add to the earlier ones, a plain value replaces the value and keeps earlier properties."""
    if _is_update(after):
        if len(after) == 1:  # gr.skip()
            return before
        if _is_update(before):
            return {**before, **after}
        return after if "value" in after else {**after, "value": before}
    if _is_update(before) and len(before) > 1:
        return {**before, "value": after}
    return after


def latest(updates: list):
    """One update leaving the page as `updates` in turn would; None when they cannot be merged (a view
    yielding anything but dataclasses of outputs, such as the NamedOutputs every served view yields)."""
    first = updates[0]
    if not dataclasses.is_dataclass(first) or any(type(u) is not type(first) for u in updates):
        return None
    values = {f.name: getattr(first, f.name) for f in dataclasses.fields(first)}
    for update in updates[1:]:
        for name in values:
            values[name] = _then(values[name], getattr(update, name))
    return dataclasses.replace(first, **values)


@dataclass(eq=False)
class Shared:
    """One run's updates, as they come."""

    updates: list = field(default_factory=list)
    ended: bool = False
    failed: bool = False  # ended by an error, a Stop or its visitor leaving: followers run on their own
    followers: int = 0
    sessions: set = field(default_factory=set)  # the sessions that ran or got it
    changed: threading.Condition = field(default_factory=threading.Condition)

    def add(self, update) -> None:
        with self.changed:
            self.updates.append(update)
            self.changed.notify_all()

    def end(self, failed: bool) -> None:
        with self.changed:
            self.ended, self.failed = True, failed
            self.changed.notify_all()

    def follow(self, alive: Callable[[], bool] = lambda: True, poll_s: float = 0.25,
               every_s: float = FOLLOW_EVERY_S) -> Iterator:
        """The run's updates, at most one hand-over every `every_s` while it runs, the updates of each
        hand-over merged into one (`latest`); stops early (LookupError) if the run failed."""
        seen = 0
        while True:
            with self.changed:
                while seen == len(self.updates) and not self.ended:
                    if not alive():
                        return
                    self.changed.wait(poll_s)
                new, ended, failed = self.updates[seen:], self.ended, self.failed
            seen += len(new)
            merged = latest(new) if len(new) > 1 else None
            if merged is not None:
                yield merged
            else:
                yield from new
            if ended and seen == len(self.updates):
                if failed:
                    raise LookupError("the shared run did not finish")
                return
            with self.changed:  # what comes meanwhile merges into the next hand-over; its end comes at once
                self.changed.wait_for(lambda: self.ended or not alive(), timeout=every_s)


class SharedRuns:
    """The running and recently finished runs, by request key (module docstring)."""

    def __init__(self, size: int = 32, ttl_s: float = 600.0, clock: Callable[[], float] = time.monotonic):
        self.size, self.ttl_s, self.clock = size, ttl_s, clock
        self._lock = threading.Lock()
        self._running: dict[Hashable, Shared] = {}
        self._finished: OrderedDict[Hashable, tuple[float, Shared]] = OrderedDict()

    def lead_or_follow(self, key: Hashable, session: Hashable = None) -> tuple[Shared, bool]:
        """(the run, True) for the request that runs it, (the run, False) for one that joins or reads it.
        A session asking again for a finished run it already had runs it again (a teacher showing it once
        more wants to watch it stream, and may press Stop): the stored outputs are for its classmates."""
        with self._lock:
            self._expire()
            if key in self._finished:
                when, shared = self._finished.pop(key)
                if session is None or session not in shared.sessions:
                    self._finished[key] = (when, shared)  # most recently used last
                    shared.followers += 1
                    shared.sessions.add(session)
                    return shared, False
            if key in self._running:
                shared = self._running[key]
                shared.followers += 1
                shared.sessions.add(session)
                return shared, False
            shared = self._running[key] = Shared()
            shared.sessions.add(session)
            return shared, True

    def end(self, key: Hashable, shared: Shared, failed: bool) -> None:
        """The leader's run ended: kept for later requests when it finished on its own."""
        shared.end(failed)
        with self._lock:
            if self._running.get(key) is shared:
                del self._running[key]
            if not failed and len(shared.updates) <= MAX_UPDATES and self.size > 0:
                self._finished[key] = (self.clock(), shared)
                while len(self._finished) > self.size:
                    self._finished.popitem(last=False)

    def _expire(self) -> None:
        now = self.clock()
        for key in [key for key, (when, _) in self._finished.items() if now - when > self.ttl_s]:
            del self._finished[key]

    def counts(self) -> tuple[int, int]:
        with self._lock:
            return len(self._running), len(self._finished)

    def clear(self) -> None:
        with self._lock:
            self._running.clear()
            self._finished.clear()
