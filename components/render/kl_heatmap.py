"""The Grid's heatmap (Plotly, pure): rows K, columns L, one cell per configuration (spectr_gbv.bench.grid_cells).

Each cell shows its value, and "~" where the paired 95 % interval cannot tell the rules apart (a
tie within noise); the hover gives the rule, the paired interval and the rules that tie or
coincide. The colours are a blue-to-yellow scale (Cividis: readable under the common colour-vision
deficiencies and in greyscale), never red: red means lossy in this app. A rule that uses one draft
is named as ignoring K, since K is a row of this chart.
"""

from __future__ import annotations

import math
from typing import Sequence

import plotly.graph_objects as go

from spectr_gbv.bench.grid_cells import EXPECTED, Cell

from .chart_layout import figure, method_label, note_figure, subtitle_lines, top_margin
from .marks import k_legend_name

TIE_MARK = "~"
NO_BOUNDS = "one prompt: no interval"


def _rule(method: str) -> str:
    return k_legend_name(method, "K").replace("<br>", " ")


def _interval_text(c: Cell) -> str:
    mean, low, high = c.interval
    if math.isnan(mean):
        return "no E[tau | drafts] to compare"
    if math.isnan(low):
        return f"{mean:+.3f} ({NO_BOUNDS})"
    return f"{mean:+.3f} [{low:+.3f}, {high:+.3f}]"


def cell_text(c: Cell, value: str) -> str:
    """What the cell shows: its value to 3 places (a gain signed), with TIE_MARK where the interval cannot tell."""
    if math.isnan(c.value):
        return "–"
    text = f"{c.value:.3f}" if value == EXPECTED else f"{c.value:+.3f}"
    return text + (f" {TIE_MARK}" if c.tie else "")


def hover_text(c: Cell, value: str) -> str:
    lines = [f"K = {c.K}, L = {c.L}, T = {c.T:g}, {c.prompts} prompts"]
    if value == EXPECTED:
        lines.append(f"best exact rule: {_rule(c.rule)}, E[tau | drafts] {c.value:.3f}")
    else:
        lines.append(f"{_rule(c.rule)} − {_rule(c.baseline)} in E[tau | drafts]")
    if c.rule == c.baseline:
        lines.append(f"{method_label(c.rule)} is the baseline itself")
    else:
        lines.append(f"paired over prompts, {method_label(c.rule)} − {method_label(c.baseline)}: {_interval_text(c)}")
    if c.same:
        lines.append(f"coincide (the same values): {', '.join(method_label(m) for m in (c.rule, *c.same))}")
    if c.tied:
        lines.append(f"tie within noise with: {', '.join(method_label(m) for m in c.tied)}")
    elif value != EXPECTED and c.tie:
        lines.append("tie within noise: the 95 % interval covers 0")
    if c.tie is None and c.rule != c.baseline:
        lines.append("one prompt: a tie cannot be judged")
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
    tie = any(c.tie for c in cells)
    subtitle = subtitle_lines(
        f"coupled runs, {first.prompts} prompts, T = {first.T:g}; E[tau | drafts] is accepted draft tokens per "
        "iteration",
        f"{TIE_MARK} tie within noise (the 95 % interval covers 0)" if tie else "", note)
    fig = figure(title, "L (draft length)", "K (drafts)", subtitle)
    gain = value != EXPECTED
    fig.add_trace(go.Heatmap(
        z=z, x=[str(l) for l in Ls], y=[str(k) for k in Ks], text=text,
        customdata=hover, hovertemplate="%{customdata}<extra></extra>", colorscale="Cividis",
        colorbar=dict(title=dict(text="gain" if gain else "E[tau]", side="right"), thickness=14),
        xgap=2, ygap=2))
    for row in range(len(Ks)):  # each value written on its cell, dark on the scale's light end, light on its dark end
        for column in range(len(Ls)):
            # By position: a category axis reads a number-like label ("2") as the index of a category.
            fig.add_annotation(x=column, y=row, text=text[row][column], showarrow=False,
                               font=dict(size=14, color=_text_colour(z[row][column], z)))
    fig.update_xaxes(type="category", title_text="L (draft length)")
    fig.update_yaxes(type="category", title_text="K (drafts)")
    fig.update_layout(margin_t=top_margin(subtitle))
    return fig
