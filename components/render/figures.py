"""Pure functions: run data in, Plotly figures out. No model, no Gradio.

Per-method inputs are the summary dicts of `RunRecord.summary()` / `CoupledRun.summary()`
(keys: method, block_efficiency, mean_acceptance_length, mean_accepted,
mean_expected_accepted, per_position_acceptance, accepted_length_histogram,
target_calls, new_tokens ...). Hardware-free numbers and wall-clock numbers are kept on
separate figures: the wall-clock chart is components.render.speedup_figure. Every per-method
trace or bar takes the method's fixed colour from components.render.palette (keyed by name,
never by selection order; the lossy rule dashed and hatched). The block-efficiency charts of
Compare and Sweep, which carry bands over repeats, are in components.render.band_figures; the
layout all of them share (legend under the axes, whole-number ticks) in chart_layout.
"""

from __future__ import annotations

from typing import Sequence

import plotly.graph_objects as go
from spectr_gbv import METHODS

from .chart_layout import figure as _figure
from .chart_layout import legend_name, method_axis, method_label, fit_top, subtitle_lines, whole_number_axis
from .palette import KINDS, TARGET_Q, DRAFT_P, bar_marker, line_style, method_colour
from .text import visible_token

DISTRIBUTION_COLOURS = {"target q": TARGET_Q, "draft p": DRAFT_P}  # neutral: no method, no token kind


def histogram_figure(summaries: Sequence[dict]) -> go.Figure:
    """Share of iterations accepting tau = 0..L draft tokens, per method."""
    fig = _figure("Accepted length per iteration", "tau (draft tokens accepted)", "share of iterations")
    longest = 0
    for s in summaries:
        counts = s.get("accepted_length_histogram") or []
        total, longest = max(sum(counts), 1), max(longest, len(counts))
        fig.add_bar(name=legend_name(s["method"]), x=list(range(len(counts))), y=[c / total for c in counts],
                    marker=bar_marker([s["method"]] * len(counts)))
    fig.update_layout(barmode="group")
    whole_number_axis(fig, 0, max(longest - 1, 1))
    return fig


def per_position_figure(summaries: Sequence[dict]) -> go.Figure:
    """P(tau >= i): how often position i of the draft is reached and accepted."""
    fig = _figure("Per-position acceptance", "draft position i", "share with tau >= i")
    longest = 1
    for s in summaries:
        values = s.get("per_position_acceptance") or []
        longest = max(longest, len(values))
        fig.add_scatter(name=legend_name(s["method"]), x=list(range(1, len(values) + 1)), y=values,
                        mode="lines+markers", **line_style(s["method"]))
    fig.update_yaxes(range=[0, 1.05])
    whole_number_axis(fig, 1, longest)
    return fig


def calls_per_token_figure(summaries: Sequence[dict]) -> go.Figure:
    fig = _figure("Target calls per token", "", "target calls / token", "lower is better; AR = 1")
    labels = [method_label(s["method"]) for s in summaries]
    fig.add_bar(x=labels, y=[1 / s["block_efficiency"] if s["block_efficiency"] else None for s in summaries],
                marker=bar_marker([s["method"] for s in summaries]))
    method_axis(fig, labels)
    return fig


def theory_figure(series: dict[str, tuple[Sequence[int], Sequence[float] | None]]) -> go.Figure:
    """Cumulative realised accepted tokens against the sum of E[tau | drafts] (the theory line)."""
    fig = _figure("Theory against measurement", "iteration", "accepted draft tokens",
                  "solid: realised tau, summed; dotted: E[tau | drafts]")
    longest = 1
    for method, (realised, expected) in series.items():
        xs = list(range(1, len(realised) + 1))
        longest, colour = max(longest, len(xs)), method_colour(method)
        fig.add_scatter(name=legend_name(method), x=xs, y=_cumsum(realised), mode="lines", legendgroup=method,
                        line=line_style(method)["line"])
        if expected is not None:
            fig.add_scatter(name=f"{method_label(method)} (theory)", x=xs, y=_cumsum(expected), mode="lines",
                            line=dict(dash="dot", color=colour), legendgroup=method, showlegend=False)
    whole_number_axis(fig, 1, longest)
    return fig


def _cumsum(values: Sequence[float]) -> list[float]:
    total, out = 0.0, []
    for v in values:
        total += v
        out.append(total)
    return out


TICK_CHARS = 56  # the token ticks of one chart together, in 12 px characters: about a 400 px axis


def short_label(text: str, most: int) -> str:
    """A tick label of at most `most` characters, cut with an ellipsis (the hover keeps the whole token)."""
    return text if len(text) <= most else text[: max(most - 1, 1)] + "…"


def distribution_figure(top_tokens: Sequence, token_text: Sequence[str], final_kind: str, drawn: int,
                        method: str | None = None) -> go.Figure:
    """Target, draft and drawn-from distributions over the top tokens at the final position.

    `top_tokens` are `TopToken`s (token, final_prob, target_prob, draft_prob): the likeliest of
    the drawn-from distribution, then the drawn token and every draft's token at this position
    (spectr_gbv.engine); `token_text` their display strings. For a correction token the drawn-from
    distribution is the residual; only SD's residual is norm((q - p)+) of the plotted bars, so for
    `method` another rule the subtitle says so (the explorer's detail panel gives the rule,
    components.residuals). Bars stand at positions 0, 1, 2 ... with the tokens as tick text, short
    and upright (the full token in the hover): a token such as "2" is never read as a position.
    """
    names = [visible_token(t) for t in token_text]
    xs = list(range(len(names)))
    most = max(3, min(10, TICK_CHARS // max(len(names), 1)))
    source = {"correction": "residual (drawn from)", "bonus": "q at L+1 (drawn from)", "target": "q (drawn from)"}[final_kind]
    own_residual = final_kind == "correction" and method in METHODS and not METHODS[method].plots_its_residual
    subtitle = subtitle_lines("q and p of the winning draft at this position",
                              "its residual is not norm((q\u00a0−\u00a0p)+): see the panel" if own_residual else "")
    hover = dict(customdata=names, hovertemplate="%{customdata}: %{y:.4f}")
    bars = [dict(name="target q", y=[t.target_prob for t in top_tokens], marker_color=DISTRIBUTION_COLOURS["target q"])]
    if any(t.draft_prob is not None for t in top_tokens):
        bars.append(dict(name="draft p", y=[t.draft_prob or 0.0 for t in top_tokens],
                         marker_color=DISTRIBUTION_COLOURS["draft p"]))
    # The bar the token was drawn from in its kind's colour: the residual is the correction colour. Drawn from
    # q itself (a bonus token: q at L+1; a plain target step), the q bars are those bars, named so, not drawn twice.
    if all(abs(t.final_prob - t.target_prob) <= 1e-9 for t in top_tokens):
        bars[0] |= dict(name=f"target q = {source}", marker_color=KINDS[final_kind].strong)
    else:
        bars.append(dict(name=source, y=[t.final_prob for t in top_tokens], marker_color=KINDS[final_kind].strong))
    tallest = max([max(t.final_prob, t.target_prob, t.draft_prob or 0.0) for t in top_tokens], default=0.0)
    top = max(tallest, 0.05) * 1.3  # room for the arrow and its word inside the plot
    # The arrow's tip on the tallest of its token's bars, the word above them all.
    arrows = [dict(x=x, y=max(t.final_prob, t.target_prob, t.draft_prob or 0.0), text="drawn", showarrow=True,
                   arrowhead=2) for x, t in zip(xs, top_tokens) if t.token == drawn]
    fig = _figure(f"Where the {final_kind} token was drawn", "token", "probability", subtitle,
                  data=[dict(bar, type="bar", x=xs, **hover) for bar in bars], barmode="group", annotations=arrows,
                  xaxis=dict(type="linear", tickmode="array", tickvals=xs, ticktext=[short_label(n, most) for n in names],
                             tickangle=0, tickfont=dict(size=12), range=[-0.5, len(xs) - 0.5]),
                  yaxis=dict(range=[0, top], **(dict(tickvals=[0, 0.2, 0.4, 0.6, 0.8, 1]) if top > 1 else {})))
    return fig


def fidelity_figure(result, outcome_text: Sequence[str], words=None) -> go.Figure:
    """Empirical law of the first tokens against the target's exact law, with the 95 % band. `words`, a
    spectr_gbv.fidelity.Verdict, gives the title and its first line (what the TV means for this rule);
    without it, the TV and where it falls against the band."""
    if words is None:
        verdict = "inside" if result.within_noise else "OUTSIDE"
        title, line = f"{method_label(result.method)}: TV = {result.total_variation:.3f}, {verdict} the noise band", ""
    else:
        title, line = words.title, words.line
    subtitle = subtitle_lines(line, f"first {result.num_tokens} token(s), {result.num_runs} runs; chi-square p = "
                              f"{result.chi_square_p:.2g}",
                              f"N exact samples exceed TV {result.noise_tv_95:.3f} only 5 % of the time")
    fig = _figure(title, "first tokens", "probability", subtitle)
    rows = result.rows[:30]
    names = list(outcome_text)[: len(rows)]
    fig.add_bar(name="exact target law", x=names, y=[r.exact for r in rows], marker_color=DISTRIBUTION_COLOURS["target q"],
                error_y=dict(type="data", symmetric=False, array=[r.band_high - r.exact for r in rows],
                             arrayminus=[r.exact - r.band_low for r in rows]))
    fig.add_bar(name="empirical", x=names, y=[r.empirical for r in rows], marker=bar_marker([result.method] * len(rows)))
    # Outcomes of three tokens make long, tilted ticks: the legend goes above the plot, out of their way.
    fit_top(fig, subtitle, extra_lines=2)
    fig.update_layout(barmode="group",
                      legend=dict(orientation="h", yref="paper", yanchor="bottom", y=1.0, xref="paper", xanchor="right",
                                  x=1.0))
    fig.update_xaxes(automargin=True)
    return fig
