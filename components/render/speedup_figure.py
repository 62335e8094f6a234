"""The wall-clock chart: speedup against AR, measured in the same request on this server (Plotly, pure).

Compare and Sweep time every method against the AR runs just before and after it
(`Speedup`, made by `components.wiring.runs.speedup_of`): a bar is the median of a method's timed runs, its range the
error bar; a method timed once is left out (one run is noise), and a bar whose AR runs before
and after disagreed is outlined (a thick dark border, never a hatch: hatching means lossy) and
says so on its tick ("(noisy)"); in Sweep a noisy point is drawn open. With `phases` (method -> ms per
emitted token in each phase, "ar" included) a second panel, under the first on the same method
axis, says why: where the time goes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import plotly.graph_objects as go
from spectr_gbv import AUTOREGRESSIVE

from .chart_layout import (LAYOUT, TITLE, figure, fit_top, method_axis, method_label, note_figure,
                           subtitle_lines)
from .marks import k_legend_name, tie_note, tied_ranges
from .palette import PHASE_COLOURS, bar_marker, line_style

AR_LINE = dict(line_dash="dash", line_color="#444444")  # speedup 1: AR's own pace


NOISY_AR_SPREAD = 0.2  # AR's tokens/s before and after a method differing by more: the machine's load changed


@dataclass(frozen=True)
class Speedup:
    """One method's wall-clock speedup over AR from its timed runs, each against the AR runs just before and after it.

    `median` and its range (`low`, `high`) over the method's runs (its seeds); `ar_spread` is how
    much the AR runs around them disagree (|before - after| / their mean), None with one AR run."""

    median: float
    low: float
    high: float
    runs: int
    ar_spread: float | None

    @property
    def noisy(self) -> bool:
        return self.ar_spread is not None and self.ar_spread > NOISY_AR_SPREAD

    def summary(self) -> dict:
        return {"median": self.median, "low": self.low, "high": self.high, "runs": self.runs,
                "ar_spread": self.ar_spread, "noisy": self.noisy}


def as_speedups(speedups: Mapping[str, "Speedup | float"]) -> dict[str, Speedup]:
    """Every value a `Speedup` (a plain number is one run)."""
    return {m: v if isinstance(v, Speedup) else Speedup(float(v), float(v), float(v), 1, None)
            for m, v in speedups.items()}


def charted(speedups: Mapping[str, Speedup]) -> dict[str, Speedup]:
    """The speedups a chart draws: the methods timed more than once (one run is noise)."""
    return {m: v for m, v in speedups.items() if v.runs > 1}


def speedup_subtitle(shown: Mapping[str, Speedup], device: str) -> str:
    """Two lines: what a bar is, and whether the ranges rank the methods (the top bar's range overlapping
    another's is a tie within noise: the next click may put that one on top); a noisy bar adds a line."""
    runs = min((v.runs for v in shown.values()), default=0)
    tied = tied_ranges({m: (v.median, v.low, v.high) for m, v in shown.items()})
    ranked = (tie_note(tied, everyone=len(shown), what="ranges") if tied
              else f"{method_label(max(shown, key=lambda m: shown[m].median))} leads: its range overlaps no other"
              if len(shown) > 1 else "")
    noisy = f"outlined: noisy (AR moved > {NOISY_AR_SPREAD:.0%})" if any(v.noisy for v in shown.values()) else ""
    return subtitle_lines(f"median of {runs}+ runs (bar: range); hardware: {device}", ranked, noisy)


def speedup_label(method: str, speedup: Speedup) -> str:
    return method_label(method) + (" (noisy)" if speedup.noisy else "")


def speedup_hover(speedup: Speedup) -> str:
    return (f"median {speedup.median:.2f}x, range {speedup.low:.2f} to {speedup.high:.2f}, {speedup.runs} runs"
            + (f"; AR before and after differ by {speedup.ar_spread:.0%}" if speedup.ar_spread is not None else ""))


NOISY_OUTLINE = "#111111"  # a noisy bar's border: an outline, never a hatch (hatching means lossy)
NOISY_OUTLINE_WIDTH = 3


def speedup_marker(speedups: Mapping[str, Speedup]) -> dict:
    """Each method's colour (and the lossy rule's hatching, its only hatch); a noisy bar outlined."""
    marker = bar_marker(list(speedups))
    marker["line"] = dict(color=[NOISY_OUTLINE if v.noisy else "rgba(0,0,0,0)" for v in speedups.values()],
                          width=[NOISY_OUTLINE_WIDTH if v.noisy else 0 for v in speedups.values()])
    return marker


SINGLE_RUN_NOTE = ("One run per method is too noisy to chart:<br>set Repeats to 2 or more for a median<br>"
                   "and its range (the single runs are in the data).")
UNTIMED_NOTE = ("The teaching pairs are lookup tables:<br>a 'forward' takes microseconds, so wall-clock<br>"
                "time measures Python overhead, not speculation.<br>Block efficiency is the "
                "hardware-free measure;<br>a real model pair shows the speedup.")


def speedup_figure(speedups: Mapping[str, "Speedup | float"], device: str,
                   phases: dict[str, dict[str, float]] | None = None, timed: bool = True) -> go.Figure:
    """Wall-clock speedup against AR per method, and (with `phases`) where the time goes.

    `timed=False` (the teaching pairs, whose "models" are lookup tables) draws no bars, only
    the reason: their timings measure Python overhead, not speculative decoding."""
    if not timed:
        return note_figure("Wall-clock speedup: not shown for this pair", UNTIMED_NOTE)
    stats = as_speedups(speedups)
    shown = charted(stats)
    if stats and not shown:
        return note_figure("Wall-clock speedup: one timed run per method", SINGLE_RUN_NOTE)
    labels = [speedup_label(m, v) for m, v in shown.items()]
    if not phases:
        fig = figure("Wall-clock speedup vs AR", "", "tokens/s over AR's (dashed: AR)", speedup_subtitle(shown, device))
        fig.add_bar(x=labels, y=[v.median for v in shown.values()], error_y=_range(shown), marker=speedup_marker(shown),
                    hovertext=[speedup_hover(v) for v in shown.values()])
        fig.add_hline(y=1.0, **AR_LINE)
        method_axis(fig, labels)
        return fig
    return _with_phases(shown, labels, phases, speedup_subtitle(shown, device))


def _range(shown: Mapping[str, Speedup]) -> dict:
    return dict(type="data", symmetric=False, array=[v.high - v.median for v in shown.values()],
                arrayminus=[v.median - v.low for v in shown.values()], color="#444")


PHASES_HEIGHT = 580  # two panels stacked, each about 140 px high over the methods' wrapped names


def _with_phases(shown: Mapping[str, Speedup], labels: list[str], phases: dict, subtitle: str) -> go.Figure:
    """Two panels stacked on one method axis: the speedup bars, and ms per token by phase (AR first).

    Stacked, not side by side: side by side, nine methods' names under a panel a quarter of the
    screen wide ran into each other; stacked, each panel has the chart's whole width."""
    from plotly.subplots import make_subplots

    order = [AUTOREGRESSIVE, *[m for m in shown if m != AUTOREGRESSIVE]]
    names = {m: label for m, label in zip(shown, labels)} | {AUTOREGRESSIVE: "AR"}
    axis = [names.get(m, method_label(m)) for m in order if m in phases or m in shown]
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1,
                        subplot_titles=("speedup vs AR (dashed: AR)", "ms per token, by phase"))
    fig.update_layout(title=dict(TITLE, text="Wall-clock speedup vs AR, and why", subtitle=dict(text=subtitle)),
                      barmode="stack", **LAYOUT)
    fig.update_layout(height=PHASES_HEIGHT)
    fit_top(fig, subtitle, extra_lines=1)  # and the top panel's title
    fig.add_bar(showlegend=False, row=1, col=1, x=labels, y=[v.median for v in shown.values()], error_y=_range(shown),
                marker=speedup_marker(shown), hovertext=[speedup_hover(v) for v in shown.values()])
    fig.add_hline(y=1.0, row=1, col=1, **AR_LINE)
    for phase, colour in PHASE_COLOURS.items():
        fig.add_bar(name=phase, x=[names.get(m, method_label(m)) for m in order if m in phases],
                    y=[phases[m].get(phase, 0.0) for m in order if m in phases], marker_color=colour, row=2, col=1)
    # One category axis for both panels, named once under the lower one; AR's column in the upper
    # panel has no bar (AR is the dashed 1).
    method_axis(fig, axis, row=2, col=1)
    fig.update_xaxes(categoryorder="array", categoryarray=axis)
    fig.update_yaxes(title_text="× AR's tokens/s", automargin=True, row=1, col=1)
    fig.update_yaxes(title_text="ms / token", automargin=True, row=2, col=1)
    return fig


def sweep_speedup_figure(rows, axis: str, timed: bool = True) -> go.Figure:
    """Sweep's speedup against the swept value, one line per method: each point the median of its
    timed runs (a row's `speedup_vs_ar`, a `Speedup.summary()`), each against the AR runs just
    before and after it, with their range; points timed once are left out, noisy ones drawn open."""
    if not timed:
        return note_figure("Wall-clock speedup: not shown for this pair", UNTIMED_NOTE)
    points = [r for r in rows if r["speedup_vs_ar"]["runs"] > 1]
    if rows and not points:
        return note_figure("Wall-clock speedup: one timed run per point", SINGLE_RUN_NOTE.replace("method", "point"))
    runs = min((r["speedup_vs_ar"]["runs"] for r in points), default=0)
    fig = figure(f"Wall-clock speedup vs AR as {axis} varies", axis, "tokens/s over AR's (dashed: AR)",
                 subtitle_lines(f"median of {runs}+ runs (bar: range)", "each against the AR runs just before and after it",
                                f"open: noisy (AR moved > {NOISY_AR_SPREAD:.0%}); this server's hardware"))
    for method in dict.fromkeys(r["method"] for r in points):
        mine = [r["speedup_vs_ar"] | {"value": r["value"]} for r in points if r["method"] == method]
        style = line_style(method)
        symbols = [style["marker"]["symbol"] + ("-open" if s["noisy"] else "") for s in mine]
        fig.add_scatter(name=k_legend_name(method, axis), x=[s["value"] for s in mine], y=[s["median"] for s in mine],
                        mode="lines+markers", line=style["line"], marker=dict(style["marker"], symbol=symbols, size=10),
                        error_y=dict(type="data", symmetric=False, array=[s["high"] - s["median"] for s in mine],
                                     arrayminus=[s["median"] - s["low"] for s in mine]),
                        hovertext=[speedup_hover(Speedup(s["median"], s["low"], s["high"], s["runs"], s["ar_spread"]))
                                   for s in mine])
    fig.add_hline(y=1.0, **AR_LINE)
    return fig
