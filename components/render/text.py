"""Pure: run records -> HTML and short text (output coloured by provenance, metric lines)."""

from __future__ import annotations

import html
from typing import Callable, Sequence

from spectr_gbv import METHODS
from spectr_gbv.records import RunRecord

from .palette import KINDS, LOSSY_RED, method_colour

# The kinds an output token can have (components.palette has their look, colour and cue).
OUTPUT_KINDS = ("accepted", "correction", "bonus", "target")
KIND_NAMES = {kind: KINDS[kind].name for kind in OUTPUT_KINDS}

LOSSY_NOTE = (
    "**Note.** `SpecTr-GBV as released (lossy)` is the authors' released verifier. It does **not** preserve the "
    "target distribution (exact computation: total-variation error about 0.11 on the GBV paper's two-token "
    "example; see About and Fidelity). The project's `SpecTr-GBV` is an exact multi-draft block verifier; it "
    "equals GBV at K = 1 and SpecTr at L = 1."
)


WHITESPACE_GLYPHS = {" ": "␣", "\n": "⏎", "\t": "⇥", "\r": ""}


def visible_token(text: str) -> str:
    """A token as the grid and chart ticks show it: spaces at its ends as ␣, newlines as ⏎, tabs as ⇥
    (an empty or all-space token was an empty cell and a blank tick); a word's inner spaces stay."""
    if not text:
        return "∅"
    if text.strip() == text and "\n" not in text and "\t" not in text:
        return text
    core = text.strip()
    start, end = text.index(core) if core else len(text), (text.index(core) + len(core)) if core else len(text)
    glyphs = lambda part: "".join(WHITESPACE_GLYPHS.get(c, c) for c in part)  # noqa: E731
    return glyphs(text[:start]) + core.replace("\n", "⏎").replace("\t", "⇥") + glyphs(text[end:])


def output_token_html(text: str) -> str:
    """A token in the running output: as written, but a token of whitespace alone shows its glyphs
    (and a newline still breaks the line after its ⏎)."""
    if _whitespace_only(text):
        return (f'<span class="ws-glyph">{visible_token(text)}</span>' + ("<br>" if "\n" in text else ""))
    return html.escape(text)


def _whitespace_only(text: str) -> bool:
    """A token the output draws as glyphs (output_token_html), and the page reads back as them."""
    return bool(text) and not text.strip()


def output_text(texts: list[str]) -> str:
    """The output's text as the page reads it back (its tokens' text content, output_token_html)."""
    return "".join(visible_token(text) if _whitespace_only(text) else text for text in texts)


FRESH_OUTLINE = "outline:2px solid #1a1a1a;outline-offset:1px"  # the tokens of the latest target call (the Race)


def provenance_html(run: RunRecord, spelled: Callable[[list[int]], list[str]], legend: bool = True,
                    fresh: bool = False, appear_at: Sequence[float] | None = None) -> str:
    """The output, each token coloured by its kind; `spelled`: the display strings of consecutive tokens
    (Pair.spelled: a character split over byte tokens drawn whole); `fresh`: the last iteration's tokens
    (the burst one target call just emitted) outlined and marked `tok-fresh`; `appear_at`: a replay, each
    iteration's tokens hidden until that many seconds after they are drawn (`tok-replay`, assets/app.css)."""
    spans = []
    last = run.iterations[-1].index if (fresh and run.iterations) else None
    texts = spelled([token for it in run.iterations for token in it.emitted])  # the whole output: a character
    start = 0                                                                   # may span two iterations
    for it in run.iterations:
        new = " tok-fresh" if it.index == last else ""
        outline = f";{FRESH_OUTLINE}" if new else ""
        if appear_at is not None:
            new, outline = f"{new} tok-replay", f"{outline};animation-delay:{appear_at[it.index]:.2f}s"
        own, start = texts[start:start + len(it.emitted)], start + len(it.emitted)
        for token, kind in zip(own, it.token_kinds):
            # data-iteration: a click opens this iteration in the explorer (app.py's output listener).
            spans.append(
                f'<span class="tok tok-{kind}{new}" data-iteration="{it.index + 1}" '
                f'title="iteration {it.index + 1}: {KIND_NAMES[kind]} (click: open it in the explorer)" '
                f'style="{KINDS[kind].css()};padding:1px 2px;margin:0 1px;border-radius:3px;white-space:pre-wrap'
                f'{outline}">{output_token_html(token)}</span>'
            )
    body = f'<div class="provenance">{"<wbr>".join(spans)}</div>'
    return body + legend_html() if legend else body


def legend_html(kinds=OUTPUT_KINDS) -> str:
    """One entry per token kind, drawn as the tokens are (colour and border), with its glyph."""
    items = " ".join(
        f'<span class="legend-{kind}" style="{KINDS[kind].css()};padding:1px 5px;border-radius:3px">'
        f'{KINDS[kind].glyph} {html.escape(KINDS[kind].name)}</span>'
        for kind in kinds
    )
    return f'<div class="legend">{items}</div>'


UNTIMED_NOTE = "toy model: speed not meaningful"  # a teaching pair is a lookup table: its timings mean nothing


def metrics_line(run: RunRecord, timed: bool = True) -> str:
    """Block efficiency, mean acceptance length, target calls and tokens/s, in one line (no tokens/s,
    no milliseconds on a teaching pair, `timed` False: UNTIMED_NOTE instead)."""
    parts = [f"**{len(run.tokens)} tokens** in **{run.target_calls} target calls**",
             f"block efficiency **{run.block_efficiency:.2f}**"]
    if not run.config.is_autoregressive:
        parts.append(f"mean acceptance length **{run.mean_acceptance_length:.2f}**")
        if run.mean_expected_accepted is not None:
            parts.append(f"mean tau {run.mean_accepted:.2f} (theory {run.mean_expected_accepted:.2f})")
    if not timed:
        parts.append(UNTIMED_NOTE)
        return " · ".join(parts)
    parts.append(f"{run.tokens_per_second:.1f} tokens/s on this server")
    if not run.config.is_autoregressive:  # where the time goes, per emitted token
        phases = run.phase_ms_per_token
        parts.append(f"ms per token: draft {phases['draft']:.1f}, target {phases['target']:.1f}, "
                     f"verify {phases['verify']:.1f}")
    return " · ".join(parts)


def side_by_side_html(texts: dict[str, str], lines: dict[str, str]) -> str:
    columns = []
    for method, body in texts.items():
        spec = METHODS[method]
        colour = "" if spec.exact else f' style="color:{LOSSY_RED}"'  # the label itself says "(lossy)"
        # The column's left edge in the method's fixed colour: the same colour as in every chart.
        columns.append(
            f'<div class="compare-column" data-method="{method}" style="flex:1;min-width:220px;border:1px solid #ddd;'
            f'border-left:6px {"dashed" if not spec.exact else "solid"} {method_colour(method)};border-radius:6px;padding:8px">'
            f"<h4{colour}>{html.escape(spec.label)}</h4>{body}"
            f'<div style="font-size:14px;margin-top:6px">{html.escape(lines[method]).replace("**", "")}</div></div>'
        )
    return f'<div class="compare-row" style="display:flex;gap:10px;flex-wrap:wrap">{"".join(columns)}</div>' + legend_html()
