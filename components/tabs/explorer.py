"""The Iteration explorer tab: every iteration of the last Generate run, one at a time.

The grid (components.render.grid) shows the K draft blocks, the accepted sub-block and the
final token; the chart the distributions at the final position; the JSON the acceptance
tests. It reads the session's RunState only: no model runs here."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import gradio as gr

from . import explorer_inside
from ..wiring import private
from ..wiring.errors import user_error, user_errors
from ..wiring.explorer_js import GRID_JS
from ..render.chart_layout import MIN_WIDTH
from ..render.figures import distribution_figure
from ..render.grid import draft_grid_html
from ..wiring.outputs import NamedOutputs, skip
from ..wiring.run_state import RunState
from ..wiring.settings import number, shown as shown_value
from ..render.words import how_to_read, shown_expected, shown_h

PLAY_SECONDS = 1.5  # one iteration per tick: time to read the grid's caption
EMPTY = "<i>Generate something first: every iteration of the last run appears here.</i>"
MAX_ITERATION = 10**9  # a larger iteration number is refused; one past the run's last is clamped to it


@dataclass
class Shown(NamedOutputs):
    """The explorer's three panels for one iteration."""
    grid: object = skip()
    figure: object = skip()
    details: object = skip()


@dataclass
class Stepped(NamedOutputs):
    iteration: object = skip()
    grid: object = skip()
    figure: object = skip()
    details: object = skip()


@dataclass
class Played(NamedOutputs):
    iteration: object = skip()
    playing: object = skip()
    timer: object = skip()
    play_button: object = skip()
    grid: object = skip()
    figure: object = skip()
    details: object = skip()


@dataclass
class Toggled(NamedOutputs):
    playing: object = skip()
    timer: object = skip()
    play_button: object = skip()
    iteration: object = skip()


@dataclass
class Opened(NamedOutputs):
    tabs: object = skip()
    iteration: object = skip()
    grid: object = skip()
    figure: object = skip()
    details: object = skip()


def shown(state: RunState | None, index) -> Shown:
    """Iteration `index` (1-based, clamped) of the stored run."""
    if not state:
        return Shown(EMPTY, None, None)
    record = state.record
    i = min(max(int(index or 1), 1), len(record.iterations)) - 1
    it = record.iterations[i]
    top_text = state.token_text([t.token for t in it.final_top])
    figure = distribution_figure(it.final_top, top_text, it.final_kind, it.final_token, record.config.method)
    details = {
        "iteration": i + 1, "tau": it.num_accepted, "winning_draft": None if it.winning_draft is None else it.winning_draft + 1,
        "final_kind": it.final_kind, "final_token": state.token_text([it.final_token])[0],
        "expected_tau": shown_expected(it.expected_accepted),
        "tests": [{"draft": t.draft + 1, "sub_block": [t.start + 1, t.start + t.length], "h": shown_h(t.accept_prob),
                   "uniform": t.uniform, "accepted": t.accepted} for t in it.tests],
    }
    last = i == len(record.iterations) - 1
    cut_by = "the end-of-text token" if last and record.stopped_at_eos else "Max new tokens"
    return Shown(draft_grid_html(it, state.token_text, record.config.method, cut_by), figure, details)


def start(state: RunState | None) -> Stepped:
    """The slider reset to the stored run's iterations, and iteration 1."""
    n = len(state.record.iterations) if state else 0
    slider = gr.update(minimum=1, maximum=max(n, 2), value=1, step=1, interactive=n > 1)
    return Stepped(slider, *shown(state, 1))


def iteration_number(value) -> int:
    """The slider's iteration (1-based) as the browser sends it (a number; the events skip Gradio's preprocessing)."""
    return 1 if value is None else number("the iteration", value, 1, MAX_ITERATION)


def show_iteration(state, index) -> Shown:
    return shown(state, iteration_number(index))


def _clicked(event: gr.EventData) -> tuple[object, object]:
    """(index, value) of a click on the Generate output: OUTPUT_JS sends {index, value}; anyone else anything."""
    data = getattr(event, "_data", None)  # what the client sent (gr.EventData keeps it as _data)
    if not isinstance(data, dict):
        raise ValueError(f"a click on the output sends the iteration and the output's text, got {shown_value(data)}")
    return data.get("index"), data.get("value")


@user_errors
def open_iteration(state, event: gr.EventData) -> Opened:
    """A click on a token of the Generate output: its iteration, in the explorer tab."""
    index, value = _clicked(event)
    record = state.record if state else None
    if record is None or state.output is None or (isinstance(value, str) and value != state.output):
        # a run is stored when it ends: this output is still streaming, or an example's
        raise user_error("this output is not a finished Generate run yet: the explorer opens the iterations of the "
                         "last Generate run once it has finished (examples are not stored)")
    index = min(iteration_number(index or 1), len(record.iterations))
    return Opened(gr.Tabs(selected="explorer"), gr.update(value=index), *shown(state, index))


def toggle_play(state, index, playing) -> Toggled:
    """Play / pause the autoplay through the iterations; Play at the last iteration starts over."""
    index = iteration_number(index)
    playing = bool(playing) and bool(state)
    if playing or not state:
        return Toggled(False, gr.Timer(active=False), gr.Button(value="▶ Play"), gr.update())
    n = len(state.record.iterations)
    first = gr.update(value=1) if index >= n else gr.update()
    return Toggled(True, gr.Timer(active=True), gr.Button(value="⏸ Pause"), first)


def play_tick(state, index) -> Played:
    """The next iteration; the timer stops itself after the last one."""
    index = iteration_number(index)
    if not state:
        return Played(gr.update(), False, gr.Timer(active=False), gr.Button(value="▶ Play"), *shown(state, 1))
    n = len(state.record.iterations)
    index = min(index + 1, n)
    running = index < n
    return Played(gr.update(value=index), running, gr.Timer(active=running),
                  gr.Button(value="⏸ Pause" if running else "▶ Play"), *shown(state, index))


def step_iteration(state, index, delta) -> Stepped:
    index = iteration_number(index)
    if not state:
        return Stepped(gr.update(), *shown(state, 1))
    n = len(state.record.iterations)
    index = min(max(index + delta, 1), n)
    return Stepped(gr.update(value=index), *shown(state, index))


@dataclass
class ExplorerTab:
    iteration: gr.Slider
    grid: gr.HTML
    figure: gr.Plot
    details: gr.JSON
    previous_button: gr.Button
    play_button: gr.Button
    next_button: gr.Button
    playing: gr.State
    timer: gr.Timer
    inside: explorer_inside.InsideHandles | None = None  # the step-through and the drafts' tree

    def panels(self) -> dict:
        return {"grid": self.grid, "figure": self.figure, "details": self.details}


def build(page) -> None:
    with gr.Tab("Iteration explorer", id="explorer"):
        with gr.Row(elem_id="explorer-controls"):
            previous_button = gr.Button("◀ previous", size="sm", elem_id="explorer-previous", scale=0, min_width=110)
            play_button = gr.Button("▶ Play", size="sm", elem_id="explorer-play", scale=0, min_width=100)
            iteration = gr.Slider(1, 2, value=1, step=1, label="Iteration", interactive=False,
                                  elem_id="explorer-iteration",
                                  info="type a number, drag, or use the ← → keys (p / n) to step")
            next_button = gr.Button("next ▶", size="sm", elem_id="explorer-next", scale=0, min_width=110)
        playing = gr.State(False)
        timer = gr.Timer(PLAY_SECONDS, active=False)
        # Grid (with its click-to-pin detail panel) and chart side by side where both fit; the chart keeps
        # the width every chart is laid out for (chart_layout.MIN_WIDTH) and wraps below the grid when the
        # row is narrower (beside the open sidebar at 1024 px it was squeezed to 190 px, its title cut).
        with gr.Row(elem_id="explorer-main", equal_height=False, elem_classes=["chart-row"]):
            with gr.Column(scale=3, min_width=340):
                grid = gr.HTML(EMPTY, elem_id="draft-grid", js_on_load=GRID_JS, apply_default_css=False)
            with gr.Column(scale=2, min_width=MIN_WIDTH):
                figure = gr.Plot(label="Distributions at the final position", elem_id="distribution-plot",
                                 show_label=False)  # its title names it; the label sat over the title
        how_to_read("explorer")
        inside = explorer_inside.build()
        details = gr.JSON(label="This iteration's acceptance tests")
    page.tab_handles.explorer = ExplorerTab(iteration, grid, figure, details, previous_button, play_button, next_button,
                                         playing, timer, inside)


def wire_events(page) -> None:
    tab: ExplorerTab = page.tab_handles.explorer
    state, panels = page.run_state, tab.panels()
    stepped = {"iteration": tab.iteration, **panels}
    played = {"iteration": tab.iteration, "playing": tab.playing, "timer": tab.timer, "play_button": tab.play_button,
              **panels}
    # change, not release: typing a number, the arrow keys and a programmatic step all redraw the grid.
    private.on(tab.iteration.change, show_iteration, [state, tab.iteration], panels, trigger_mode="always_last")
    private.on(page.tab_handles.generate.output.select, open_iteration, [state],
               {"tabs": page.tabs, "iteration": tab.iteration, **panels})
    toggled = {"playing": tab.playing, "timer": tab.timer, "play_button": tab.play_button, "iteration": tab.iteration}
    private.on(tab.play_button.click, toggle_play, [state, tab.iteration, tab.playing], toggled)
    private.on(tab.timer.tick, play_tick, [state, tab.iteration], played)
    for button, delta in ((tab.previous_button, -1), (tab.next_button, 1)):
        private.on(button.click, functools.partial(step_iteration, delta=delta), [state, tab.iteration], stepped)
    explorer_inside.wire_events(page, tab.inside, tab.grid, tab.iteration)
