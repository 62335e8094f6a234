"""What one exact enumeration remembers between its replays: pure work they all repeat.
(Also a seeded test's many draws over the same tables, tests/test_statistical.py.)

`exact.enumerate_outcomes` runs a verifier once per path of its coins and draws, and
`exact.iteration_law` once per tuple of drafts, so the same node of the same tables is worked out
again and again (AS-BV's node law: ten replays of one verification ask for it identically). Inside
`remembering()` a pure function of its inputs can answer from the first computation
(`remembered`): same inputs, same result object, so what the enumeration proves is unchanged. The
memory lives only as long as that one enumeration (no setting a test changes between two
enumerations can meet an answer computed under the other), and outside one nothing is kept.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from typing import Callable, Hashable, Iterator, TypeVar

T = TypeVar("T")

_MEMORY: ContextVar[dict | None] = ContextVar("replay_memory", default=None)


@contextmanager
def remembering() -> Iterator[None]:
    """Remember `remembered` answers until the outermost `remembering` ends."""
    if _MEMORY.get() is not None:
        yield
        return
    token = _MEMORY.set({})
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
    if key not in memory:
        memory[key] = compute()
    return memory[key]
