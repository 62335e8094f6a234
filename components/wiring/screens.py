"""Narrow screens: the sidebar starts closed on a window narrower than NARROW_PX (a projector at
1024 px, a tablet), so the output has the width. The rest of the narrow layout is CSS
(assets/app.css: charts one per row, tabs wrapped by name, the About picture scaled)."""

from __future__ import annotations

import gradio as gr

from . import private

NARROW_PX = 1100


def sidebar_for_width(width) -> gr.Sidebar:
    """Closed below NARROW_PX; an unreadable width (no JavaScript, a bad value) leaves it open."""
    try:
        narrow = 0 < float(width) < NARROW_PX
    except (TypeError, ValueError):
        narrow = False
    return gr.Sidebar(open=not narrow)


def wire(demo: gr.Blocks, sidebar: gr.Sidebar) -> None:
    """When the page opens, its width travels in a hidden box and sets the sidebar."""
    width = gr.Number(visible=False)
    private.on(demo.load, sidebar_for_width, width, sidebar, js="() => [window.innerWidth]", queue=False)
