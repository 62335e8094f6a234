"""The one loop that runs a streamed handler step by step, each step under its own context.

Gradio may run the steps of one generator in different threads, so a context a step needs
(the GPU call's deadline, the visitor being watched) is entered around each `next`, not once
around the whole stream (`components.serving.gpu.under_gpu`, `components.serving.visitors.served`).
"""

from __future__ import annotations

import contextlib
from typing import Callable, ContextManager, Iterator


def each_step(steps: Iterator, around: Callable[[], ContextManager] = contextlib.nullcontext,
              stop: Callable[[], bool] = lambda: False) -> Iterator:
    """`steps`' items, each `next` under a fresh `around()`, until they end or `stop()` says so
    (checked before each step); `steps` is closed however the stream ends."""
    try:
        while not stop():
            with around():
                try:
                    item = next(steps)
                except StopIteration:
                    return
            yield item
    finally:
        steps.close()
