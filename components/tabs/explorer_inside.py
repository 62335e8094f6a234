"""Inside the explorer's iteration: the step-through of its verification and the tree of its drafts.

Both read the iteration the explorer shows from the session's RunState (no model runs). They
follow the grid: whatever redraws it (the slider, Play, previous / next, a click on the output,
a new run) redraws the tree and starts the step-through over at its first stage.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from ..render.draft_tree import draft_tree_html
from ..render.step_through import clamp_stage, step_through_html
from ..wiring import private
from ..wiring.errors import user_errors
from ..wiring.outputs import NamedOutputs, skip
from ..wiring.run_state import RunState
from ..wiring.settings import number

EMPTY_STEPS = "<i>Generate something first: the step-through walks through one iteration of the last run.</i>"
EMPTY_TREE = "<i>The drafts' tree appears here after a run.</i>"
MAX_ITERATION = 10**9  # as the explorer's slider: a larger number is refused, one past the last clamped
MAX_STAGE = 10**6  # a larger stage number is refused; one past the iteration's last is clamped to it


@dataclass
class Inside(NamedOutputs):
    steps: object = skip()
    stage: object = skip()  # the shown stage, 0-based (a gr.State)
    tree: object = skip()


def _iteration(state: RunState, index) -> tuple[object, str | None]:
    """The explorer's iteration `index` (1-based, clamped) and what cut it short, if it is the cut last one."""
    record = state.record
    i = min(1 if index is None else number("the iteration", index, 1, MAX_ITERATION), len(record.iterations)) - 1
    it = record.iterations[i]
    last = i == len(record.iterations) - 1
    cut_by = ("the end-of-text token" if record.stopped_at_eos else "Max new tokens") if last else None
    return it, cut_by


@user_errors
def follow(state: RunState | None, index, predict=False) -> Inside:
    """The iteration the explorer shows: its tree, and the step-through at its first stage."""
    if not state:
        return Inside(EMPTY_STEPS, 0, EMPTY_TREE)
    it, cut_by = _iteration(state, index)
    return Inside(step_through_html(it, state.token_text, state.record.config.method, 0, cut_by, predict is True), 0,
                  draft_tree_html(it, state.token_text))


@user_errors
def step(state: RunState | None, index, stage, delta: int | None, predict=False) -> Inside:
    """One stage on (delta 1) or back (-1), the same again (0), or back to the first (None), clamped to the
    iteration's stages; `predict` folds a test's result under "kept or not?"."""
    if not state:
        return Inside(EMPTY_STEPS, 0)
    it, cut_by = _iteration(state, index)
    stage = 0 if delta is None else clamp_stage(it, number("the step", stage or 0, 0, MAX_STAGE) + delta)
    return Inside(step_through_html(it, state.token_text, state.record.config.method, stage, cut_by, predict is True),
                  stage)


def _stepper(delta: int | None):
    """`step` as the page calls it: the explorer's state, iteration, stage and the predict box, in that order."""

    def stepped(state, index, stage, predict):
        return step(state, index, stage, delta, predict)

    return stepped


@dataclass
class InsideHandles:
    steps: gr.HTML
    stage: gr.State
    tree: gr.HTML
    first_button: gr.Button
    back_button: gr.Button
    step_button: gr.Button
    predict: gr.Checkbox  # predict, then reveal: each test asks "kept or not?" before its result


TREE_MIN_PX = 460


def build() -> InsideHandles:
    """The step-through (left) and the drafts' tree (right), in a row under the grid and chart."""
    with gr.Row(elem_id="explorer-inside", equal_height=False, elem_classes=["chart-row"]):
        with gr.Column(scale=3, min_width=340, elem_id="explorer-steps-column"):
            with gr.Row(elem_id="explorer-step-controls"):
                first_button = gr.Button("↺ first step", size="sm", elem_id="explorer-step-first", scale=0,
                                         min_width=120)
                back_button = gr.Button("◀ step back", size="sm", elem_id="explorer-step-back", scale=0,
                                        min_width=140)
                step_button = gr.Button("step ▶", size="sm", elem_id="explorer-step", scale=0, min_width=100,
                                        variant="primary")
                predict = gr.Checkbox(False, label="Predict, then reveal", elem_id="explorer-predict", scale=0,
                                      min_width=220,
                                      info="each test asks “kept or not?” before its result")
            steps = gr.HTML(EMPTY_STEPS, elem_id="explorer-steps", apply_default_css=False)
        # Wide enough for K = 4 drafts and the final token side by side (components/render/draft_tree.py: five
        # columns, 442 px); a narrower main area (1024 px with the sidebar open) puts the tree under the steps at
        # full width instead of scrolling it sideways.
        with gr.Column(scale=2, min_width=TREE_MIN_PX, elem_id="draft-tree-column"):
            tree = gr.HTML(EMPTY_TREE, elem_id="draft-tree", apply_default_css=False)
    return InsideHandles(steps, gr.State(0), tree, first_button, back_button, step_button, predict)


def wire_events(page, handles: InsideHandles, grid: gr.HTML, iteration: gr.Slider) -> None:
    state = page.run_state
    # The grid's change, not the slider's: a new run that opens on the same iteration number redraws the grid too.
    private.on(grid.change, follow, [state, iteration, handles.predict],
               {"steps": handles.steps, "stage": handles.stage, "tree": handles.tree}, trigger_mode="always_last")
    outputs = {"steps": handles.steps, "stage": handles.stage}
    inputs = [state, iteration, handles.stage, handles.predict]
    for button, delta in ((handles.first_button, None), (handles.back_button, -1), (handles.step_button, 1)):
        private.on(button.click, _stepper(delta), inputs, outputs)
    private.on(handles.predict.change, _stepper(0), inputs, outputs)  # the shown stage again, asked or told
