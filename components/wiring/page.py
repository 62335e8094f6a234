"""The page's shared parts: the sidebar's controls, the prompt, the session's run state and the tabs.

`app.build_demo` makes them, then each tab module (components.tabs) builds its tab (`build`) and, once every
tab exists, wires its events (`wire`): a tab's events may update another tab's components
(Generate fills the explorer), so wiring waits until all are built."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import gradio as gr

from ..serving.request import SETTINGS

if TYPE_CHECKING:  # types only: the tabs import this module, never the other way at run time
    from ..tabs.compare import CompareTab
    from ..tabs.explorer import ExplorerTab
    from ..tabs.fidelity import FidelityTab
    from ..tabs.generate import GenerateTab
    from ..tabs.grid_view import GridTab
    from ..tabs.lesson import LessonTab
    from ..tabs.playground import PlaygroundTab
    from ..tabs.race import RaceTab
    from ..tabs.sweep import SweepTab


@dataclass
class Sidebar:
    pair: gr.Dropdown
    method: gr.Dropdown
    num_drafts: gr.Slider
    draft_length: gr.Slider
    temperature: gr.Slider
    max_new_tokens: gr.Slider
    seed: gr.Number
    methods: gr.CheckboxGroup
    presentation: gr.Checkbox
    link_controls: tuple
    box: gr.Sidebar
    playground_note: gr.Markdown  # in K and L's place while the Playground is chosen
    class_button: gr.Button | None = None  # "Start a class" (components.wiring.classroom), under presentation mode


@dataclass
class TabHandles:
    """Each tab's components that another part of the page wires to, set by the tab's `build`."""

    generate: GenerateTab | None = None
    explorer: ExplorerTab | None = None
    compare: CompareTab | None = None
    sweep: SweepTab | None = None
    fidelity: FidelityTab | None = None
    lesson: LessonTab | None = None
    playground: PlaygroundTab | None = None
    race: RaceTab | None = None
    grid: GridTab | None = None


@dataclass
class Page:
    demo: gr.Blocks
    sidebar: Sidebar
    prompt: gr.Textbox
    run_state: gr.State
    link_note: gr.Markdown
    fold: gr.Accordion  # the lossy note and the prompt: closed in presentation mode
    tabs: gr.Tabs | None = None
    tab_handles: TabHandles = field(default_factory=TabHandles)  # each tab's components

    @property
    def settings_inputs(self) -> list:
        """K, L, T, max new tokens and seed: the settings every model run reads, in the handlers' order."""
        return [getattr(self.sidebar, name) for name in SETTINGS]  # the Sidebar's fields carry RunRequest's names

    @property
    def controls(self) -> dict:
        """The controls a lesson step or a shared link sets, by name."""
        s = self.sidebar
        return {"pair": s.pair, "prompt": self.prompt, "method": s.method, "K": s.num_drafts, "L": s.draft_length,
                "T": s.temperature, "seed": s.seed}
