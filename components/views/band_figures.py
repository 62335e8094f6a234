"""Figures of repeated measurements: mean, 95 % band, theory line, iterations per point (Plotly, pure).

A point is the `components.views.runs.point_stats` of its repeats (keys: mean_block_efficiency,
band_low, band_high, theory_acceptance_length, iterations, repeats). Block efficiency is in
tokens per target call, so the y axes start at 1: what plain AR gets. The theory line is
1 + mean E[tau | drafts] (the methods' `expected_accepted` at the drafts actually drawn):
the same quantity without the noise of the acceptance draws.
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go


from .figures import _figure, method_axis, method_label, speedup_figure
from .palette import bar_marker, line_style, method_colour

THEORY = "theory 1 + mean E[tau | drafts]"


def _seeds(repeats: int) -> str:
    return f"mean of {repeats} seeds ± 95 % band" if repeats > 1 else "one seed (Repeats > 1: a band)"


def _upper(points: Sequence[dict]) -> float:
    tops = [p.get("band_high") or p["mean_block_efficiency"] for p in points]
    tops += [p["theory_acceptance_length"] for p in points if p.get("theory_acceptance_length")]
    return max([1.0, *[t for t in tops if t == t]]) * 1.08 + 0.05


def _band_text(point: dict) -> str:
    band = ("" if point.get("band_low") is None
            else f", 95 % band {point['band_low']:.2f} to {point['band_high']:.2f}")
    return (f"{point['mean_block_efficiency']:.2f}{band}; {point['repeats']} run(s), "
            f"{point['iterations']} iterations")


def efficiency_band_figure(points: dict[str, dict], coupled: bool, ceiling: float | None = None) -> go.Figure:
    """Mean block efficiency per method with its 95 % band over the repeats, and the theory markers."""
    repeats = max((p["repeats"] for p in points.values()), default=1)
    kind = "same drafts and draws for every method" if coupled else "same seeds for every method"
    title = "Block efficiency, coupled runs" if coupled else "Block efficiency, independent runs"
    # Two short subtitle lines and no legend (one swatch would show one method's colour for all
    # bars): the subtitle says what the bars and the black marks are.
    fig = _figure(title, "", "tokens / target call (AR = 1)",
                  f"{kind}; {_seeds(repeats)}<br>bars: measured mean; black line: {THEORY}")
    fig.update_layout(margin=dict(t=100), showlegend=False)
    labels = [method_label(m) for m in points]
    fig.add_bar(name="measured (mean)", x=labels, y=[p["mean_block_efficiency"] for p in points.values()],
                marker=bar_marker(list(points)), hovertext=[_band_text(p) for p in points.values()],
                text=[f"{p['iterations']} it." for p in points.values()], textposition="inside",
                error_y=dict(type="data", symmetric=False,
                             array=[(p["band_high"] - p["mean_block_efficiency"]) if p["band_high"] is not None else 0
                                    for p in points.values()],
                             arrayminus=[(p["mean_block_efficiency"] - p["band_low"]) if p["band_low"] is not None else 0
                                         for p in points.values()]))
    theory = [(label, p["theory_acceptance_length"]) for label, p in zip(labels, points.values())
              if p.get("theory_acceptance_length") is not None]
    if theory:
        fig.add_scatter(name=THEORY, x=[t[0] for t in theory], y=[t[1] for t in theory],
                        mode="markers", marker=dict(symbol="line-ew-open", size=36, color="#222222", line=dict(width=3)))
    method_axis(fig, labels)
    if ceiling is not None:  # named in the subtitle, not over the bars: an expectation, which a finite run's mean may pass
        fig.add_hline(y=1 + ceiling, line_dash="dash", line_color="#444444")
        fig.update_layout(margin=dict(t=120), title_subtitle_text=fig.layout.title.subtitle.text + (
            f"<br>dashed: {1 + ceiling:.2f}, the best any exact rule can do on average (LP); "
            "one run's mean scatters around its own average, so a bar may pass it"))
    fig.update_yaxes(range=[1, max(_upper(list(points.values())), 1 + (ceiling or 0) + 0.1)])
    return fig


def sweep_band_figures(rows: Sequence[dict], timed: bool = True) -> tuple[go.Figure, go.Figure]:
    """Mean block efficiency (band shaded, theory dotted) and one-run speedup against the swept value, per method."""
    axis = rows[0]["axis"] if rows else "K"
    repeats = max((r["repeats"] for r in rows), default=1)
    efficiency = _figure(f"Block efficiency as {axis} varies", axis, "tokens / target call (AR = 1)",
                         f"hardware-free; {_seeds(repeats)}; dotted: theory")
    speed = (speedup_figure({}, "", timed=False) if not timed else
             _figure(f"Wall-clock speedup vs AR as {axis} varies", axis, "tokens/s over AR's",
                     "one timed run per point (the first seed), on this server in this request: depends on the hardware"))
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        xs, colour, name = [r["value"] for r in mine], method_colour(method), method_label(method)
        banded = [r for r in mine if r["band_low"] is not None]
        if banded:
            efficiency.add_scatter(x=[r["value"] for r in banded] + [r["value"] for r in reversed(banded)],
                                   y=[r["band_high"] for r in banded] + [r["band_low"] for r in reversed(banded)],
                                   fill="toself", fillcolor=colour, opacity=0.15, line=dict(width=0), hoverinfo="skip",
                                   name=f"{name} 95 % band", showlegend=False, legendgroup=method)
        efficiency.add_scatter(name=name, x=xs, y=[r["mean_block_efficiency"] for r in mine], mode="lines+markers",
                               **line_style(method),
                               hovertext=[_band_text(r) for r in mine], legendgroup=method)
        theory = [r for r in mine if r.get("theory_acceptance_length") is not None]
        if theory:
            efficiency.add_scatter(name=f"{name} theory", x=[r["value"] for r in theory], hovertext=THEORY,
                                   y=[r["theory_acceptance_length"] for r in theory], mode="lines",
                                   line=dict(color=colour, dash="dot", width=1.5), legendgroup=method, showlegend=False)
        if timed:
            speed.add_scatter(name=name, x=xs, y=[r["speedup_vs_ar"] for r in mine], mode="lines+markers",
                              **line_style(method))
    efficiency.update_yaxes(range=[1, _upper(rows)])
    if timed:
        speed.add_hline(y=1.0, line_dash="dash")
    return efficiency, speed
