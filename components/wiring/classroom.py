"""A class in one click: "Start a class" sets the Lesson's world and opens it, on a projector's settings.

The button sets the Toy world (with the Lesson's prompt), SD with K = 1 and L = 3 (the settings
the Lesson's first steps assume), turns presentation mode on and opens the Lesson at its first
step, and closes the sidebar (at 1024 px it pushed the first try-it below the fold). The button
stands at the top of the sidebar and at the top of the Lesson (where the sidebar starts closed, the
sidebar's is out of sight). A shared link carries the same things (components.wiring.share: `present`, `step`, `tab`), so
a teacher can also hand out the class as a link.
"""

from __future__ import annotations

from dataclasses import dataclass

import gradio as gr

from spectr_gbv.pairs import TOY_KEY

from . import private
from .outputs import NamedOutputs, skip

CLASS_SETTINGS = {"pair": TOY_KEY, "method": "sd", "K": 1, "L": 3}
CLASS_TAB, CLASS_STEP = "lesson", 1


@dataclass
class ClassStart(NamedOutputs):
    pair: object = skip()
    prompt: object = skip()
    method: object = skip()
    K: object = skip()
    L: object = skip()
    presentation: object = skip()
    tabs: object = skip()
    walkthrough: object = skip()


def class_settings() -> dict:
    """The settings a class starts with: CLASS_SETTINGS, the Lesson's Toy prompt, presentation on, the Lesson open."""
    from ..tabs.lesson_try import TOY_PROMPT  # the Lesson's own prompt (its module imports the tabs)

    return CLASS_SETTINGS | {"prompt": TOY_PROMPT, "presentation": True, "tab": CLASS_TAB, "step": CLASS_STEP}


def start_class() -> ClassStart:
    """The button's handler: every setting of `class_settings` into its control."""
    chosen = class_settings()
    values = {name: gr.update(value=chosen[name]) for name in ("pair", "prompt", "method", "K", "L", "presentation")}
    return ClassStart(**values, tabs=gr.Tabs(selected=chosen["tab"]),
                      walkthrough=gr.Walkthrough(selected=chosen["step"]))


# Closes the sidebar where it is open (Gradio's own toggle), before the settings change.
CLOSE_SIDEBAR_JS = """() => {
  const side = document.querySelector('.sidebar');
  const toggle = document.querySelector("button[aria-label='Toggle Sidebar']");
  if (side && toggle && side.getBoundingClientRect().right > 0) toggle.click();
  return [];
}"""


def build(elem_id: str = "start-class") -> gr.Button:
    return gr.Button("Start a class", size="sm", variant="secondary", elem_id=elem_id)


def wire(page, button: gr.Button) -> None:
    """The button closes the sidebar and sets the page's controls (their own change events then cap the sliders
    and switch the look)."""
    controls = page.controls
    outputs = {"pair": controls["pair"], "prompt": controls["prompt"], "method": controls["method"],
               "K": controls["K"], "L": controls["L"], "presentation": page.sidebar.presentation, "tabs": page.tabs,
               "walkthrough": page.tab_handles.lesson.walkthrough}
    private.on(button.click, start_class, None, outputs, js=CLOSE_SIDEBAR_JS, queue=False, show_progress="hidden")
