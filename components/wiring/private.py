"""The UI's own events (api_visibility="private"): raw inputs, checked by their handlers, faults in words.

The page sends these events only what its components hold, but anyone can post to them by
event number (/gradio_api/queue/join, /gradio_api/run/predict). Gradio's preprocessing would
answer junk there with a bare "Error" and print a traceback for each request. So every
private event skips it (preprocess=False): a handler gets a slider's number, a dropdown's or
radio's value, a checkbox group's list, a dataset's index, a gr.State's object as stored,
exactly what the browser sent, and checks it itself (components.wiring.settings). Its faults
become the user's message with one INFO log line (components.wiring.errors.user_errors), and
what it answers is made JSON-safe (`errors.carrying`: an echoed lone surrogate would end the
answer's stream halfway).
What Gradio checks before any handler runs (the event number, too few arguments, a body too
big, events that only run in the browser) the gate refuses (components.serving.gate).
"""

from __future__ import annotations

from typing import Callable, Mapping

from .errors import carrying, user_errors
from .outputs import wire


def on(listener, fn: Callable, inputs, outputs, **kwargs):
    """`listener(fn, inputs, outputs, **kwargs)` as a private UI event: raw inputs, every fault the user's message.

    `outputs` is a list of components, or a mapping of names to components for a handler
    that returns NamedOutputs (components.wiring.outputs.wire)."""
    handler = user_errors(fn)
    options = dict(preprocess=False, api_visibility="private") | kwargs
    if isinstance(outputs, Mapping):  # made carryable after wire keys the NamedOutputs by component
        return wire(lambda keyed, *rest, **more: listener(carrying(keyed), *rest, **more), handler, inputs, outputs,
                    **options)
    return listener(carrying(handler), inputs, outputs, **options)
