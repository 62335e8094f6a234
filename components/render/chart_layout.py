"""The house layout every Plotly chart of the app shares, and the axis and legend helpers (pure).

Charts are about 480 px wide when two sit side by side beside the open sidebar, and down to
about 360 px on a narrower screen, so:

* the legend sits at the bottom of the figure (`yref="container"`): Plotly then reserves its
  height below the axes' own margin, so it can never cover the x-axis title or the ticks (a
  legend placed under the plot in paper coordinates moved up into the title as the plot shrank);
* subtitles are short lines (at most SUBTITLE_CHARS characters each, `<br>` between them);
* axes of positions, iterations and tau have whole-number ticks (no 1.5 between two positions);
* nothing is written on the bars: labels go on the ticks, in the legend or in the subtitle.
"""

from __future__ import annotations

import math
import textwrap
from typing import Sequence

import plotly.graph_objects as go
import plotly.io as pio
from spectr_gbv import AUTOREGRESSIVE, METHODS

# The narrowest a chart is laid out: a row of two charts wraps (each then the row's whole width) when
# they cannot both have this much, e.g. beside the open sidebar on a 1100-1300 px screen, where two
# charts of 330 px ran their method names into each other.
MIN_WIDTH = 440
HEIGHT = 460  # every chart: two in a row line up; a three-row legend still leaves the plot ~200 px
# Two-line legend entries are measured one line short by Plotly: the legend starts this share of the
# figure's height above its bottom edge, so the last entry's second line is not cut off.
LEGEND_FLOOR = 0.03
# From the figure's left edge, not the plot's: the whole width for the entries.
LEGEND = dict(orientation="h", yref="container", y=LEGEND_FLOOR, yanchor="bottom", xref="container", x=0.01,
              xanchor="left", valign="top", title=None)
# The title hangs from the top edge and its subtitle below it, so the top margin is what they need
# (with Plotly's 'auto' the title sits mid-margin and a third subtitle line ran into the plot).
# Its pad keeps it under Plotly's toolbar (the modebar), which Gradio shows over the top right.
TITLE = dict(yref="container", y=1.0, yanchor="top", pad=dict(t=32))
TITLE_PX, SUBTITLE_LINE_PX = 70, 20  # the top margin of a title alone, and what each subtitle line adds
# Every chart is drawn on "plotly_white", made the process's default template rather than passed to each
# figure: a template given to `update_layout` is validated and copied whole (about 30 ms a chart, most of a
# teaching run's rendering), while a new figure takes the default one without that check.
pio.templates.default = "plotly_white"
LAYOUT = dict(margin=dict(l=50, r=20, t=TITLE_PX + SUBTITLE_LINE_PX, b=10), height=HEIGHT,
              font=dict(size=14), legend=LEGEND)  # >= 14 px
SUBTITLE_CHARS = 52  # about 330 px of 14 px subtitle text: fits a 360 px chart


def method_label(name: str) -> str:
    return METHODS[name].label if name in METHODS else ("AR" if name == AUTOREGRESSIVE else name)


def legend_name(name: str) -> str:
    """A method's name in a legend: the released rule's long label on two lines, so two entries fit
    side by side in a half-screen chart (Plotly gives every entry the width of the widest)."""
    return method_label(name).replace(" as released ", " as released<br>")


def tick_text(label: str) -> str:
    """A method's name as a category tick, broken at hyphens and spaces onto short lines, so six
    methods fit under a chart half a screen wide without Plotly tilting them out of the frame
    ("SpecTr-GBV as released (lossy)" was cut off); a note in brackets ("(noisy)") on a line of its own."""
    lines = label.replace(" as released ", "<br>released<br>").replace(" (", "<br>(").split("<br>")
    return "<br>".join(tick_line(line) for line in lines)


def tick_line(line: str) -> str:
    return line.replace("-", "-<br>") if len(line) > 5 else line  # "AS-BV+H" crowded its neighbours at 7 methods


def method_axis(fig: go.Figure, labels: Sequence[str], notes: Sequence[str] | None = None, **where) -> None:
    """Category ticks for the methods, upright and wrapped (`tick_text`), with the margin they need;
    `notes` (one per method) go on a line of their own under each name, not on the bars."""
    text = [tick_text(t) for t in labels]
    if notes is not None:
        text = [f"{t}<br><i>{note}</i>" for t, note in zip(text, notes)]
    fig.update_xaxes(tickmode="array", tickvals=list(labels), ticktext=text, tickangle=0, automargin=True, **where)


NICE_STEPS = (1, 2, 5)


def whole_step(first: int, last: int, most_ticks: int = 10) -> int:
    """The tick step of a whole-number axis from `first` to `last`: 1, 2, 5, 10, 20, 50, ... with
    at most `most_ticks` ticks."""
    span = max(int(last) - int(first), 0) + 1
    scale = 1
    while True:
        for step in NICE_STEPS:
            if math.ceil(span / (step * scale)) <= most_ticks:
                return step * scale
        scale *= 10


def whole_number_axis(fig: go.Figure, first: int, last: int, **where) -> None:
    """x ticks on whole numbers only (draft positions, tau, iterations): a step of 1 counts from
    `first`; a longer step lands on its multiples (5, 10, 15, not 1, 6, 11)."""
    step = whole_step(first, last)
    fig.update_xaxes(tickmode="linear", tick0=first if step == 1 else 0, dtick=step, automargin=True, **where)


def subtitle_lines(*parts: str) -> str:
    """A subtitle of `parts`, each wrapped at SUBTITLE_CHARS onto lines of its own (a formula keeps its
    non-breaking spaces together); empty parts are left out."""
    return "<br>".join(line for part in parts if part
                       for line in textwrap.wrap(part, SUBTITLE_CHARS, break_on_hyphens=False, break_long_words=False))


def top_margin(subtitle: str | None, extra_lines: int = 0) -> int:
    """The top margin for the title, the subtitle's lines and `extra_lines` more (a panel's titles)."""
    lines = (subtitle.count("<br>") + 1 if subtitle else 0) + extra_lines
    return TITLE_PX + SUBTITLE_LINE_PX * max(lines, 1)


# Up to three subtitle lines fit a chart of its planned height; each line past them adds its own pixels to the
# figure's height instead of taking them from the plot. (A long note once left a sweep chart beside the
# open sidebar with a plot of negative height: Plotly threw "Something went wrong with axis scaling" and
# the page never received the run's last frame.)
GROWN_PAST = TITLE_PX + 3 * SUBTITLE_LINE_PX


def fit_top(fig: go.Figure, subtitle: str | None, extra_lines: int = 0) -> go.Figure:
    """The top margin for the title and `subtitle` (`top_margin`), the figure's height grown by what the
    margin takes past GROWN_PAST, so the plot keeps its planned height however many lines come; idempotent
    (a later call with a longer subtitle grows it by the difference only)."""
    before, after = fig.layout.margin.t, top_margin(subtitle, extra_lines)
    fig.update_layout(margin_t=after, height=grown_height(fig.layout.height or HEIGHT, before, after))
    return fig


def grown_height(height: int, before: int | None, after: int) -> int:
    """A chart's height once its top margin goes from `before` (None: not set) to `after`: grown by what
    `after` takes past GROWN_PAST, less what `before` already took."""
    return height + max(0, after - GROWN_PAST) - max(0, (before if before is not None else after) - GROWN_PAST)


def figure(title: str, x_title: str, y_title: str, subtitle: str | None = None, data: Sequence[dict] = (),
           xaxis: dict | None = None, yaxis: dict | None = None, **layout) -> go.Figure:
    """A chart in the house layout, of `data` (traces as dicts), with `xaxis`, `yaxis` and `layout`'s
    other parts added; the top margin grows with the subtitle's lines."""
    # Built by one constructor call: each `update_layout` or `add_bar` walks Plotly's property tree again
    # (a chart built by four updates cost 15 ms, most of a teaching run's rendering). The margin and
    # height are what `fit_top` gives a new chart in the house layout.
    margin_t = top_margin(subtitle)
    return go.Figure(data=list(data), layout=dict(
        LAYOUT, title=dict(TITLE, text=title, subtitle=dict(text=subtitle) if subtitle else None),
        xaxis=dict(title=dict(text=x_title), automargin=True, **(xaxis or {})),
        yaxis=dict(title=dict(text=y_title), automargin=True, **(yaxis or {})),
        margin=dict(LAYOUT["margin"], t=margin_t), height=grown_height(HEIGHT, LAYOUT["margin"]["t"], margin_t),
        **layout))


def note_figure(title: str, text: str) -> go.Figure:
    """A chart that says why it has nothing to draw."""
    fig = figure(title, "", "")
    # Short lines: the note must fit a chart half a 1024 px screen wide.
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font=dict(size=14))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig
