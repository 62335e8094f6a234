"""Pure: one iteration record -> HTML of its K draft blocks, for the iteration explorer.

Each draft is a row of its L tokens. The winning draft's accepted prefix (the longest
accepted sub-block) is green; the correction or bonus token follows it in its own colour;
cells covered by a rejected sub-block test carry a red underline; tokens never reached are
grey. Hovering a token shows the draft and target probabilities p and q, the ratio q/p, and
the acceptance probability h of the sub-block test that ended at that token (if one was made).
"""

from __future__ import annotations

import html
from typing import Callable

from spectr_gbv.records import IterationRecord

from .text import KIND_COLOURS

REJECTED_COLOUR = "#d1495b"


def _tests_by_cell(it: IterationRecord) -> dict[tuple[int, int], tuple[float | None, bool]]:
    """(draft, last position of the sub-block) -> (h, accepted) of the last test made there."""
    cells = {}
    for test in it.tests:
        cells[(test.draft, test.start + test.length - 1)] = (test.accept_prob, test.accepted)
    return cells


def _rejected_cells(it: IterationRecord) -> set[tuple[int, int]]:
    return {(t.draft, i) for t in it.tests if not t.accepted for i in range(t.start, t.start + t.length)}


def draft_grid_html(it: IterationRecord, token_text: Callable[[list[int]], list[str]]) -> str:
    if not it.draft_tokens:
        (text,) = token_text([it.final_token])
        return f'<div class="grid-note">Plain AR step: one target sample, <b>{html.escape(text)}</b>.</div>'
    winner = it.winning_draft if it.winning_draft is not None else 0
    tests, rejected = _tests_by_cell(it), _rejected_cells(it)
    rows = []
    for k, (tokens, ps, qs) in enumerate(zip(it.draft_tokens, it.draft_token_probs, it.target_token_probs)):
        cells = [f'<td class="grid-label">draft {k + 1}{" ★" if k == winner and it.num_accepted else ""}</td>']
        for i, (text, p, q) in enumerate(zip(token_text(tokens), ps, qs)):
            accepted = k == winner and i < it.num_accepted and it.winning_draft is not None
            h, passed = tests.get((k, i), (None, None))
            tip = f"p = {p:.4f}, q = {q:.4f}, q/p = {q / p:.3f}" if p > 0 else f"p = {p}, q = {q:.4f}"
            if h is not None:
                tip += f"; sub-block test ending here: h = {h:.4f}, {'accepted' if passed else 'rejected'}"
            style = f"background:{KIND_COLOURS['accepted']}" if accepted else "background:#f4f4f4;color:#777"
            if (k, i) in rejected:
                style += f";border-bottom:3px solid {REJECTED_COLOUR}"
            cls = "cell-accepted" if accepted else ("cell-rejected" if (k, i) in rejected else "cell-drafted")
            cells.append(f'<td class="grid-cell {cls}" title="{html.escape(tip)}" style="{style}">{html.escape(text)}</td>')
        if k == winner:
            (final_text,) = token_text([it.final_token])
            cells.append(
                f'<td class="grid-cell cell-{it.final_kind}" title="{it.final_kind} token (position {it.num_accepted + 1})" '
                f'style="background:{KIND_COLOURS[it.final_kind]};font-weight:bold">{html.escape(final_text)}</td>'
            )
        rows.append(f'<tr class="grid-row">{"".join(cells)}</tr>')
    caption = (f"Iteration {it.index + 1}: tau = {it.num_accepted} of {len(it.draft_tokens[0])} accepted"
               + (f" from draft {winner + 1}" if it.num_accepted else "") + f", then a {it.final_kind} token."
               + (f" Theory E[tau | drafts] = {it.expected_accepted:.3f}." if it.expected_accepted is not None else ""))
    return (f'<div class="draft-grid"><div class="grid-caption">{html.escape(caption)}</div>'
            f'<table style="border-collapse:separate;border-spacing:3px">{"".join(rows)}</table>'
            f'<div class="grid-legend" style="font-size:85%;margin-top:6px">green: accepted sub-block; '
            f'<span style="border-bottom:3px solid {REJECTED_COLOUR}">underlined</span>: inside a rejected sub-block test; '
            f'grey: drafted, not accepted; hover a token for p, q, q/p and h.</div></div>')
