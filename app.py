"""SpecTr-GBV Explorer: the Gradio app.

The page is a sidebar of settings, a prompt, and one tab per view, each built and wired by
its module in components/tabs/ (Generate, Iteration explorer, Compare, Race, Sweep, Grid,
Fidelity, Lesson, Playground, About). Handlers there are short: components.wiring.settings checks the
UI values, the library (spectr_gbv) produces run records, and the pure renderers in
components/render/ turn records into HTML and Plotly figures. Serving in public (fair lines per visitor, ZeroGPU, budgets)
is components/serving/. Public API endpoints: /generate, /compare, /race, /sweep, /grid, /fidelity.
"""

from __future__ import annotations

import os

os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")  # before gradio is imported
# Gradio notices a closed event stream when it next wakes up, at least every heartbeat: then a
# request whose visitor left stops at its next budget tick (components.serving.visitors).
os.environ.setdefault("GRADIO_HEARTBEAT_INTERVAL", "2")

from components.serving import gpu  # first: it imports ZeroGPU's `spaces` (when present) before anything touches CUDA

import dataclasses
from pathlib import Path

import gradio as gr
from starlette.middleware import Middleware

from components.serving import gate, limits, logs, sessions, visitors
from components.tabs import (about, compare, explorer, fidelity, generate, grid_view, lesson, playground, race,
                             repeats_sizing, sidebar, sweep)
from components.wiring import classroom, screens, share
from components.wiring.inputs import EXAMPLES
from components.wiring.page import Page
from components.render.text import LOSSY_NOTE
from spectr_gbv import METHODS
from spectr_gbv.models import compiled
from spectr_gbv.pairs import DEFAULT_KEY, get_pair

ASSETS = Path(__file__).parent / "assets"
MAX_UPLOAD_BYTES = 1  # the app has no file input: the gate refuses every upload, Gradio anything bigger than this
CACHE_SWEEP = (3600, 3600)  # delete_cache: every hour, Gradio deletes its cached files older than an hour


def heading() -> str:
    """The page's title and the methods it shows, from the registry."""
    exact = [spec.label for spec in METHODS.values() if spec.exact]
    lossy = [spec.label for spec in METHODS.values() if not spec.exact]
    return ("# SpecTr-GBV Explorer\nSpeculative decoding, one iteration at a time: "
            f"{', '.join(exact)}" + (f" and {' and '.join(lossy)}" if lossy else "") + " on real models, side by side.")


def build_demo(default_pair: str = DEFAULT_KEY, default_prompt: str = EXAMPLES[0][1]) -> gr.Blocks:
    """The whole app; the defaults let tests (and operators) open it on another pair."""
    with gr.Blocks(title="SpecTr-GBV Explorer", delete_cache=CACHE_SWEEP) as demo:
        gr.Markdown(heading(), elem_id="page-heading")
        # Open, and drawn as if not folded (app.css), except in presentation mode (sidebar.wire_events).
        with gr.Accordion("Prompt, and the note on the lossy rule", open=True, elem_id="page-fold") as fold:
            gr.Markdown(LOSSY_NOTE, elem_classes=["lossy-note"])
            link_note = gr.Markdown(visible=False, elem_id="link-note")  # what a shared link could not set
            prompt = gr.Textbox(label="Prompt", value=default_prompt, lines=2,
                                info="Toy world: words the cat dog sat ran on mat . | Two-token example: A B")
        run_state = gr.State(None, time_to_live=limits.LIMITS.state_seconds)
        side = sidebar.build(default_pair)
        page = Page(demo, side, prompt, run_state, link_note, fold)
        with gr.Tabs(overflow_behavior="wrap", elem_id="main-tabs") as page.tabs:  # every tab visible by name
            generate.build(page)
            explorer.build(page)
            compare.build(page)
            race.build(page)
            sweep.build(page)
            grid_view.build(page)
            fidelity.build(page, default_pair)
            lesson.build(page)
            playground.build(page)
            about.build(page)
        # ?pair=toy&K=2&tab=compare, and a class's presentation mode and Lesson step (&present=1&step=3)
        share.wire(demo, page.tabs, link_note, page.controls, *side.link_controls, presentation=side.presentation,
                   walkthrough=page.tab_handles.lesson.walkthrough)
        screens.wire(demo, side.box)
        classroom.wire(page, side.class_button)
        classroom.wire(page, page.tab_handles.lesson.class_button)
        for view in (generate, explorer, compare, race, sweep, grid_view, fidelity, lesson, playground, sidebar,
                     repeats_sizing):
            view.wire_events(page)
    return demo


# Gradio's queue summarises its per-event records (a pandas group-by over the last 10,000 events) after
# every event, for /monitoring. With /monitoring off nothing reads that summary, yet it was half of the
# server's CPU under a stream of small events (py-spy), and it grows with the events served. So, unless
# the operator turns /monitoring on or sets these: a short record, summarised every 500th event.
GRADIO_ANALYTICS = {"GRADIO_ANALYTICS_MAX_EVENTS": "500", "GRADIO_ANALYTICS_CACHE_FREQUENCY": "500"}


def launch(demo: gr.Blocks, concurrency: int | None = None, queue_size: int | None = None,
           fairness: visitors.Fairness | None = None, app_kwargs: dict | None = None, **kwargs):
    """Serve, with at most `concurrency` model runs at once and `queue_size` waiting (components.serving.visitors).

    Gradio's queue starts every request at once (a worker per slot and waiting place of the
    lines), and the lines decide whose turn it is. In front of Gradio's queue the gate
    (components.serving.gate) counts each visitor's joins and refuses, before Gradio queues
    anything, a visitor over its rate or its events in the queue, and every upload. Memory is
    bounded: at most LIMITS.sessions sessions keep state, a run state lives
    LIMITS.state_seconds, and /monitoring is off unless the operator turns it on. Refusals
    are logged at INFO (components.serving.logs)."""
    logs.configure()
    compile_target = compiled.compile_wanted(app=True)  # an unknown value stops the start, naming the accepted ones
    fair = fairness or visitors.FAIR
    fair = visitors.configure(dataclasses.replace(fair, model_slots=concurrency or fair.model_slots,
                                                  model_waiting=queue_size or fair.model_waiting))
    app_kwargs = dict(app_kwargs or {})
    app_kwargs["middleware"] = [*app_kwargs.get("middleware", []), Middleware(gate.JoinGate, demo=demo)]
    import torch  # before the first model load: the CPU kernel probe is timed (and cached) at this thread count

    torch.set_num_threads(visitors.threads_per_run(len(os.sched_getaffinity(0)), fair.model_slots))
    if compile_target:  # serving starts eagerly now; the default target switches once compiled and checked
        compiled.compile_in_background(lambda: get_pair(DEFAULT_KEY).target,  # with the layers its draft reads
                                       scoring_layers=lambda: getattr(get_pair(DEFAULT_KEY).draft, "feature_layers", ()))
    sessions.defer_session_configs()  # a new session's first event no longer works out every block's config
    if not limits.LIMITS.monitoring:
        for name, value in GRADIO_ANALYTICS.items():
            os.environ.setdefault(name, value)  # read when the queue is made, just below
    return demo.queue(default_concurrency_limit=fair.gradio_workers, max_size=fair.gradio_workers).launch(
        theme=gr.themes.Soft(), css_paths=[ASSETS / "app.css"], footer_links=["api", "gradio"],
        allowed_paths=[], max_file_size=MAX_UPLOAD_BYTES, state_session_capacity=limits.LIMITS.sessions,
        enable_monitoring=limits.LIMITS.monitoring, max_threads=fair.gradio_workers + 8, app_kwargs=app_kwargs,
        **kwargs)


# On ZeroGPU the default pair is loaded (onto cuda) now, for ZeroGPU to pack and hand to its GPU workers.
gpu.at_start(lambda: get_pair(DEFAULT_KEY))

if __name__ == "__main__":
    launch(build_demo())
