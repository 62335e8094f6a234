"""A model pair loading while the visitor waits: the progress line says what the load is doing.

A first load of the default pair takes tens of seconds; a bar frozen at "0.0%" for that long
looks like a hung page. So the load runs on a helper thread while the handler's thread, which
holds the request's progress, writes the loader's current stage (spectr_gbv.models.load_stage)
and the seconds so far, with no percentage: a load has no fraction done to show."""

from __future__ import annotations

import contextvars
import threading
import time
from typing import Callable, TypeVar

from spectr_gbv.models.load_stage import current

T = TypeVar("T")

LOADING = "loading the model (about a minute the first time)"
POLL_S = 0.5  # how often the line is rewritten while the load runs


def loading_line(stage: str, seconds: float) -> str:
    """The progress line: what is loading, the stage when one is marked, and the seconds so far."""
    return f"{LOADING}: {stage or 'starting'}, {seconds:.0f} s so far"


def load_with_progress(load: Callable[[], T], progress, poll_s: float | None = None) -> T:
    """`load()`'s result (or its error), with `progress(None, desc=...)` rewritten every `poll_s`
    seconds while it runs. The thread keeps the caller's context (Gradio's request lives there)."""
    poll_s = POLL_S if poll_s is None else poll_s
    outcome: dict = {}
    context = contextvars.copy_context()

    def work() -> None:
        try:
            outcome["value"] = context.run(load)
        except BaseException as error:  # noqa: BLE001 - raised again on the caller's thread
            outcome["error"] = error

    worker = threading.Thread(target=work, name="model-load", daemon=True)
    started = time.monotonic()
    worker.start()
    progress(None, desc=loading_line(current(), 0))
    worker.join(poll_s)
    while worker.is_alive():
        progress(None, desc=loading_line(current(), time.monotonic() - started))
        worker.join(poll_s)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
