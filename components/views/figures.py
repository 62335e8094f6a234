"""Pure functions: run data in, Plotly figures out. No model, no Gradio.

Per-method inputs are the summary dicts of `RunRecord.summary()` / `CoupledRun.summary()`
(keys: method, block_efficiency, mean_acceptance_length, mean_accepted,
mean_expected_accepted, per_position_acceptance, accepted_length_histogram,
target_calls, new_tokens ...). Hardware-free numbers and wall-clock numbers are kept on
separate figures, and the wall-clock ones say so in their titles. Every per-method trace or
bar takes the method's fixed colour from components.views.palette (keyed by name, never by
selection order; the lossy rule dashed and hatched). The block-efficiency charts of Compare
and Sweep, which carry bands over repeats, are in components.band_figures.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import plotly.graph_objects as go
from spectr_gbv import AUTOREGRESSIVE, METHODS

from .runs import NOISY_AR_SPREAD, Speedup
from .text import visible_token
from .palette import KINDS, PHASE_COLOURS, TARGET_Q, DRAFT_P, bar_marker, line_style, method_colour

LAYOUT = dict(template="plotly_white", margin=dict(l=50, r=20, t=70, b=40), height=400, font=dict(size=14),  # >= 14 px
              legend=dict(orientation="h", yanchor="top", y=-0.22, xanchor="left", x=0.0))
DISTRIBUTION_COLOURS = {"target q": TARGET_Q, "draft p": DRAFT_P}  # neutral: no method, no token kind


def method_label(name: str) -> str:
    return METHODS[name].label if name in METHODS else ("AR" if name == AUTOREGRESSIVE else name)


def tick_text(label: str) -> str:
    """A method's name as a category tick, broken at hyphens and spaces onto short lines, so six
    methods fit under a chart half a screen wide without Plotly tilting them out of the frame
    ("SpecTr-GBV as released (lossy)" was cut off)."""
    lines = label.replace(" as released ", "<br>released<br>").split("<br>")
    return "<br>".join(line.replace("-", "-<br>") if len(line) > 7 else line for line in lines)


def method_axis(fig: go.Figure, labels: Sequence[str], **where) -> None:
    """Category ticks for the methods, upright and wrapped (`tick_text`), with the margin they need."""
    fig.update_xaxes(tickmode="array", tickvals=list(labels), ticktext=[tick_text(t) for t in labels], tickangle=0,
                     automargin=True, **where)


def _figure(title: str, x_title: str, y_title: str, subtitle: str | None = None) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(title=dict(text=title, subtitle=dict(text=subtitle) if subtitle else None),
                      xaxis_title=x_title, yaxis_title=y_title, **LAYOUT)
    return fig


def histogram_figure(summaries: Sequence[dict]) -> go.Figure:
    """Share of iterations accepting tau = 0..L draft tokens, per method."""
    fig = _figure("Accepted length per iteration", "tau (draft tokens accepted)", "share of iterations")
    for s in summaries:
        counts = s.get("accepted_length_histogram") or []
        total = max(sum(counts), 1)
        fig.add_bar(name=method_label(s["method"]), x=list(range(len(counts))), y=[c / total for c in counts],
                    marker=bar_marker([s["method"]] * len(counts)))
    fig.update_layout(barmode="group")
    return fig


def per_position_figure(summaries: Sequence[dict]) -> go.Figure:
    """P(tau >= i): how often position i of the draft is reached and accepted."""
    fig = _figure("Per-position acceptance", "draft position i", "share with tau >= i")
    for s in summaries:
        values = s.get("per_position_acceptance") or []
        fig.add_scatter(name=method_label(s["method"]), x=list(range(1, len(values) + 1)), y=values, mode="lines+markers",
                        **line_style(s["method"]))
    fig.update_yaxes(range=[0, 1.05])
    return fig


def calls_per_token_figure(summaries: Sequence[dict]) -> go.Figure:
    fig = _figure("Target calls per token", "", "target calls / token", "lower is better; AR = 1")
    labels = [method_label(s["method"]) for s in summaries]
    fig.add_bar(x=labels, y=[1 / s["block_efficiency"] if s["block_efficiency"] else None for s in summaries],
                marker=bar_marker([s["method"] for s in summaries]))
    method_axis(fig, labels)
    return fig


def speedup_figure(speedups: Mapping[str, "Speedup | float"], device: str,
                   phases: dict[str, dict[str, float]] | None = None, timed: bool = True) -> go.Figure:
    """Wall-clock speedup against AR, measured in the same request on this server, and (with
    `phases`: method -> ms per emitted token in each phase, "ar" included) why: where the time goes.

    A method's bar is the median of its timed runs (`components.views.runs.Speedup`; a plain
    number is one run) with their range as the error bar; a method timed once is left out (one
    run is noise), and a bar whose AR runs before and after disagreed is cross-hatched and says so.
    `timed=False` (the teaching pairs, whose "models" are lookup tables) draws no bars, only
    the reason: their timings measure Python overhead, not speculative decoding."""
    if not timed:
        return _note_figure("Wall-clock speedup: not shown for this pair",
                            "The teaching pairs are lookup tables:<br>a 'forward' takes microseconds, so wall-clock<br>"
                            "time measures Python overhead, not speculation.<br>Block efficiency is the "
                            "hardware-free measure;<br>a real model pair shows the speedup.")
    stats = {m: v if isinstance(v, Speedup) else Speedup(float(v), float(v), float(v), 1, None) for m, v in speedups.items()}
    charted = {m: v for m, v in stats.items() if v.runs > 1}
    if stats and not charted:
        return _note_figure("Wall-clock speedup: one timed run per method",
                            "One run per method is too noisy to chart:<br>set Repeats to 2 or more for a median<br>"
                            "and its range (the single runs are in the data).")
    runs = min((v.runs for v in charted.values()), default=0)
    subtitle = (f"median of {runs}+ runs per method (bar: range), each against the AR runs before and after it; "
                f"cross-hatched: noisy, AR moved > {NOISY_AR_SPREAD:.0%}<br>this server ({device}): depends on the hardware")
    labels = [method_label(m) + (" (noisy)" if v.noisy else "") for m, v in charted.items()]
    bars = dict(x=labels, y=[v.median for v in charted.values()],
                error_y=dict(type="data", symmetric=False, array=[v.high - v.median for v in charted.values()],
                             arrayminus=[v.median - v.low for v in charted.values()], color="#444"),
                marker=_speedup_marker(charted),
                hovertext=[f"median {v.median:.2f}x, range {v.low:.2f} to {v.high:.2f}, {v.runs} runs"
                           + (f"; AR before and after differ by {v.ar_spread:.0%}" if v.ar_spread is not None else "")
                           for v in charted.values()])
    if not phases:
        fig = _figure("Wall-clock speedup vs AR", "", "tokens/s over AR's tokens/s", subtitle)
        fig.add_bar(**bars)
        fig.add_hline(y=1.0, line_dash="dash", annotation_text="AR", annotation_position="bottom right")
        method_axis(fig, labels)
        return fig
    from plotly.subplots import make_subplots

    fig = make_subplots(rows=1, cols=2, horizontal_spacing=0.14,
                        subplot_titles=("speedup vs AR (tokens/s ratio)", "ms per token, by phase"))
    fig.update_layout(title=dict(text="Wall-clock speedup vs AR, and where the time goes", subtitle=dict(text=subtitle)),
                      barmode="stack", **LAYOUT)
    fig.update_layout(margin=dict(LAYOUT["margin"], t=110))  # two subtitle lines above the panel titles
    fig.add_bar(showlegend=False, row=1, col=1, **bars)
    fig.add_hline(y=1.0, line_dash="dash", row=1, col=1)
    order = [AUTOREGRESSIVE, *[m for m in charted if m != AUTOREGRESSIVE]]
    for phase, colour in PHASE_COLOURS.items():
        fig.add_bar(name=phase, x=[method_label(m) for m in order if m in phases],
                    y=[phases[m].get(phase, 0.0) for m in order if m in phases], marker_color=colour, row=1, col=2)
    method_axis(fig, labels, row=1, col=1)
    method_axis(fig, [method_label(m) for m in order if m in phases], row=1, col=2)
    return fig


def _speedup_marker(charted: Mapping[str, "Speedup"]) -> dict:
    marker = bar_marker(list(charted))
    shapes = list(marker.get("pattern", {}).get("shape") or [""] * len(charted))
    marker["pattern"] = dict(marker["pattern"], shape=[shape or ("x" if v.noisy else "")
                                                       for shape, v in zip(shapes, charted.values())])
    return marker


def _note_figure(title: str, text: str) -> go.Figure:
    """A chart that says why it has nothing to draw."""
    fig = _figure(title, "", "")
    # Short lines: the note must fit a chart half a 1024 px screen wide.
    fig.add_annotation(text=text, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper", font=dict(size=14))
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def theory_figure(series: dict[str, tuple[Sequence[int], Sequence[float] | None]]) -> go.Figure:
    """Cumulative realised accepted tokens against the sum of E[tau | drafts] (the theory line)."""
    fig = _figure("Theory against measurement", "iteration", "accepted draft tokens so far",
                  "solid: realised tau; dotted: sum of E[tau | drafts]")
    for method, (realised, expected) in series.items():
        xs = list(range(1, len(realised) + 1))
        colour = method_colour(method)
        fig.add_scatter(name=method_label(method), x=xs, y=_cumsum(realised), mode="lines", legendgroup=method,
                        line=line_style(method)["line"])
        if expected is not None:
            fig.add_scatter(name=f"{method_label(method)} (theory)", x=xs, y=_cumsum(expected), mode="lines",
                            line=dict(dash="dot", color=colour), legendgroup=method, showlegend=False)
    return fig


def _cumsum(values: Sequence[float]) -> list[float]:
    total, out = 0.0, []
    for v in values:
        total += v
        out.append(total)
    return out


def distribution_figure(top_tokens: Sequence, token_text: Sequence[str], final_kind: str, drawn: int,
                        method: str | None = None) -> go.Figure:
    """Target, draft and drawn-from distributions over the top tokens at the final position.

    `top_tokens` are `TopToken`s (token, final_prob, target_prob, draft_prob); `token_text`
    their display strings. For a correction token the drawn-from distribution is the residual;
    only SD's residual is norm((q - p)+) of the plotted bars, so for `method` another rule the
    subtitle says so (the explorer's detail panel gives the rule, components.residuals).
    """
    names = [visible_token(t) for t in token_text]
    source = {"correction": "residual (drawn from)", "bonus": "q at L+1 (drawn from)", "target": "q (drawn from)"}[final_kind]
    subtitle = "the most likely tokens there; q and p of the winning draft"
    if final_kind == "correction" and method in METHODS and not METHODS[method].plots_its_residual:
        subtitle += f"<br>{method_label(method)}'s residual is not norm((q − p)+) of these bars: see the panel beside the grid"
    fig = _figure(f"Where the {final_kind} token was drawn", "token", "probability", subtitle)
    if "<br>" in subtitle:
        fig.update_layout(margin=dict(t=100))  # room for the subtitle's second line
    fig.add_bar(name="target q", x=names, y=[t.target_prob for t in top_tokens], marker_color=DISTRIBUTION_COLOURS["target q"])
    if any(t.draft_prob is not None for t in top_tokens):
        fig.add_bar(name="draft p", x=names, y=[t.draft_prob or 0.0 for t in top_tokens], marker_color=DISTRIBUTION_COLOURS["draft p"])
    # The bar the token was drawn from in its kind's colour: the residual is the correction colour.
    fig.add_bar(name=source, x=names, y=[t.final_prob for t in top_tokens], marker_color=KINDS[final_kind].strong)
    for name, t in zip(names, top_tokens):
        if t.token == drawn:
            fig.add_annotation(x=name, y=max(t.final_prob, t.target_prob), text="drawn", showarrow=True, arrowhead=2)
    fig.update_layout(barmode="group")
    return fig


def fidelity_figure(result, outcome_text: Sequence[str]) -> go.Figure:
    """Empirical law of the first tokens against the target's exact law, with the 95 % band."""
    verdict = "inside" if result.within_noise else "OUTSIDE"
    fig = _figure(
        f"{method_label(result.method)}: TV = {result.total_variation:.3f}, {verdict} the noise band",
        "first tokens", "probability",
        f"first {result.num_tokens} token(s), {result.num_runs} runs; N exact samples exceed TV {result.noise_tv_95:.3f} "
        f"only 5 % of the time; chi-square p = {result.chi_square_p:.2g}")
    rows = result.rows[:30]
    names = list(outcome_text)[: len(rows)]
    fig.add_bar(name="exact target law", x=names, y=[r.exact for r in rows], marker_color=DISTRIBUTION_COLOURS["target q"],
                error_y=dict(type="data", symmetric=False, array=[r.band_high - r.exact for r in rows],
                             arrayminus=[r.exact - r.band_low for r in rows]))
    fig.add_bar(name="empirical", x=names, y=[r.empirical for r in rows], marker=bar_marker([result.method] * len(rows)))
    # Outcomes of three tokens make long, tilted ticks: the legend goes above the plot, out of their way.
    fig.update_layout(barmode="group", margin=dict(t=110),
                      legend=dict(orientation="h", yanchor="bottom", y=1.0, xanchor="right", x=1.0))
    fig.update_xaxes(automargin=True)
    return fig
