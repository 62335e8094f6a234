"""The Grid's heatmap (Plotly, pure): rows K, columns L, one cell per configuration (spectr_gbv.bench.grid_cells).

Each cell names the rule its value is of (the best exact rule, by its short label) and the value,
then its marks, each read off one paired 95 % interval and each with a key line of its own:

* TIE_MARK: the best ties the runner-up (the interval of best minus runner-up covers 0);
* NO_GAIN_MARK: no gain over the baseline (the interval of the rule minus the baseline covers 0).

A cell where nothing separates at this number of prompts (every exact rule's interval against the
best covers 0) is drawn muted, a grey veil over it, and its hover says "too few prompts to rank".
The hover gives the rule, both intervals, the rules within noise of the best and those that
coincide with it. The colours are a blue-to-yellow scale (Cividis: readable under the common
colour-vision deficiencies and in greyscale), never red: red means lossy in this app. A rule that
uses one draft is named as ignoring K, since K is a row of this chart.
"""

from __future__ import annotations

import math
from typing import Sequence

import plotly.graph_objects as go

from spectr_gbv.bench.grid_cells import EXPECTED, Cell

from .chart_layout import figure, method_label, note_figure, subtitle_lines
from .marks import k_legend_name

TIE_MARK = "~"
NO_GAIN_MARK = "="
NO_BOUNDS = "one prompt: no interval"
UNRANKED = "too few prompts to rank"
MUTED_FILL = "rgba(236, 236, 236, 0.82)"  # the veil over a cell that cannot be ranked
MUTED_TEXT = "#555555"


def _rule(method: str) -> str:
    return k_legend_name(method, "K").replace("<br>", " ")


def _bounds(interval: tuple[float, float, float]) -> str:
    mean, low, high = interval
    if math.isnan(mean):
        return "no E[tau | drafts] to compare"
    if math.isnan(low):
        return f"{mean:+.3f} ({NO_BOUNDS})"
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


def _interval_text(c: Cell) -> str:
    return _bounds(c.interval)


def marks(c: Cell, value: str) -> str:
    """The cell's marks: TIE_MARK where the best (the rule shown) ties the runner-up, NO_GAIN_MARK where the rule
    shows no gain over the baseline; "" for neither."""
    shows_best = c.rule == c.best
    return "".join([TIE_MARK if shows_best and c.tie else "", NO_GAIN_MARK if c.no_gain else ""])


def cell_text(c: Cell, value: str) -> str:
    """What the cell shows: the rule's short label, then its value to 3 places (a gain signed) and its marks."""
    if math.isnan(c.value):
        return f"{method_label(c.rule)}<br>–"
    number = f"{c.value:.3f}" if value == EXPECTED else f"{c.value:+.3f}"
    mark = marks(c, value)
    return f"{method_label(c.rule)}<br>{number}" + (f" {mark}" if mark else "")


def hover_text(c: Cell, value: str) -> str:
    lines = [f"K = {c.K}, L = {c.L}, T = {c.T:g}, {c.prompts} prompts"]
    best_value = c.values.get(c.best, math.nan)
    if value == EXPECTED:
        lines.append(f"best exact rule: {_rule(c.rule)}, E[tau | drafts] {c.value:.3f}")
    else:
        lines.append(f"{_rule(c.rule)} − {_rule(c.baseline)} in E[tau | drafts]")
        if c.best and c.best != c.rule:
            lines.append(f"best exact rule here: {method_label(c.best)}, E[tau | drafts] {best_value:.3f}")
    if c.unranked:
        lines.append(f"{UNRANKED}: every rule's 95 % interval against the best covers 0")
    if c.runner_up is not None:
        verdict = {True: f"{TIE_MARK} ties the runner-up (the interval covers 0)",
                   False: "ahead of the runner-up (the interval excludes 0)",
                   None: "one prompt: a tie cannot be judged"}[c.tie]
        lines.append(f"runner-up: {method_label(c.runner_up)}; {method_label(c.best)} − "
                     f"{method_label(c.runner_up)}: {_bounds(c.runner_interval)}, {verdict}")
    if c.rule == c.baseline:
        lines.append(f"{method_label(c.rule)} is the baseline itself")
    else:
        verdict = {True: f"{NO_GAIN_MARK} no gain over {method_label(c.baseline)} (the interval covers 0)",
                   False: "the interval excludes 0", None: "one prompt: a gain cannot be judged"}[c.no_gain]
        lines.append(f"paired over prompts, {method_label(c.rule)} − {method_label(c.baseline)}: "
                     f"{_interval_text(c)}, {verdict}")
    if c.same:
        lines.append(f"coincide (the same values): {', '.join(method_label(m) for m in (c.rule, *c.same))}")
    if c.tied:
        lines.append(f"within noise of the best: {', '.join(method_label(m) for m in c.tied)}")
    return "<br>".join(lines)


def _text_colour(value, z) -> str:
    """Near-black on Cividis's light (yellow) half, white on its dark (blue) half: contrast either way."""
    values = [v for row in z for v in row if v is not None]
    if value is None or not values or max(values) == min(values):
        return "#111111" if value is None else "#ffffff"
    return "#111111" if (value - min(values)) / (max(values) - min(values)) > 0.55 else "#ffffff"


def title_of(value: str, rule: str, baseline: str) -> str:
    if value == EXPECTED:
        return "Best exact rule's E[tau | drafts]"
    first = "the best exact rule" if rule == "best" else method_label(rule)
    return f"Gain of {first} over {method_label(baseline)}"


def key_lines(cells: Sequence[Cell], value: str) -> list[str]:
    """The key: what the cells show, then one line per mark the chart carries."""
    first = cells[0]
    shown = "its best exact rule" if first.rule == first.best or value == EXPECTED else method_label(first.rule)
    what = "E[tau\u00a0|\u00a0drafts]" if value == EXPECTED else f"gain over {method_label(first.baseline)}"
    lines = [f"each cell: {shown} and its {what}"]
    if any(TIE_MARK in marks(c, value) for c in cells):
        lines.append(f"{TIE_MARK} ties the runner-up: the 95 % interval of best − runner-up covers 0")
    if any(NO_GAIN_MARK in marks(c, value) for c in cells):
        rule = "best" if value == EXPECTED or first.rule == first.best else method_label(first.rule)
        base = method_label(first.baseline)
        lines.append(f"{NO_GAIN_MARK} no gain over {base}: the 95 % interval of {rule} − {base} covers 0")
    if any(c.unranked for c in cells):
        lines.append(f"grey: {UNRANKED}: every rule's 95 % interval against the best covers 0")
    return lines


def kl_heatmap(cells: Sequence[Cell], value: str, rule: str, baseline: str, note: str = "") -> go.Figure:
    """The heatmap of `cells` (one T): K up the side, L along the bottom, hover with the paired intervals."""
    title = title_of(value, rule, baseline)
    if not cells:
        return note_figure(title, note or "no configuration has finished yet")
    Ks, Ls = sorted({c.K for c in cells}), sorted({c.L for c in cells})
    at = {(c.K, c.L): c for c in cells}
    z = [[None if (k, l) not in at or math.isnan(at[k, l].value) else at[k, l].value for l in Ls] for k in Ks]
    text = [[cell_text(at[k, l], value) if (k, l) in at else "" for l in Ls] for k in Ks]
    hover = [[hover_text(at[k, l], value) if (k, l) in at else "not run" for l in Ls] for k in Ks]
    first = cells[0]
    subtitle = subtitle_lines(
        f"coupled runs, {first.prompts} prompts, T = {first.T:g}; E[tau | drafts] is accepted draft tokens per "
        "iteration", *key_lines(cells, value), note)
    fig = figure(title, "L (draft length)", "K (drafts)", subtitle)
    gain = value != EXPECTED
    fig.add_trace(go.Heatmap(
        z=z, x=[str(l) for l in Ls], y=[str(k) for k in Ks], text=text,
        customdata=hover, hovertemplate="%{customdata}<extra></extra>", colorscale="Cividis",
        colorbar=dict(title=dict(text="gain" if gain else "E[tau]", side="right"), thickness=14),
        xgap=2, ygap=2))
    for row, k in enumerate(Ks):  # each value written on its cell, dark on the scale's light end, light on its dark end
        for column, l in enumerate(Ls):
            muted = (k, l) in at and at[k, l].unranked
            if muted:  # nothing separates here: a grey veil under the text (shapes sit below annotations)
                fig.add_shape(type="rect", x0=column - 0.5, x1=column + 0.5, y0=row - 0.5, y1=row + 0.5,
                              xref="x", yref="y", fillcolor=MUTED_FILL, line=dict(width=0), layer="above",
                              name=f"{UNRANKED} K={k} L={l}")
            # By position: a category axis reads a number-like label ("2") as the index of a category.
            colour = MUTED_TEXT if muted else _text_colour(z[row][column], z)
            fig.add_annotation(x=column, y=row, text=text[row][column], showarrow=False,
                               font=dict(size=13, color=colour))
    fig.update_xaxes(type="category", title_text="L (draft length)")
    fig.update_yaxes(type="category", title_text="K (drafts)")
    return fig
