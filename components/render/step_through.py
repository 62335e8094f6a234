"""Pure: one iteration record -> its verification told in stages, for the explorer's step control.

The stages, in the order the verifier worked:

1. the drafts: the K blocks, each token with p (draft) and q (target, from the one target call);
2. one stage per acceptance test, in the order the record keeps them: the coin eta against h
   (SD's h is min(1, q/p); a block rule's h is the sub-block's), or h not computed because its
   bound omega was already <= eta;
3. the decision: the first failed test, and the tau it leaves (a block rule keeps its longest
   success, so a later test may still pass);
4. the distribution of the final token: q - p cut at 0 and renormalised into the residual
   (a correction), or q at position L + 1 (a bonus);
5. the final token, and what the iteration emitted.

Every number comes from the `IterationRecord` (no run is repeated); a plain AR step has two
stages, the missing drafts and the target's sample. Each stage's root carries what it shows as
data attributes (the browser tests read them).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable

from spectr_gbv.methods import METHODS
from spectr_gbv.methods.base import SubBlockTest
from spectr_gbv.records import IterationRecord

from .palette import KINDS
from .residuals import final_token_rule
from .text import visible_token

TokenText = Callable[[list[int]], list[str]]
STAGE_KINDS = ("drafts", "test", "decision", "distribution", "final")


@dataclass(frozen=True)
class Stage:
    kind: str  # one of STAGE_KINDS
    title: str
    body: str  # HTML
    test: SubBlockTest | None = None  # a test stage's test; the decision stage's first failed test
    data: tuple[tuple[str, str], ...] = ()  # what the stage shows, as data-* attributes of its root


def first_failure(it: IterationRecord) -> tuple[int, SubBlockTest] | None:
    """(index in it.tests, test) of the first failed acceptance test, or None when every test passed."""
    return next(((j, t) for j, t in enumerate(it.tests) if not t.accepted), None)


def stage_count(it: IterationRecord) -> int:
    """drafts + one per test + decision + distribution + final; a plain AR step has 2."""
    return 4 + len(it.tests) if it.draft_tokens else 2


def _span(test: SubBlockTest) -> str:
    first, last = test.start + 1, test.start + test.length
    return f"token {first}" if first == last else f"tokens {first}..{last}"


def _quoted(texts: list[str]) -> str:
    return " ".join(f"“{visible_token(t)}”" for t in texts)


def shown_number(value: float) -> str:
    """How every probability, h and eta of the step-through is written (the grid's 4 decimals)."""
    return f"{value:.4f}"


def _coin(test: SubBlockTest) -> tuple[str, tuple[tuple[str, str], ...]]:
    """The sentence comparing the coin with h, and its data attributes."""
    verdict = "passes" if test.accepted else "fails"
    eta = None if test.uniform is None else shown_number(test.uniform)
    data = (("accepted", str(test.accepted).lower()), ("eta", eta or ""),
            ("h", "" if test.accept_prob is None else shown_number(test.accept_prob)))
    if test.accept_prob is None:
        return (f"h is not computed: its upper bound ω was already ≤ the coin η = {eta}, so the test {verdict} "
                f"whatever h is.", data)
    h = shown_number(test.accept_prob)
    if eta is None:  # exact enumeration: no coin was drawn
        return f"h = <b>{h}</b>; no coin was drawn (exact enumeration): the record says it {verdict}.", data
    sign = "<" if test.uniform < test.accept_prob else "≥"
    return f"The coin η = <b>{eta}</b> {sign} h = <b>{h}</b>: the test <b>{verdict}</b>.", data


def _cell(text: str, kind: str | None, focus: bool, below: str = "") -> str:
    style = KINDS[kind].css() if kind in KINDS else ""
    glyph = f"{KINDS[kind].glyph} " if kind in KINDS and KINDS[kind].glyph else ""
    cls = "step-cell" + (" step-focus" if focus else "") + (f" step-{kind}" if kind else "")
    extra = f'<span class="step-cell-probs">{below}</span>' if below else ""
    return f'<td class="{cls}" style="{style}">{html.escape(glyph + visible_token(text))}{extra}</td>'


def _drafts_table(it: IterationRecord, token_text: TokenText, focus: set[tuple[int, int]] = frozenset(),
                  marks: dict[tuple[int, int], str] | None = None, probs: bool = False,
                  final: str | None = None) -> str:
    """The K drafts as rows; `focus` cells outlined, `marks` cells in a token kind's look; `final` (a kind) puts
    the final token at column tau + 1 of the winning row, or in a row of its own when tau = 0."""
    marks = marks or {}
    tau, winner = it.num_accepted, it.winning_draft
    rows = []
    for k, tokens in enumerate(it.draft_tokens):
        cells = [f'<th class="step-draft-label" scope="row">draft {k + 1}</th>']
        for i, text in enumerate(token_text(tokens)):
            if final and k == winner and tau > 0 and i == tau:
                cells.append(_cell(token_text([it.final_token])[0], final, True))
                continue
            below = (f"p {shown_number(it.draft_token_probs[k][i])}<br>q {shown_number(it.target_token_probs[k][i])}"
                     if probs else "")
            cells.append(_cell(text, marks.get((k, i)), (k, i) in focus, below))
        if final and k == winner and tau == len(tokens):
            cells.append(_cell(token_text([it.final_token])[0], final, True))
        rows.append(f"<tr>{''.join(cells)}</tr>")
    if final and (winner is None or tau == 0):
        rows.append(f'<tr><th class="step-draft-label" scope="row">no draft kept</th>'
                    f"{_cell(token_text([it.final_token])[0], final, True)}</tr>")
    return f'<div class="step-scroll"><table class="step-table"><tbody>{"".join(rows)}</tbody></table></div>'


def _accepted_marks(it: IterationRecord) -> dict[tuple[int, int], str]:
    if it.winning_draft is None:
        return {}
    return {(it.winning_draft, i): "accepted" for i in range(it.num_accepted)}


def _test_marks(tests: list[SubBlockTest]) -> dict[tuple[int, int], str]:
    """The end cell of each test already made: accepted (passed) or rejected / skipped (failed)."""
    marks = {}
    for t in tests:
        failed = "skipped" if t.accept_prob is None else "rejected"
        marks[(t.draft, t.start + t.length - 1)] = "accepted" if t.accepted else failed
    return marks


def _drafts_stage(it: IterationRecord, token_text: TokenText) -> Stage:
    k, length = len(it.draft_tokens), len(it.draft_tokens[0])
    body = (f"<p>The draft model proposed <b>{k}</b> draft{'s' if k > 1 else ''} of <b>{length}</b> tokens "
            f"(probabilities p). One target call scored every drafted token (probabilities q).</p>"
            + _drafts_table(it, token_text, probs=True))
    return Stage("drafts", "The drafts appear", body, data=(("drafts", str(k)), ("length", str(length))))


def _what_h_is(test: SubBlockTest, p: float, q: float) -> str:
    """Whether h is the ratio test of the last token (SD and the token rules) or a rule's own number."""
    if test.accept_prob is not None and p > 0 and abs(test.accept_prob - min(1.0, q / p)) <= 1e-9:
        return "Here h = min(1, q/p): the ratio test of this token."
    span = "this token" if test.length == 1 else f"tokens {test.start + 1}..{test.start + test.length} together"
    return f"h is the probability the rule gives to keeping {span}."


def _test_stage(it: IterationRecord, token_text: TokenText, j: int) -> Stage:
    test = it.tests[j]
    end = test.start + test.length - 1
    tokens = token_text(it.draft_tokens[test.draft][test.start:end + 1])
    sentence, data = _coin(test)
    p, q = it.draft_token_probs[test.draft][end], it.target_token_probs[test.draft][end]
    ratio = f"{q / p:.3f}" if p > 0 else "undefined (p = 0)"
    body = (f"<p>Draft {test.draft + 1}, {_span(test)}: {html.escape(_quoted(tokens))}.</p>"
            f"<p>{sentence}</p>"
            f'<p class="step-aside">At token {end + 1}: q = {shown_number(q)}, p = {shown_number(p)}, q/p = {ratio}. '
            f"{_what_h_is(test, p, q)}</p>"
            + _drafts_table(it, token_text, {(test.draft, i) for i in range(test.start, end + 1)},
                            _test_marks(it.tests[:j])))
    data = (("test", str(j + 1)), ("draft", str(test.draft + 1)), ("end", str(end + 1)), *data)
    return Stage("test", f"Test {j + 1} of {len(it.tests)}", body, test, data)


def _decision_stage(it: IterationRecord, token_text: TokenText) -> Stage:
    tau, length, winner = it.num_accepted, len(it.draft_tokens[0]), it.winning_draft
    kept = (f"τ = <b>{tau}</b>: the iteration keeps tokens 1..{tau} of draft {winner + 1}"
            if tau and winner is not None else "τ = <b>0</b>: no drafted token is kept")
    failure = first_failure(it)
    if failure is None:
        body = f"<p>No test failed. {kept}, all {length} of them.</p>"
        data, test, focus = (("failed-test", ""), ("tau", str(tau))), None, set()
    else:
        j, test = failure
        end = test.start + test.length - 1
        later = any(t.accepted for t in it.tests[j + 1:])
        body = (f"<p>The first failure: test {j + 1}, draft {test.draft + 1}, {_span(test)} "
                f"({'h not computed' if test.accept_prob is None else f'h = {shown_number(test.accept_prob)}'}"
                f"{'' if test.uniform is None else f', η = {shown_number(test.uniform)}'}).</p>"
                + (f"<p>A later test passed: the rule keeps its longest success. {kept}.</p>" if later
                   else f"<p>{kept}.</p>"))
        data = (("failed-test", str(j + 1)), ("draft", str(test.draft + 1)), ("end", str(end + 1)), ("tau", str(tau)))
        focus = {(test.draft, i) for i in range(test.start, end + 1)}
    marks = _test_marks(it.tests) | _accepted_marks(it)
    return Stage("decision", "The first failure" if failure else "No failure", body + _drafts_table(
        it, token_text, focus, marks), test, data)


def _distribution_stage(it: IterationRecord, token_text: TokenText, method: str) -> Stage:
    texts = [visible_token(t) for t in token_text([t.token for t in it.final_top])]
    position = it.num_accepted + 1
    if it.final_kind == "bonus":
        rows = "".join(f"<tr><td>{html.escape(x)}</td><td>{shown_number(t.target_prob)}</td></tr>"
                       for x, t in zip(texts, it.final_top))
        body = (f"<p>Nothing was rejected, so nothing is subtracted: the bonus token is drawn from q at position "
                f"{position}, which the same target call computed.</p>"
                f'<table class="step-dist"><thead><tr><th>token</th><th>q (drawn from)</th></tr></thead>'
                f"<tbody>{rows}</tbody></table>")
        return Stage("distribution", f"q at position {position}", body, data=(("kind", "bonus"),))
    rows = "".join(
        f"<tr><td>{html.escape(x)}</td><td>{shown_number(t.target_prob)}</td>"
        f"<td>{'–' if t.draft_prob is None else shown_number(t.draft_prob)}</td>"
        f"<td>{'–' if t.draft_prob is None else shown_number(max(t.target_prob - t.draft_prob, 0.0))}</td>"
        f"<td>{shown_number(t.final_prob)}</td></tr>" for x, t in zip(texts, it.final_top))
    own = method in METHODS and not METHODS[method].plots_its_residual
    rule = html.escape(final_token_rule(method, "correction"))
    note = f'<p class="step-aside">This rule subtracts more than this draft\'s p: {rule}</p>' if own else ""
    body = (f"<p>At position {position} the target's q minus the draft's p, cut at 0 and renormalised, becomes the "
            f"<b>residual</b>: the part of q the draft under-proposed. The correction is drawn from it.</p>{note}"
            f'<table class="step-dist"><thead><tr><th>token</th><th>q</th><th>p</th><th>max(q − p, 0)</th>'
            f"<th>residual (drawn from)</th></tr></thead><tbody>{rows}</tbody></table>")
    return Stage("distribution", "q − p becomes the residual", body, data=(("kind", it.final_kind),))


def _final_stage(it: IterationRecord, token_text: TokenText, method: str, cut_by: str | None) -> Stage:
    (text,) = token_text([it.final_token])
    top = next((t for t in it.final_top if t.token == it.final_token), None)
    chance = "" if top is None else f" (probability {shown_number(top.final_prob)} there)"
    kept = len(it.emitted)
    emitted = _quoted(token_text(it.emitted)) or "nothing"
    cut = (f"<p>Cut by {html.escape(cut_by)}: only the first {kept} of these {it.num_accepted + 1} token(s) are in "
           f"the output.</p>" if cut_by and kept < it.num_accepted + 1 else "")
    where = {"correction": "drawn from the residual", "bonus": "drawn from q after the last drafted token",
             "target": "drawn from the target's q: a plain AR step"}[it.final_kind]
    body = (f"<p>The final token: <b>{html.escape(visible_token(text))}</b>, a <b>{it.final_kind}</b> {where}"
            f"{chance}, at position {it.num_accepted + 1}.</p>"
            f"<p>This iteration emitted {html.escape(emitted)}: one target call, {it.num_accepted + 1} token(s).</p>"
            f"{cut}"
            f'<p class="step-aside">{html.escape(final_token_rule(method, it.final_kind))}</p>')
    if it.draft_tokens:
        body += _drafts_table(it, token_text, marks=_accepted_marks(it), final=it.final_kind)
    return Stage("final", f"The final token: {visible_token(text)}", body,
                 data=(("final-token", visible_token(text)), ("final-kind", it.final_kind),
                       ("tau", str(it.num_accepted))))


def stages(it: IterationRecord, token_text: TokenText, method: str = "", cut_by: str | None = None) -> list[Stage]:
    """Every stage of the iteration, in order (`cut_by` names what cut a last iteration short, if anything)."""
    if not it.draft_tokens:
        return [Stage("drafts", "No drafts", "<p>Plain AR step: nothing is drafted, nothing verified; the target "
                      "samples one token.</p>", data=(("drafts", "0"),)),
                _final_stage(it, token_text, method, cut_by)]
    return [_drafts_stage(it, token_text), *(_test_stage(it, token_text, j) for j in range(len(it.tests))),
            _decision_stage(it, token_text), _distribution_stage(it, token_text, method),
            _final_stage(it, token_text, method, cut_by)]


def clamp_stage(it: IterationRecord, index) -> int:
    """A stage index (0-based) within the iteration's stages."""
    return min(max(int(index or 0), 0), stage_count(it) - 1)


def step_through_html(it: IterationRecord, token_text: TokenText, method: str = "", index: int = 0,
                      cut_by: str | None = None) -> str:
    """Stage `index` (0-based, clamped) of the iteration, with its place among the stages."""
    every = stages(it, token_text, method, cut_by)
    index = clamp_stage(it, index)
    stage = every[index]
    attributes = "".join(f' data-{name}="{html.escape(value)}"' for name, value in stage.data)
    dots = "".join(f'<span class="step-dot{" step-dot-now" if i == index else ""}" title="{html.escape(s.title)}">'
                   f"</span>" for i, s in enumerate(every))
    return (f'<div class="step-through" data-stage="{index + 1}" data-stages="{len(every)}" '
            f'data-kind="{stage.kind}"{attributes}>'
            f'<div class="step-head"><span class="step-count">Step {index + 1} of {len(every)}</span> '
            f'<span class="step-title">{html.escape(stage.title)}</span></div>'
            f'<div class="step-dots" aria-hidden="true">{dots}</div>'
            f'<div class="step-body">{stage.body}</div></div>')
