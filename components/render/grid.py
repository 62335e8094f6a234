"""Pure: one iteration record -> HTML of its K draft blocks, for the iteration explorer.

Columns are output positions 1..L+1 (a header row numbers them). Each draft is a row of
its L tokens. The final token (correction or bonus) sits where it lands in the output:
column tau + 1 of the winning row, over the draft token it replaced (struck through), and
the rest of that row is greyed; at tau = 0 no draft won, so it gets a row of its own. Cells
have a kind each (components.palette: colour plus a border and a glyph):

* accepted: the winning draft's first tau tokens (never marked rejected, even when a
  shorter sub-block's coin failed on the way: GBV keeps the longest success);
* rejected: not accepted, and the sub-block test ending there failed with h computed
  (or no test ends there but a failed test covers it);
* skipped: the test ending there was decided without computing h (its bound omega was
  already <= eta, `gbv.scan_coins`): a failed coin, but not a computed rejection;
* unreached: drafted, no test reached it.

Every cell carries its details (p, q, q/p, the test's h and eta) in its hover title and,
for the click-to-pin panel beside the table, in data-detail; the panel starts on the final
token, with the rule its distribution came from (components.residuals).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable

from spectr_gbv.methods import METHODS
from spectr_gbv.methods.base import SubBlockTest
from spectr_gbv.records import IterationRecord

from .palette import KINDS, UNREACHED, KindStyle
from .handoff_story import drawn_from_words, handoff_story
from .residuals import final_token_rule
from .text import legend_html, visible_token

GRID_KINDS = ("accepted", "correction", "bonus", "rejected", "skipped")


@dataclass(frozen=True)
class CellState:
    kind: str  # accepted | rejected | skipped | unreached
    test: SubBlockTest | None  # the last test whose sub-block ends at this cell


def cell_states(it: IterationRecord) -> list[list[CellState]]:
    """The kind of every drafted cell [K][L], from the tests the verifier recorded."""
    ending: dict[tuple[int, int], SubBlockTest] = {}
    covered: dict[tuple[int, int], list[SubBlockTest]] = {}
    for test in it.tests:
        ending[(test.draft, test.start + test.length - 1)] = test  # the last test made there wins
        for i in range(test.start, test.start + test.length):
            covered.setdefault((test.draft, i), []).append(test)
    states = []
    for k, row in enumerate(it.draft_tokens):
        cells = []
        for i in range(len(row)):
            test = ending.get((k, i))
            if it.winning_draft == k and i < it.num_accepted:
                kind = "accepted"
            elif test is not None and not test.accepted:
                kind = "skipped" if test.accept_prob is None else "rejected"
            elif test is None and any(not t.accepted and t.accept_prob is not None for t in covered.get((k, i), [])):
                kind = "rejected"
            elif test is None and covered.get((k, i)) and all(not t.accepted for t in covered[(k, i)]):
                kind = "skipped"
            else:
                kind = "unreached"  # no test, or a passed test a later decision overrode
            cells.append(CellState(kind, test))
        states.append(cells)
    return states


def final_column(it: IterationRecord) -> int:
    """The output position of the final token (1-based): tau + 1."""
    return it.num_accepted + 1


def _quote(text: str) -> str:
    return visible_token(text)


def _ratio(p: float, q: float) -> str:
    return f"{q / p:.3f}" if p > 0 else "undefined (p = 0)"


def _test_words(test: SubBlockTest | None) -> tuple[str, list[tuple[str, str]]]:
    """(hover sentence, detail rows) for the sub-block test ending at a cell."""
    if test is None:
        return "", [("test", "none ends here")]
    span = f"tokens {test.start + 1}..{test.start + test.length}"
    eta = [] if test.uniform is None else [("η (the coin's uniform)", f"{test.uniform:.4f}")]
    if test.accept_prob is None:
        return (f"; sub-block test ending here ({span}) skipped: its bound ω was already ≤ η",
                [("test", f"sub-block {span}: skipped"),
                 ("h", "not computed: h ≤ ω ≤ η, so the coin fails whatever h is"), *eta])
    verdict = "accepted" if test.accepted else "rejected"
    return (f"; sub-block test ending here: h = {test.accept_prob:.4f}, {verdict}",
            [("test", f"sub-block {span}: {verdict}"), ("h (acceptance probability)", f"{test.accept_prob:.4f}"), *eta])


def _detail(title: str, rows: list[tuple[str, str]]) -> str:
    body = "".join(f"<dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd>" for k, v in rows)
    return f'<div class="detail-title">{html.escape(title)}</div><dl>{body}</dl>'


def _cell(kind: KindStyle, kind_name: str, text: str, column: int, tip: str, detail: str, extra_class: str = "",
          struck: str | None = None) -> str:
    glyph = f'<span class="cell-glyph" aria-hidden="true">{kind.glyph}</span>' if kind.glyph else ""
    replaced = f'<s class="cell-replaced">{html.escape(struck)}</s> ' if struck is not None else ""
    return (f'<td class="grid-cell cell-{kind_name}{extra_class}" data-column="{column}" tabindex="0" '
            f'title="{html.escape(tip)}" data-detail="{html.escape(detail)}" style="{kind.css()}">'
            f"{glyph}{replaced}{html.escape(text)}</td>")


def _final_detail(it: IterationRecord, method: str, text: str, replaced: tuple[str, float, float] | None,
                  token_text: Callable[[list[int]], list[str]] | None = None, cut: str | None = None) -> str:
    top = next((t for t in it.final_top if t.token == it.final_token), None)
    # Plain words first (what this iteration did), the symbols after ("drawn from").
    spec = METHODS.get(method)
    story = handoff_story(it, token_text) if spec is not None and spec.shows_handoff and token_text is not None else None
    rows = [("what happened", story)] if story else []
    rows += [("position", f"{final_column(it)} (τ + 1, τ = {it.num_accepted})")]
    if top is not None:
        rows += [("probability in the distribution it was drawn from", f"{top.final_prob:.4f}"),
                 ("q (target) here", f"{top.target_prob:.4f}")]
        if top.draft_prob is not None:
            rows += [("p (draft) here", f"{top.draft_prob:.4f}")]
    if replaced is not None:
        token, p, q = replaced
        rows += [("replaces the draft token", f"{token} (p = {p:.4f}, q = {q:.4f}, q/p {_ratio(p, q)})")]
    words = drawn_from_words(it) if story else None
    rows += [("drawn from", words)] if words else []
    rows += [("drawn from, in symbols" if story else "drawn from", final_token_rule(method, it.final_kind))]
    if cut is not None:
        rows += [("output", cut)]
    return _detail(f"{it.final_kind} token {_quote(text)}", rows)


def draft_grid_html(it: IterationRecord, token_text: Callable[[list[int]], list[str]], method: str = "",
                    cut_by: str = "Max new tokens") -> str:
    """The explorer's grid for one iteration; `method` names the residual's rule in the detail panel.

    An iteration the run cut (its last: `cut_by`, Max new tokens or the end-of-text token) emitted
    only its first len(it.emitted) tokens: the cells past them are greyed and say they are not
    in the output."""
    (final_text,) = token_text([it.final_token])
    kept = len(it.emitted)
    cut_note = f"cut by {cut_by}: not in the output"
    if not it.draft_tokens:
        return (f'<div class="draft-grid"><div class="grid-note">Plain AR step: one target sample, '
                f'<b>{html.escape(_quote(final_text))}</b>.</div>'
                f'<div class="grid-detail">{_final_detail(it, method, final_text, None, token_text)}</div></div>')
    length, tau, winner = len(it.draft_tokens[0]), it.num_accepted, it.winning_draft
    states = cell_states(it)
    final_kind = KINDS[it.final_kind]
    final_detail = ""
    header = "".join(f'<th class="grid-pos" scope="col">{i}</th>' for i in range(1, length + 2))
    rows = []
    for k, (tokens, ps, qs) in enumerate(zip(it.draft_tokens, it.draft_token_probs, it.target_token_probs)):
        won = k == winner and tau > 0
        cells = [f'<th class="grid-label" scope="row">draft {k + 1}{" ★" if won else ""}</th>']
        for i, (text, p, q) in enumerate(zip(token_text(tokens), ps, qs)):
            state = states[k][i]
            test_tip, test_rows = _test_words(state.test)
            tip = (f"p = {p:.4f}, q = {q:.4f}, q/p = {q / p:.3f}" if p > 0 else f"p = {p}, q = {q:.4f}") + test_tip
            rows_detail = [("p (draft)", f"{p:.4f}"), ("q (target)", f"{q:.4f}"), ("q/p", _ratio(p, q)), *test_rows]
            if won and i == tau:  # the final token lands here: column tau + 1, over the token it replaced
                cut = kept <= tau
                final_detail = _final_detail(it, method, final_text, (_quote(text), p, q), token_text,
                                             cut_note if cut else None)
                cells.append(_cell(final_kind, it.final_kind, _quote(final_text), i + 1,
                                   f"{it.final_kind} token at position {i + 1}, replacing draft token {_quote(text)} "
                                   f"({tip})" + (f"; {cut_note}" if cut else ""), final_detail,
                                   " grid-final" + (" cell-cut" if cut else ""), struck=_quote(text)))
                continue
            style = KINDS[state.kind] if state.kind in KINDS else UNREACHED
            after = " cell-after" if won and i > tau else ""  # the winning row past its final token: greyed
            cut = won and state.kind == "accepted" and i >= kept
            if cut:
                after, tip, rows_detail = " cell-cut", f"{tip}; {cut_note}", [*rows_detail, ("output", cut_note)]
            detail = _detail(f"draft {k + 1}, position {i + 1}: {_quote(text)} ({state.kind})", rows_detail)
            cells.append(_cell(style, state.kind, _quote(text), i + 1, tip, detail, after))
        if won and tau == length:  # every drafted token accepted: the bonus token at L + 1
            cut = kept <= tau
            final_detail = _final_detail(it, method, final_text, None, token_text, cut_note if cut else None)
            cells.append(_cell(final_kind, it.final_kind, _quote(final_text), length + 1,
                               f"{it.final_kind} token at position {length + 1}" + (f"; {cut_note}" if cut else ""),
                               final_detail, " grid-final" + (" cell-cut" if cut else "")))
        else:
            cells.append('<td class="grid-empty"></td>')
        rows.append(f'<tr class="grid-row">{"".join(cells)}</tr>')
    if winner is None or tau == 0:  # no draft won: the final token in a row of its own, column 1
        final_detail = _final_detail(it, method, final_text, None, token_text)
        cells = ['<th class="grid-label" scope="row">no draft accepted</th>',
                 _cell(final_kind, it.final_kind, _quote(final_text), 1, f"{it.final_kind} token at position 1", final_detail,
                       " grid-final"),
                 *['<td class="grid-empty"></td>'] * length]
        rows.append(f'<tr class="grid-final-row">{"".join(cells)}</tr>')
    caption = (f"Iteration {it.index + 1}: tau = {tau} of {length} accepted"
               + (f" from draft {winner + 1}" if tau and winner is not None else "")
               + f", then a {it.final_kind} token at position {tau + 1}."
               + (f" Theory E[tau | drafts] = {it.expected_accepted:.3f}." if it.expected_accepted is not None else ""))
    cut_caption = (f'<div class="grid-cut-note">Cut by {html.escape(cut_by)}: only the first {kept} of these '
                   f"{tau + 1} token(s) are in the output; the greyed ones are not.</div>" if kept < tau + 1 else "")
    return (f'<div class="draft-grid" data-tau="{tau}" data-final-column="{final_column(it)}">'
            f'<div class="grid-caption">{html.escape(caption)}</div>{cut_caption}'
            f'<div class="grid-body"><div class="grid-scroll" style="overflow-x:auto;max-width:100%">'
            f'<table class="grid-table"><thead><tr><th class="grid-label">position</th>{header}'
            f'</tr></thead><tbody>{"".join(rows)}</tbody></table></div>'
            f'<div class="grid-detail" aria-live="polite"><div class="grid-detail-hint">Click a token to pin its '
            f'details here.</div><div class="grid-detail-body">{final_detail}</div></div></div>'
            f'{legend_html(GRID_KINDS)}</div>')
