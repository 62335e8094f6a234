"""Figures of a run over a prompt set (Plotly, pure): coupled means with paired intervals, independent seeds.

* `set_means_figure`: each rule's mean block efficiency over the prompts (coupled runs), the
  theory mark 1 + mean E[tau | drafts] beside it.
* `paired_difference_figure`: each rule's mean paired difference against the baseline rule with
  its 95 % t-interval (a prompt is the unit, `spectr_gbv.bench.frontier.rule_rows`); an interval
  that crosses 0 is a tie within noise, and the chart says which rules those are.
* `set_speed_figure`: independent runs on a model pair: each rule's speedup over AR on every
  prompt (a dot each) and their geometric mean with its 95 % interval, a prompt the unit;
* `seeds_figure`: independent runs, one value per seed (the mean over the set): the median and
  the range; with fewer than `DOTS_BELOW` seeds the seeds themselves as dots, since a median and
  a range of two or three values say less than the values.

Axes are fitted to the points drawn (components.render.marks.fitted_range).
"""

from __future__ import annotations

import math

import plotly.graph_objects as go

from spectr_gbv.bench.set_compare import seed_summary

from .chart_layout import figure as _figure
from .chart_layout import method_label, subtitle_lines
from .marks import fitted_range, tie_note, tied_ranges
from .palette import method_colour

DOTS_BELOW = 5  # fewer seeds than this: drawn as dots, not a median and a range


def _finite(values) -> list[float]:
    return [v for v in values if v is not None and not math.isnan(v)]


def set_means_figure(rows: list[dict], set_name: str) -> go.Figure:
    """Mean block efficiency over the prompts per rule, and the theory mark (coupled runs)."""
    count = rows[0]["prompts"] if rows else 0
    fig = _figure("Block efficiency over the prompt set, coupled runs", "", "tokens / target call",
                  subtitle_lines(f"{set_name}: mean over {count} prompts", "mark: 1 + mean E[tau | drafts]"))
    labels = [method_label(r["method"]) for r in rows]
    fig.add_bar(x=labels, y=[r["block_efficiency"] for r in rows], showlegend=False, name="measured (mean)",
                marker=dict(color=[method_colour(r["method"]) for r in rows]))
    theory = [(label, 1 + r["expected_accepted"]) for label, r in zip(labels, rows) if _finite([r["expected_accepted"]])]
    if theory:
        fig.add_scatter(name="1 + mean E[tau | drafts]", x=[t[0] for t in theory], y=[t[1] for t in theory],
                        mode="markers", marker=dict(symbol="line-ew-open", size=36, color="#222222", line=dict(width=3)))
    low, high = fitted_range([1.0, *[r["block_efficiency"] for r in rows], *[t[1] for t in theory]], floor=1.0)
    fig.update_yaxes(range=[low, high])
    return fig


def tied_with_baseline(rows: list[dict], baseline: str, metric: str = "expected_accepted") -> list[str]:
    """The rules whose paired 95 % interval against the baseline contains 0 (a tie within noise)."""
    tied = []
    for row in rows:
        interval = row.get(f"vs_{baseline}", {}).get(metric)
        if row["method"] == baseline or interval is None or not _finite(interval[1:]):
            continue
        if interval[1] <= 0 <= interval[2]:
            tied.append(row["method"])
    return tied


def paired_difference_figure(rows: list[dict], baseline: str) -> go.Figure:
    """Each rule's paired difference against the baseline, E[tau | drafts] (block efficiency where a rule has no
    theory line), with its 95 % interval."""
    # Two subtitle lines: what is drawn, then the ties (or how to read one).
    tied = tied_with_baseline(rows, baseline)
    ties = (f"tie within noise with {method_label(baseline)}: " + ", ".join(method_label(m) for m in tied) if tied
            else "a prompt is the unit; across 0: a tie within noise")
    fig = _figure(f"Difference against {method_label(baseline)}, paired over prompts", "",
                  "mean difference (95 % interval)",
                  subtitle_lines("E[tau | drafts] (the lossy rule: block efficiency)", ties))
    drawn = []
    for row in rows:
        if row["method"] == baseline:
            continue
        diffs = row.get(f"vs_{baseline}", {})
        metric = "expected_accepted" if _finite(diffs.get("expected_accepted", (math.nan,))[:1]) else "block_efficiency"
        mean, low, high = diffs.get(metric, (math.nan, math.nan, math.nan))
        if not _finite([mean]):
            continue
        banded = _finite([low, high])
        label = method_label(row["method"]) + ("" if metric == "expected_accepted" else " (BE)")
        fig.add_scatter(x=[label], y=[mean], mode="markers", showlegend=False, name=label,
                        marker=dict(color=method_colour(row["method"]), size=11),
                        error_y=dict(type="data", symmetric=False, array=[high - mean if banded else 0],
                                     arrayminus=[mean - low if banded else 0]),
                        hovertext=f"{mean:+.3f}" + (f" [{low:+.3f}, {high:+.3f}]" if banded
                                                    else " (one prompt: no interval)"))
        drawn += [mean, *(_finite([low, high]))]
    fig.add_hline(y=0, line_color="#444444", line_width=1)
    low, high = fitted_range([0.0, *drawn])
    fig.update_yaxes(range=[low, high])
    return fig


def seeds_figure(per_seed: dict[str, list[float]], set_name: str, prompts: int) -> go.Figure:
    """Independent runs: per rule, each seed's mean block efficiency over the set; dots below DOTS_BELOW seeds,
    else the median with its range."""
    seeds = max((len(v) for v in per_seed.values()), default=0)
    how = "each dot: one seed" if seeds < DOTS_BELOW else "median and range over the seeds"
    fig = _figure("Block efficiency over the prompt set, independent runs", "", "tokens / target call",
                  subtitle_lines(f"{set_name}: mean over {prompts} prompts per seed; {seeds} seed(s)", how))
    drawn = []
    for method, values in per_seed.items():
        label, summary = method_label(method), seed_summary(values)
        if not summary["values"]:
            continue
        if seeds < DOTS_BELOW:
            fig.add_scatter(x=[label] * len(summary["values"]), y=summary["values"], mode="markers", showlegend=False,
                            name=label, marker=dict(color=method_colour(method), size=10))
        else:
            fig.add_scatter(x=[label], y=[summary["median"]], mode="markers", showlegend=False, name=label,
                            marker=dict(color=method_colour(method), size=12, symbol="diamond"),
                            error_y=dict(type="data", symmetric=False, array=[summary["high"] - summary["median"]],
                                         arrayminus=[summary["median"] - summary["low"]]))
        drawn += summary["values"]
    low, high = fitted_range([1.0, *drawn], floor=1.0)
    fig.update_yaxes(range=[low, high])
    return fig


def set_speed_figure(speed: dict[str, dict], set_name: str, device: str) -> go.Figure:
    """Per rule: each prompt's speedup over AR (dots) and the geometric mean with its 95 % interval (a diamond);
    the rules whose intervals overlap the top one's named as a tie within noise."""
    prompts = max((s["prompts"] for s in speed.values()), default=0)
    tied = tied_ranges({m: (s["geometric_mean"], s["low"], s["high"]) for m, s in speed.items()
                        if s["low"] is not None})
    ranked = tie_note(tied, everyone=len(speed), what="intervals") if tied else ""
    fig = _figure("Wall-clock speedup over the prompt set", "", "tokens/s over AR's (dashed: AR)",
                  subtitle_lines("dots: each prompt vs AR; diamond: geometric mean", ranked
                                 or f"{set_name}, {prompts} prompts, 95 % intervals; hardware: {device}"))
    drawn = [1.0]
    for method, summary in speed.items():
        if not summary["per_prompt"]:
            continue
        label, colour = method_label(method), method_colour(method)
        fig.add_scatter(x=[label] * len(summary["per_prompt"]), y=summary["per_prompt"], mode="markers",
                        showlegend=False, name=label, marker=dict(color=colour, size=7, opacity=0.45))
        banded = summary["low"] is not None
        mean = summary["geometric_mean"]
        fig.add_scatter(x=[label], y=[mean], mode="markers", showlegend=False, name=label,
                        marker=dict(color=colour, size=13, symbol="diamond", line=dict(width=1, color="#222222")),
                        error_y=dict(type="data", symmetric=False, array=[summary["high"] - mean if banded else 0],
                                     arrayminus=[mean - summary["low"] if banded else 0]),
                        hovertext=f"{mean:.2f}x" + (f" [{summary['low']:.2f}, {summary['high']:.2f}]" if banded
                                                    else " (one prompt: no interval)"))
        drawn += summary["per_prompt"]
    fig.add_hline(y=1.0, line_dash="dash", line_color="#444444")
    low, high = fitted_range(drawn)
    fig.update_yaxes(range=[low, high])
    return fig
