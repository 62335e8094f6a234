"""What one exact enumeration remembers between its replays: pure work they all repeat.
(Also a seeded test's many draws over the same tables, tests/test_statistical.py.)

`exact.enumerate_outcomes` runs a verifier once per path of its coins and draws, and
`exact.iteration_law` once per tuple of drafts, so the same node of the same tables is worked out
again and again (AS-BV's node law: ten replays of one verification ask for it identically). Inside
`remembering()` a pure function of its inputs can answer from the first computation
(`remembered`): same inputs, same result object, so what the enumeration proves is unchanged. The
memory lives only as long as that one enumeration (no setting a test changes between two
enumerations can meet an answer computed under the other), and outside one nothing is kept.

A second use: the app's teaching pairs are fixed lookup tables, so a class's runs meet the same
nodes again and again (30 Toy-world Generates at the defaults asked for 2,579 node laws, 936 of
them different). Their runs remember in a `Recent`, a bounded memory that outlives one run
(`remembering(memory)` around each iteration; `spectr_gbv.pairs` owns it). The key is the node's
exact values, so an answer is reused only for the very same node.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Hashable, Iterator, TypeVar

T = TypeVar("T")

_MISSING = object()


class Recent:
    """At most `size` answers, the least recently used forgotten first; safe to share between threads."""

    def __init__(self, size: int):
        self.size = size
        self._answers: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._answers)

    def get(self, key: Hashable, default=None):
        with self._lock:
            answer = self._answers.get(key, _MISSING)
            if answer is _MISSING:
                return default
            self._answers.move_to_end(key)
            return answer

    def __setitem__(self, key: Hashable, answer) -> None:
        with self._lock:
            self._answers[key] = answer
            self._answers.move_to_end(key)
            while len(self._answers) > self.size:
                self._answers.popitem(last=False)


_MEMORY: ContextVar["dict | Recent | None"] = ContextVar("replay_memory", default=None)


@contextmanager
def remembering(memory: Recent | None = None) -> Iterator[None]:
    """Remember `remembered` answers until the outermost `remembering` ends: in a new dict, or in
    `memory`, which keeps them after. Set and reset in one call of one thread (a context variable):
    never around a generator's yields."""
    if _MEMORY.get() is not None:
        yield
        return
    token = _MEMORY.set({} if memory is None else memory)
    try:
        yield
    finally:
        _MEMORY.reset(token)


def remembered(key_of: Callable[[], Hashable], compute: Callable[[], T]) -> T:
    """compute(), or inside `remembering` the answer already computed for key_of()'s key (the key is
    made only there: outside, this costs nothing)."""
    memory = _MEMORY.get()
    if memory is None:
        return compute()
    key = key_of()
    answer = memory.get(key, _MISSING)
    if answer is _MISSING:
        answer = memory[key] = compute()
    return answer
