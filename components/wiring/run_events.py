"""A run button's events around its run: a visible busy state, and a failed run's message in place of its outputs.

Busy: Gradio ignores a second click on a button whose run is going, without a sign. So the click
first turns the button into "Running…" and disables it, in an unqueued event (done at once, before
the run waits its turn), the run follows it (`.then`), and the button comes back when the run ends
or is stopped (`.then`) or fails (`.failure`: Gradio's page runs only that after a failed event). The state is set through the button's own
properties (`gr.Button(interactive=False)`), not by script on the page: Gradio redraws a button
from its properties, so a script's `disabled` did not stick.

A new run also closes the toasts still on the page (`CLEAR_TOASTS`): an old run's error in the
corner reads as this run's.

Failure: a run that fails raises gr.Error (the toast, and what an API client gets back), and
Gradio leaves the page's old outputs on screen under red "Error" badges. `.failure` replaces
them: the message (noted for this session by errors.translate_error) in the run's main output,
the outputs named to clear emptied; the others (the session's run, the explorer) stay as they are,
without the badge.
"""

from __future__ import annotations

import html
from typing import Callable, Mapping, Sequence

import gradio as gr

from .errors import FAILURES
from .outputs import wire

RUNNING = "Running…"
UNKNOWN_FAILURE = "the run failed (the message is in the corner of the page)"
QUICK = dict(queue=False, show_progress="hidden", api_visibility="private")  # page-only, at once, no spinner
# Closes every toast on the page, as its own close button does (Gradio's toasts: statustracker).
CLEAR_TOASTS = "() => { document.querySelectorAll('[data-testid=\"toast-body\"] .toast-close').forEach((b) => b.click()); return []; }"


def busy() -> gr.Button:
    return gr.Button(value=RUNNING, interactive=False)


def idle(label: str) -> Callable[[], gr.Button]:
    return lambda: gr.Button(value=label, interactive=True)


def failure_html(message: str) -> str:
    """The message where the output was: neutral grey (red means lossy in this app), announced to screen readers.
    `message` is the toast's text, already escaped (errors.user_error). "No result", not "this run stopped":
    many failed runs never started (bad input, a refusal before the first model call)."""
    return (f'<div class="run-failed" role="alert" style="border-left: 4px solid #4b5563; background: #f3f4f6; '
            f'padding: 8px 12px; color: #111827"><b>No result:</b> {message}</div>')


def failure_outputs(handler: str, outputs: Mapping[str, gr.components.Component], message: str,
                    clear: Sequence[str], button: gr.Button) -> Callable:
    """The `.failure` handler: the noted message in `outputs[message]`, the `clear` outputs emptied, the
    button back (Gradio's page does not run a failed event's `.then`, only its `.failure`)."""
    label = button.value

    def show_failure(request: gr.Request = None) -> dict:
        text = FAILURES.take(getattr(request, "session_hash", None), handler) or html.escape(UNKNOWN_FAILURE)
        # Every output gets a value, the others gr.skip(): kept as they are, but no longer marked "Error".
        return ({component: gr.skip() for component in outputs.values()}
                | {outputs[message]: failure_html(text)} | {outputs[name]: None for name in clear}
                | {button: idle(label)()})

    return show_failure


def run_events(listener, button: gr.Button, fn: Callable, inputs, outputs: Mapping[str, gr.components.Component],
               message: str, clear: Sequence[str], **run_kwargs):
    """`listener` (a click, or an event's `.then`) -> button busy -> `fn` wired to `outputs` -> button back;
    on failure the message in `outputs[message]` and `clear` emptied. Returns the run's event (to cancel it)."""
    label = button.value
    started = listener(busy, None, button, js=CLEAR_TOASTS, **QUICK)
    run = wire(started.then, fn, inputs, outputs, **run_kwargs)
    run.then(idle(label), None, button, **QUICK)
    run.failure(failure_outputs(fn.__name__, outputs, message, clear, button), None, [*outputs.values(), button],
                **QUICK)
    return run


def back_to_idle(listener, button: gr.Button):
    """The button back after an event that cancels its run (a cancelled run may not reach its `.then`)."""
    return listener(idle(button.value), None, button, **QUICK)
