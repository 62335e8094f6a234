"""Every fault a handler meets becomes a message to its user, never a crash.

Bad input and the library's refusals (ValueError), a visitor who left, and out-of-memory errors
get one log line and a toast in plain words; anything else is an internal error, logged with
its traceback, and the server keeps serving this and every other session.
"""

from __future__ import annotations

import contextlib
import functools
import html
import inspect
import logging
import threading
from collections import OrderedDict

import gradio as gr

from ..serving.limits import ClientGone
from .outputs import each_result

LOG = logging.getLogger("spectr_gbv.app")


def user_errors(fn):
    """Decorator: faults in `fn` (a function, a generator or a functools.partial of one) become the user's message."""
    name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "request")
    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def generator_wrapper(*args, **kwargs):
            with _as_user_error(name):
                yield from fn(*args, **kwargs)
        generator_wrapper.__name__ = name  # a partial has none: Gradio names the event after it
        return generator_wrapper

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with _as_user_error(name):
            return fn(*args, **kwargs)
    wrapper.__name__ = name
    return wrapper


@contextlib.contextmanager
def _as_user_error(handler: str = "request"):
    try:
        yield
    except gr.Error:
        raise
    except Exception as error:  # noqa: BLE001 - every fault becomes a message
        raise translate_error(error, handler) from None  # the log has what an operator needs (see translate_error)


def _is_out_of_memory(error: BaseException) -> bool:
    import torch

    text = str(error).lower()
    return isinstance(error, (MemoryError, torch.OutOfMemoryError)) or (
        isinstance(error, RuntimeError) and ("out of memory" in text or "can't allocate memory" in text))


def translate_error(error: BaseException, handler: str = "request") -> gr.Error:
    """The user's message (plain text) and one log line; a traceback only for a real internal error.

    The message is also noted for the visitor's session (`FAILURES`): the page's failure event puts it
    where the run's outputs were (components.wiring.run_events)."""
    message = _translated(error, handler)
    FAILURES.note(_session(), handler, message.message)
    return message


def _translated(error: BaseException, handler: str) -> gr.Error:
    if isinstance(error, ClientGone):  # nobody reads the message: the log says why the work stopped
        LOG.info("%s stopped: %s", handler, error)
        return user_error(str(error))
    if isinstance(error, ValueError):  # the library's and the settings' own messages: made for users
        LOG.info("%s refused: %s", handler, plain(str(error)))
        return user_error(str(error))
    if _is_out_of_memory(error):
        LOG.warning("%s ran out of memory: %s", handler, plain(str(error)))
        release_memory()
        return user_error("out of memory: lower K, L, max new tokens or the number of runs, and try again")
    LOG.error("internal error in %s", handler, exc_info=error)
    release_memory()
    return user_error(f"internal error ({type(error).__name__}: {error}); the server is fine: try other settings, "
                      "and report it if it persists")


def user_error(message: str) -> gr.Error:
    """A toast that shows the message as text: Gradio renders a gr.Error's message as HTML, so
    markup from the input is escaped, and nothing is printed (the caller logs one line)."""
    return gr.Error(html.escape(plain(message), quote=False), print_exception=False)


def plain(text: str) -> str:
    """Text a log line and JSON can carry: a lone surrogate from the input becomes its escape."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def carryable(value):
    """`value` with every string in it (walked through lists, tuples and dict values) made `plain`.

    A handler that echoes its input (a typed pair name, say) would otherwise hand Gradio a lone
    surrogate, which its JSON encoder refuses halfway through the answer: the visitor's stream
    closes with no words. Other values (figures, numbers, components as dict keys) pass as they are."""
    if isinstance(value, str):
        return plain(value)
    if isinstance(value, dict):
        return {key: carryable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [carryable(item) for item in value]
    if isinstance(value, tuple):
        return tuple(carryable(item) for item in value)
    return value


def carrying(fn):
    """`fn` (a function or a generator) with every result made `carryable`."""
    return each_result(fn, carryable)


def release_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def _session() -> str | None:
    """The session of the request this thread serves (Gradio's context), or None (a direct call)."""
    from gradio.context import LocalContext

    return getattr(LocalContext.request.get(None), "session_hash", None)


class FailureNotes:
    """The last failure message of each (session, handler), until the page's failure event takes it.

    Bounded: a failed API call's note is never taken, so the oldest notes go beyond MOST."""

    MOST = 1000

    def __init__(self):
        self._lock = threading.Lock()
        self._notes: OrderedDict[tuple[str, str], str] = OrderedDict()

    def note(self, session: str | None, handler: str, message: str) -> None:
        if not session:
            return
        with self._lock:
            self._notes[(session, handler)] = message
            self._notes.move_to_end((session, handler))
            while len(self._notes) > self.MOST:
                self._notes.popitem(last=False)

    def take(self, session: str | None, handler: str) -> str | None:
        with self._lock:
            return self._notes.pop((session, handler), None) if session else None


FAILURES = FailureNotes()
