"""What a model load is doing now, in a few words, for a caller that shows a waiting visitor.

A first load of the default pair takes tens of seconds (dequantising the GGUF file, timing this
CPU's kernels); the loaders mark each stage with `stage(...)` and a waiting page reads `current()`.
One value for the process: loads run one at a time (spectr_gbv.pairs holds a lock), and whoever
waits for that lock waits for the same load."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Iterator

_lock = threading.Lock()
_current = ""


def current() -> str:
    """The stage a load is in now ("" when none is marked)."""
    with _lock:
        return _current


@contextmanager
def stage(text: str) -> Iterator[None]:
    """Mark `text` as the current stage while the block runs; the enclosing stage comes back after it."""
    global _current
    with _lock:
        before, _current = _current, text
    try:
        yield
    finally:
        with _lock:
            _current = before
