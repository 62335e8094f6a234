"""A Stop button beside a view's run button, with Generate's mechanism (components.wiring.runs.STOPS).

Here the run sees the request at its next step (its Ticker raises budget_stops.StopPressed) and
ends itself with what finished shown, the header saying it was stopped; a run in a ZeroGPU
worker cannot see it, so there the event is cancelled and the outputs streamed so far stay.
"""

from __future__ import annotations

import gradio as gr

from ..serving import gpu
from . import private
from .run_events import back_to_idle
from .runs import STOPS


def build(view: str) -> gr.Button:
    # secondary, not Gradio's red "stop": red means lossy, and nothing else, in this app
    return gr.Button("Stop", variant="secondary", elem_id=f"{view}-stop-button", scale=0, min_width=80)


def ask_to_stop(request: gr.Request = None) -> None:
    """This session's streaming run ends at its next step."""
    STOPS.ask(getattr(request, "session_hash", None))


def wire(stop: gr.Button, run_button: gr.Button, run) -> None:
    """`stop` ends `run` (the run button's event, components.wiring.run_events) at its next step."""
    if gpu.ON_ZEROGPU:
        stopped = private.on(stop.click, lambda: None, None, None, cancels=[run])
        back_to_idle(stopped.then, run_button)
    else:
        private.on(stop.click, ask_to_stop, None, None, queue=False)
