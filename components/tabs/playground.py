"""The theory playground: alpha, K, L, the draft cost ratio c and the cost g of each extra scored
position -> expected tokens per iteration and speedup, drawn at once (no model; the formulas are
`spectr_gbv.theory`). One button starts it from this server's measured costs: the kernel
probe's g on the default target and the default draft's alpha and c (`server_costs`).

Its K and L are its own (theory for any K and L, no run), so while its tab is chosen the
sidebar's K and L sliders step aside for a note: one K and one L on screen, never two that disagree."""

from __future__ import annotations

import functools
from dataclasses import dataclass

import gradio as gr
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from spectr_gbv import theory

from ..wiring import private
from ..wiring.settings import MAX_DRAFTS, number

LENGTHS = list(range(1, 17))
BATCHED, SEQUENTIAL = "one batch (cost L c)", "one after another (cost K L c)"
ASSUMPTION = (
    "**The model behind these numbers.** Every drafted token is accepted with the same probability alpha, "
    "independently. One draft then gives (1 - alpha^(L+1)) / (1 - alpha) tokens per target call (Leviathan et al., "
    "[arXiv 2211.17192](https://arxiv.org/abs/2211.17192)). With K drafts, each draft is accepted that way "
    "*independently of the others* and the longest accepted draft is kept: P(tau >= j) = 1 - (1 - alpha^j)^K. Drafts "
    "from one model are correlated, so for K > 1 this is an optimistic estimate, not a prediction for any one rule. "
    "An iteration costs one target call plus the draft calls, each c one-token steps of the target: L c when the "
    "K drafts are made as one batch, K L c when one after another. The target call scores the K L drafted "
    "positions besides the next one, and each extra position costs g steps: 1 + g K L (g = 0 is a memory-bound "
    "call that costs the same however many positions it checks, as on a GPU; on a CPU, g is what the kernel probe "
    "measures). Speedup = tokens per iteration / cost per iteration, against plain decoding with the same target."
)
HOW_TO_READ = ("**How to read this:** each line is one choice of K as L grows; the dot is your L. Tokens per iteration "
               "climbs and then flattens (a long draft is rarely accepted to its end), while the cost keeps rising "
               "with L, so the speedup has a best L.")


def playground_figure(alpha: float, num_drafts: int, draft_length: int, cost_ratio: float, batched: bool,
                      position_cost: float = 0.0) -> go.Figure:
    """Tokens per iteration (top) and speedup (bottom) against L, for K = 1 and the chosen K."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.1,
                        subplot_titles=("Expected tokens per iteration (per target call)", "Expected speedup over AR"))
    for k, colour in _series(num_drafts):
        name = f"K = {k}" + (" (one draft: SD)" if k == 1 else "")
        tokens = [theory.expected_tokens(alpha, k, n) for n in LENGTHS]
        gains = [theory.speedup(alpha, k, n, cost_ratio, batched, position_cost) for n in LENGTHS]
        fig.add_scatter(x=LENGTHS, y=tokens, name=name, mode="lines", line=dict(color=colour), row=1, col=1)
        fig.add_scatter(x=LENGTHS, y=gains, name=name, mode="lines", line=dict(color=colour), showlegend=False, row=2, col=1)
        fig.add_scatter(x=[draft_length], y=[tokens[draft_length - 1]], mode="markers", marker=dict(color=colour, size=10),
                        showlegend=False, hoverinfo="skip", row=1, col=1)
        fig.add_scatter(x=[draft_length], y=[gains[draft_length - 1]], mode="markers", marker=dict(color=colour, size=10),
                        showlegend=False, hoverinfo="skip", row=2, col=1)
    fig.add_hline(y=1, line_dash="dot", line_color="#555555", annotation_text="AR (1 token per call)",
                  annotation_position="bottom right", row=2, col=1)
    fig.update_xaxes(title_text="L (draft length)", row=2, col=1)
    fig.update_yaxes(rangemode="tozero")
    fig.update_layout(template="plotly_white", height=580, margin=dict(l=50, r=20, t=90, b=40),
                      legend=dict(orientation="h", yanchor="bottom", y=1.08, x=0))
    return fig


def _series(num_drafts: int) -> list[tuple[int, str]]:
    return [(1, "#7f7f7f")] + ([(num_drafts, "#2a6fdb")] if num_drafts > 1 else [])


def tokens_shown(alpha: float, num_drafts: int, draft_length: int) -> str:
    """Expected tokens per iteration as the summary line writes it (the lesson quotes it the same way)."""
    return f"{theory.expected_tokens(alpha, num_drafts, draft_length):.2f}"


def summary_line(alpha: float, num_drafts: int, draft_length: int, cost_ratio: float, batched: bool,
                 position_cost: float = 0.0) -> str:
    tokens = theory.expected_tokens(alpha, num_drafts, draft_length)
    cost = theory.iteration_cost(num_drafts, draft_length, cost_ratio, batched, position_cost)
    best = max(LENGTHS, key=lambda n: theory.speedup(alpha, num_drafts, n, cost_ratio, batched, position_cost))
    return (f"alpha = {alpha:g}, K = {num_drafts}, L = {draft_length}, c = {cost_ratio:g}, g = {position_cost:g}: "
            f"**{tokens_shown(alpha, num_drafts, draft_length)} tokens per iteration**, cost {cost:.2f} one-token steps, "
            f"**speedup {tokens / cost:.2f}x**; the best L here is {best} "
            f"(speedup {theory.speedup(alpha, num_drafts, best, cost_ratio, batched, position_cost):.2f}x).")


def update(alpha, num_drafts, draft_length, cost_ratio, drafting, position_cost=0.0):
    """Both outputs for the current sliders; a bad value leaves the figure and says why."""
    try:
        values = (number("alpha", alpha, 0, 1, integer=False), number("K (drafts)", num_drafts, 1, MAX_DRAFTS),
                  number("L (draft length)", draft_length, 1, LENGTHS[-1]),
                  number("c (cost ratio)", cost_ratio, 0, 1, integer=False), drafting != SEQUENTIAL,
                  number("g (extra position cost)", position_cost, 0, 1, integer=False))
        return summary_line(*values), playground_figure(*values)
    except ValueError as error:
        return f"**Cannot compute:** {error}", gr.skip()


def server_costs() -> tuple[float, float, float, str]:
    """(alpha, c, g, a note) for the default pair on this server: g from the target's kernel probe
    (`KernelCost.position_cost`), alpha and c the default draft's as measured for the probe's
    prediction (`spectr_gbv.models.server_costs`). Loads the default pair when no view has yet."""
    from spectr_gbv.models import server_costs as measured_costs
    from spectr_gbv.pairs import DEFAULT_KEY, get_pair

    costs = measured_costs(get_pair(DEFAULT_KEY).target)
    alpha, c = costs.alpha, costs.draft_cost
    if costs.position_cost is None:  # a GPU (no CPU kernel), or a kernel forced without its probe
        return alpha, c, 0.0, ("The default pair does not run on a probed CPU kernel here, so g is left at 0 "
                               f"(a memory-bound target call); alpha = {alpha:g} and c = {c:g} are the default draft's.")
    g = round(costs.position_cost, 3)
    note = (f"**This server's measured costs** ({costs.note}): g = {g:g} one-token steps for each extra "
            f"scored position, fitted through the kernel probe's forwards; alpha = {alpha:g}, the default draft's "
            f"held-out acceptance, and c = {c:g}, its step against a target step, both measured on held-out prompts.")
    return alpha, c, g, note


@dataclass
class PlaygroundTab:
    tab: gr.Tab
    alpha: gr.Slider
    num_drafts: gr.Slider
    draft_length: gr.Slider
    cost_ratio: gr.Slider
    drafting: gr.Radio
    summary: gr.Markdown
    plot: gr.Plot
    position_cost: gr.Slider
    measured: gr.Button
    measured_note: gr.Markdown


def build(page) -> None:
    """The playground's tab; its controls update the outputs on every change."""
    with gr.Tab("Playground", id="playground") as tab:
        gr.Markdown("No model here: a per-token acceptance rate alpha and the costs give the expected gain at once. "
                    "Compare it with what **Compare** measures on real drafts.")
        defaults = (0.7, 2, 4, 0.05, BATCHED)
        with gr.Row():
            alpha = gr.Slider(0, 1, value=defaults[0], step=0.01, label="alpha (per-token acceptance)",
                              elem_id="playground-alpha")
            num_drafts = gr.Slider(1, MAX_DRAFTS, value=defaults[1], step=1, label="K (drafts)", elem_id="playground-k")
            draft_length = gr.Slider(1, LENGTHS[-1], value=defaults[2], step=1, label="L (draft length)",
                                     elem_id="playground-l")
            cost_ratio = gr.Slider(0, 1, value=defaults[3], step=0.01, label="c (draft call / target call cost)",
                                   elem_id="playground-c")
        with gr.Row():
            drafting = gr.Radio([BATCHED, SEQUENTIAL], value=defaults[4], label="The K drafts are made as")
            position_cost = gr.Slider(0, 1, value=0.0, step=0.001, label="g (each extra scored position, in one-token steps)",
                                      elem_id="playground-g")
        with gr.Row():
            measured = gr.Button("Start from this server's measured costs", size="sm", elem_id="playground-measured")
            measured_note = gr.Markdown(elem_id="playground-measured-note")
        first_line, first_figure = update(*defaults)
        line = gr.Markdown(first_line, elem_id="playground-summary")
        plot = gr.Plot(first_figure, label="Theory playground", show_label=False, elem_id="playground-plot")
        gr.Markdown(HOW_TO_READ, elem_classes=["how-to-read"])
        gr.Markdown(ASSUMPTION, elem_classes=["how-to-read"])
    page.tab_handles.playground = PlaygroundTab(tab, alpha, num_drafts, draft_length, cost_ratio, drafting, line, plot,
                                             position_cost, measured, measured_note)


def wire_events(page) -> None:
    view: PlaygroundTab = page.tab_handles.playground
    inputs = [view.alpha, view.num_drafts, view.draft_length, view.cost_ratio, view.drafting, view.position_cost]
    any_change = functools.partial(gr.on, [c.change for c in inputs])
    private.on(any_change, update, inputs, [view.summary, view.plot], show_progress="hidden", queue=False)
    # Queued: the first press may load the default pair (and probe its kernel) when no view has yet.
    private.on(view.measured.click, server_costs, None, [view.alpha, view.cost_ratio, view.position_cost,
                                                         view.measured_note])
    # A tab's select event also fires when a handler or a link selects it, so every way in swaps the sliders.
    s = page.sidebar
    for tab in page.tabs.children:
        here = tab is view.tab
        tab.select(lambda here=here: (gr.update(visible=not here), gr.update(visible=not here), gr.update(visible=here)),
                   None, [s.num_drafts, s.draft_length, s.playground_note], show_progress="hidden",
                   api_visibility="private", queue=False)
