"""Figures of repeated measurements: mean, 95 % band, theory line, iterations per point (Plotly, pure).

A point is the `components.wiring.runs.point_stats` of its repeats (keys: mean_block_efficiency,
band_low, band_high, theory_acceptance_length, iterations, repeats). Block efficiency is in
tokens per target call: the bars start at 1, what plain AR gets, and the lines' axis is fitted to
their points. An axis is fitted to the points, never to a band (a band of two seeds can be ten
times wider than the points' spread): a band past it is clipped and the chart says so, and the
leading methods whose bands overlap are named as a tie within noise (components.render.marks).
The theory line is
1 + mean E[tau | drafts] (the methods' `expected_accepted` at the drafts actually drawn):
the same quantity without the noise of the acceptance draws.
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go

from .chart_layout import figure as _figure
from .chart_layout import method_axis, method_label, subtitle_lines
from .marks import (add_subtitle, band_clipped_note, clip, clipped_methods, fitted_range, k_legend_name,
                    mark_coinciding, sweep_tie_note, tie_note, tied_with_leader)
from .speedup_figure import sweep_speedup_figure
from .palette import bar_marker, line_style, method_colour

THEORY = "theory 1 + mean E[tau | drafts]"


def _seeds(repeats: int) -> str:
    return f"mean of {repeats} seeds ± 95 % band" if repeats > 1 else "one seed (Repeats > 1: a band)"


def _drawn(points: Sequence[dict]) -> list[float]:
    """The points an axis is fitted to: the means and the theory marks (never the bands)."""
    return ([p["mean_block_efficiency"] for p in points]
            + [p["theory_acceptance_length"] for p in points if p.get("theory_acceptance_length") is not None])


def _banded(points) -> int:
    return sum(p.get("band_low") is not None for p in points)


def _band_text(point: dict) -> str:
    band = ("" if point.get("band_low") is None
            else f", 95 % band {point['band_low']:.2f} to {point['band_high']:.2f}")
    return (f"{point['mean_block_efficiency']:.2f}{band}; {point['repeats']} run(s), "
            f"{point['iterations']} iterations")


def efficiency_band_figure(points: dict[str, dict], coupled: bool, ceiling: float | None = None) -> go.Figure:
    """Mean block efficiency per method with its 95 % band over the repeats, the theory marks and
    (teaching pairs) the ceiling, the best any exact rule can do.

    Nothing is written on the bars: each bar's iterations go on its tick, and the theory marks and
    the dashed ceiling are named in the legend under the axis (the bars are not: one swatch would
    show one method's colour for all of them)."""
    repeats = max((p["repeats"] for p in points.values()), default=1)
    low, high = fitted_range([1.0, *_drawn(list(points.values())), *([1 + ceiling] if ceiling is not None else [])],
                             floor=1.0)
    # Two subtitle lines at most: what a bar is, then the tie (the header says what coupled means).
    title = "Block efficiency, coupled runs" if coupled else "Block efficiency, independent runs"
    fig = _figure(title, "", "tokens / target call", subtitle_lines(f"bars: {_seeds(repeats)}; AR = 1"))
    labels = [method_label(m) for m in points]
    fig.add_bar(name="measured (mean)", x=labels, y=[p["mean_block_efficiency"] for p in points.values()],
                marker=bar_marker(list(points)), hovertext=[_band_text(p) for p in points.values()], showlegend=False,
                error_y=dict(type="data", symmetric=False,  # the band, clipped at the axis (the hover has it whole)
                             array=[(clip(p["band_high"], low, high) - p["mean_block_efficiency"])
                                    if p["band_high"] is not None else 0 for p in points.values()],
                             arrayminus=[(p["mean_block_efficiency"] - clip(p["band_low"], low, high))
                                         if p["band_low"] is not None else 0 for p in points.values()]))
    theory = [(label, p["theory_acceptance_length"]) for label, p in zip(labels, points.values())
              if p.get("theory_acceptance_length") is not None]
    if theory:
        fig.add_scatter(name=THEORY, x=[t[0] for t in theory], y=[t[1] for t in theory],
                        mode="markers", marker=dict(symbol="line-ew-open", size=36, color="#222222", line=dict(width=3)))
    method_axis(fig, labels, notes=[f"{p['iterations']} it." for p in points.values()])
    if ceiling is not None:  # a line with its name in the legend, never a label over the bars
        fig.add_hline(y=1 + ceiling, line_dash="dash", line_color="#444444", showlegend=True,
                      name=ceiling_name(ceiling))
    fig.update_layout(showlegend=bool(theory) or ceiling is not None)
    fig.update_yaxes(range=[low, high])
    clipped = band_clipped_note(clipped_methods(points, low, high), _banded(points.values()))
    return add_subtitle(fig, tie_note(tied_with_leader(points), everyone=_banded(points.values())), clipped)


def ceiling_name(ceiling: float) -> str:
    """The dashed line's legend entry: what it is and its value. An expectation: one finite run's mean
    scatters around its own, so a bar may pass it (the caption under Compare says so; docs/views.md)."""
    return f"best any exact rule, on average (LP): {1 + ceiling:.2f}"


def sweep_band_figures(rows: Sequence[dict], timed: bool = True) -> tuple[go.Figure, go.Figure]:
    """Mean block efficiency (band shaded, theory dotted) and speedup against the swept value, per method.

    A speedup point is the median of its point's timed runs, each against the AR runs just before
    and after it, with their range (`components.render.speedup_figure.Speedup`, as in Compare); a point timed
    once is left out, and the chart says to raise Repeats when no point is left."""
    axis = rows[0]["axis"] if rows else "K"
    repeats = max((r["repeats"] for r in rows), default=1)
    values = sorted({r["value"] for r in rows})
    efficiency = _figure(f"Block efficiency as {axis} varies", axis, "tokens / target call",
                         subtitle_lines(f"hardware-free; {_seeds(repeats)}", "dotted: theory"))
    low, high = fitted_range(_drawn(rows))
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        xs, colour, name = [r["value"] for r in mine], method_colour(method), k_legend_name(method, axis)
        banded = [r for r in mine if r["band_low"] is not None]
        if banded:
            efficiency.add_scatter(x=[r["value"] for r in banded] + [r["value"] for r in reversed(banded)],
                                   y=[clip(r["band_high"], low, high) for r in banded]
                                   + [clip(r["band_low"], low, high) for r in reversed(banded)],
                                   fill="toself", fillcolor=colour, opacity=0.15, line=dict(width=0), hoverinfo="skip",
                                   name=f"{method_label(method)} 95 % band", showlegend=False, legendgroup=method)
        efficiency.add_scatter(name=name, x=xs, y=[r["mean_block_efficiency"] for r in mine], mode="lines+markers",
                               **line_style(method),
                               hovertext=[_band_text(r) for r in mine], legendgroup=method)
        theory = [r for r in mine if r.get("theory_acceptance_length") is not None]
        if theory:
            efficiency.add_scatter(name=f"{method_label(method)} theory", x=[r["value"] for r in theory],
                                   hovertext=THEORY, y=[r["theory_acceptance_length"] for r in theory], mode="lines",
                                   line=dict(color=colour, dash="dot", width=1.5), legendgroup=method, showlegend=False)
    efficiency.update_yaxes(range=[low, high])
    banded = len({r["method"] for r in rows if r["band_low"] is not None})
    add_subtitle(efficiency, sweep_tie_note(rows), band_clipped_note(clipped_methods(rows, low, high), banded))
    mark_coinciding(efficiency, group=False)  # the lines keep their group with their band and theory
    swept_axis(efficiency, values)
    speed = sweep_speedup_figure(rows, axis, timed)
    if speed.data:
        swept_axis(speed, values)
    return efficiency, speed


def swept_axis(fig: go.Figure, values: Sequence[float]) -> None:
    """Ticks at the swept values themselves (1, 2, 4, 8 or 0, 0.35, 0.7, 1): no 1.5 drafts."""
    fig.update_xaxes(tickmode="array", tickvals=list(values), ticktext=[f"{v:g}" for v in values], automargin=True)
