"""Honest marks on Compare's and Sweep's charts (Plotly, pure): what a reader could otherwise misread.

* a tie within noise: the leading methods whose 95 % bands overlap the leader's are named as tied
  (`tied_with_leader`), not ranked by a difference the seeds cannot tell apart;
* an axis fitted to the data points (means, theory marks, the ceiling), not to a band: a t-band of
  two seeds (one degree of freedom, t = 12.7) can be ten times wider than the spread of the means,
  and stretched the axis until the points sat in a thin strip; a band past the axis is clipped
  there, and the chart says which (`fitted_range`, `band_clipped_note`);
* a method that ignores K (a single-draft rule, registry `multi_draft=False`) is named so in
  the legend wherever K varies (`k_legend_name`);
* lines drawn on top of each other are said to coincide (`mark_coinciding`): otherwise only the
  last one drawn shows, and the others look missing.

The noisy speedup is outlined (components.render.speedup_figure), never hatched: hatching means lossy.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import plotly.graph_objects as go
from spectr_gbv import METHODS

from .chart_layout import fit_top, legend_name, method_label, subtitle_lines

IGNORES_K = " (ignores K)"
PAD = 0.08  # of the data's span, above and below it (at least MIN_PAD)
MIN_PAD = 0.05


def ignores_k(method: str) -> bool:
    return method in METHODS and not METHODS[method].multi_draft


def k_legend_name(method: str, axis: str | None) -> str:
    """`legend_name`, with " (ignores K)" for a single-draft rule when K is the setting that varies."""
    return legend_name(method) + (IGNORES_K if axis == "K" and ignores_k(method) else "")


def tied_with_leader(points: Mapping[str, dict]) -> list[str]:
    """The leader (highest mean block efficiency) and every method whose 95 % band overlaps the leader's,
    leader first; [] when nobody ties it or the leader has no band (one seed: a tie cannot be judged)."""
    banded = {m: p for m, p in points.items() if p.get("band_low") is not None and p.get("band_high") is not None
              and _finite(p.get("mean_block_efficiency"))}
    if len(banded) < 2:
        return []
    leader = max(banded, key=lambda m: banded[m]["mean_block_efficiency"])
    low, high = banded[leader]["band_low"], banded[leader]["band_high"]
    tied = [m for m, p in banded.items() if m != leader and p["band_high"] >= low and p["band_low"] <= high]
    return [leader, *tied] if tied else []


NAMED_TIES = 3  # more tied methods than this are counted, not named (with the total known)


def tie_note(methods: Sequence[str], where: str = "", everyone: int = 0, what: str = "95\u00a0% bands") -> str:
    """'tie within noise: A, B (95 % bands overlap)', or 'every method' when all `everyone` methods tie;
    empty without a tie."""
    if not methods:
        return ""
    if everyone and len(methods) == everyone:
        names = "every method"
    elif everyone and len(methods) > NAMED_TIES:  # a long list wraps over lines the plot needs; the hover names them
        names = f"{len(methods)} of {everyone} methods"
    else:
        names = ", ".join(method_label(m) for m in methods)
    return f"tie within noise{where}: {names} ({what} overlap)"


def tied_ranges(ranges: Mapping[str, tuple[float, float, float]]) -> list[str]:
    """`tied_with_leader` for (median, low, high) ranges: the leader (highest median) and every method whose
    range overlaps the leader's, leader first; [] when nobody ties it."""
    points = {m: {"mean_block_efficiency": mid, "band_low": low, "band_high": high}
              for m, (mid, low, high) in ranges.items()}
    return tied_with_leader(points)


def sweep_tie_note(rows: Sequence[dict]) -> str:
    """Per swept value with a tie at the top, the tied methods ("every method" when all tie; values with
    the same tie share one entry); at most three entries named, so the note stays two or three lines."""
    axis = rows[0]["axis"] if rows else "K"
    everyone = set(r["method"] for r in rows)
    by_tie: dict[str, list[str]] = {}
    for value in sorted({r["value"] for r in rows}):
        tied = tied_with_leader({r["method"]: r for r in rows if r["value"] == value})
        if tied:
            names = "every method" if set(tied) == everyone else ", ".join(method_label(m) for m in tied)
            by_tie.setdefault(names, []).append(f"{value:g}")
    if not by_tie:
        return ""
    ties = [f"{axis} = {', '.join(values)}: {names}" for names, values in by_tie.items()]
    more = f"; and {len(ties) - 3} more" if len(ties) > 3 else ""
    return "tie within noise (95\u00a0% bands overlap) at " + "; ".join(ties[:3]) + more


def _finite(value) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value)


def fitted_range(values: Sequence[float | None], floor: float | None = None) -> tuple[float, float]:
    """An axis range around the data points `values` (None and NaN left out), padded PAD of their span
    (at least MIN_PAD); `floor`, when given, is the bottom (the bars' baseline: AR's 1)."""
    data = [float(v) for v in values if _finite(v)] or [1.0]
    low, high = min(data), max(data)
    pad = max((high - low) * PAD, MIN_PAD, abs(high) * 0.02)
    bottom = floor if floor is not None else low - pad
    return bottom, max(high + pad, bottom + 2 * MIN_PAD)


def clipped_methods(points: Mapping[str, dict] | Sequence[dict], low: float, high: float) -> list[str]:
    """The methods with a band past the range (a list of rows: each row's `method`)."""
    rows = points.items() if isinstance(points, Mapping) else [(r["method"], r) for r in points]
    out = []
    for method, p in rows:
        if p.get("band_low") is None:
            continue
        if (p["band_high"] > high + 1e-12 or p["band_low"] < low - 1e-12) and method not in out:
            out.append(method)
    return out


def band_clipped_note(methods: Sequence[str], banded: int | None = None) -> str:
    """'band clipped at the axis: A, B (hover: the whole band)'; every band (`banded` of them) clipped: no names."""
    if not methods:
        return ""
    if banded is not None and len(methods) >= banded > 1:
        return "every band clipped at the axis (hover: all of it)"
    return f"band clipped at the axis: {', '.join(method_label(m) for m in methods)} (hover: the whole band)"


def clip(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def add_subtitle(fig: go.Figure, *notes: str) -> go.Figure:
    """Notes as more subtitle lines (wrapped), the top margin grown to fit them."""
    extra = subtitle_lines(*notes)
    if not extra:
        return fig
    subtitle = fig.layout.title.subtitle.text
    text = f"{subtitle}<br>{extra}" if subtitle else extra
    fig.update_layout(title_subtitle_text=text)
    return fit_top(fig, text)


def coinciding(fig: go.Figure) -> list[list[str]]:
    """Groups (two or more) of legend lines with the same points, by their names in the order drawn."""
    groups: dict[tuple, list[str]] = {}
    for trace in fig.data:
        if trace.type != "scatter" or trace.showlegend is False or not trace.name or "lines" not in (trace.mode or ""):
            continue
        key = (tuple(trace.x or ()), tuple(round(float(y), 12) if _finite(y) else None for y in (trace.y or ())))
        groups.setdefault(key, []).append(trace.name)
    return [names for names in groups.values() if len(names) > 1]


def mark_coinciding(fig: go.Figure, group: bool = True) -> go.Figure:
    """The subtitle names lines that coincide ('AS-BV+H, SpecTr-GBV, AS-BV coincide'); with `group`, they
    also share one legend group (clicking one hides them all; a chart whose lines already share a group
    with their bands keeps those)."""
    groups = coinciding(fig)
    for number, names in enumerate(groups if group else []):
        for trace in fig.data:
            if trace.name in names:
                trace.legendgroup = f"coincide-{number}"
    plain = [[name.replace("<br>", " ") for name in names] for names in groups]
    return add_subtitle(fig, *[f"{', '.join(names)} coincide" for names in plain])

