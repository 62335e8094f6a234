"""Pure: one iteration record -> its verification told in stages, for the explorer's step control.

The stages, in the order the verifier worked:

1. the drafts: the K blocks, each token with p (draft) and q (target, from the one target call);
2. one stage per acceptance test, in the order the record keeps them: the coin eta against h
   (SD's h is min(1, q/p); a block rule's h is the sub-block's), or h not computed because its
   bound omega was already <= eta. A block rule's failed test rejects no token by itself: the
   rule keeps the longest prefix that passes, and the stage says whether a longer one did.
   AS-BV+H's offers at the stop of its check are named as its hand-off. With "predict, then
   reveal" on, a test shows the tokens, q and p, asks "kept or not?", and folds the coin and the
   verdict under a click, for a class to commit to an answer first;
3. the decision: the first failed test, and the tau it leaves (a block rule keeps its longest
   success, so a later test may still pass; AS-BV+H tells its hand-off);
4. the distribution of the final token, in words for the rule shown, then its formula: SD's
   q - p cut at 0 and renormalised, or what a block rule's law subtracts (GBV's leftover, AS-BV's
   law D, the hand-off's leftover), never called "q - p" there; or q at position L + 1 (a bonus);
5. the final token, and what the iteration emitted into the output (a cut last iteration
   counts only the tokens the token cap or the end-of-text token let through).

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

from .handoff_story import Handoff, drawn_from_words, handoff_story, read_handoff
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


def _is_block(method: str) -> bool:
    return method in METHODS and METHODS[method].block


def _handoff(it: IterationRecord, method: str) -> Handoff | None:
    """AS-BV+H's hand-off read off the record's tests (None for another rule, or tests of another shape)."""
    if not it.draft_tokens or method not in METHODS or not METHODS[method].shows_handoff:
        return None
    return read_handoff(it)


def _offer_place(it: IterationRecord, found: Handoff | None, j: int) -> int | None:
    """Where test j is among the hand-off's offers (0-based), or None when it is no offer."""
    if found is None:
        return None
    place = j - len(it.draft_tokens[0])
    return place if 0 <= place < len(found.offers) else None


def _kept(it: IterationRecord, draft: int, end: int) -> bool:
    """Whether the record keeps token end + 1 (0-based `end`) of `draft`: the winning draft carries the same tokens."""
    winner = it.winning_draft
    return (winner is not None and end < it.num_accepted
            and it.draft_tokens[draft][: end + 1] == it.draft_tokens[winner][: end + 1])


def _failed_prefix_words(it: IterationRecord, j: int) -> str:
    """A block rule's failed test: it rejects no token by itself, since the rule keeps the longest sub-block that
    passes; where the record kept the token anyway, the longer test that passed."""
    test = it.tests[j]
    end = test.start + test.length - 1
    longer = [(i, t) for i, t in enumerate(it.tests) if i > j and t.draft == test.draft and t.start == test.start
              and t.length > test.length]
    words = ("In a block rule a failed test does not reject this token: the rule keeps the longest prefix that "
             "passes, ")
    if longer:
        last = max(t.start + t.length for _, t in longer)
        words += f"so a longer prefix (up to token {last}) can still pass."
    else:
        words += f"and no longer prefix of draft {test.draft + 1} is tested after this one."
    if _kept(it, test.draft, end):
        passed = [(i, t) for i, t in longer if t.accepted]
        if passed:
            i, t = max(passed, key=lambda pair: pair[1].length)
            words += (f" And one did: test {i + 1} ({_span(t)}) passes, so token {end + 1} is <b>kept</b> because a "
                      f"longer prefix passed.")
        else:
            words += f" The record keeps token {end + 1} all the same (τ = {it.num_accepted}): a later test passed."
    return words


def _handoff_words(it: IterationRecord, token_text: TokenText, found: Handoff,
                   place: int) -> tuple[str, str, str, str]:
    """(the title's words, what is offered, what came of it, the aside on h) of hand-off offer `place` of AS-BV+H."""
    test = found.offers[place]
    k, chosen, kept = test.draft + 1, found.chosen + 1, found.kept
    (token,) = [visible_token(t) for t in token_text([it.draft_tokens[test.draft][kept]])]
    stop = (f"AS-BV's check on draft {chosen} kept {kept} token{'s' if kept != 1 else ''} and stopped at position "
            f"{kept + 1}" if kept else f"AS-BV's check on draft {chosen} stopped at position 1, keeping no token")
    before = "" if place == 0 else f", less what the {place} rejected offer{'s' if place > 1 else ''} before it took"
    more = place + 1 < len(found.offers)
    if test.accepted:
        outcome = (f"The offer is <b>accepted</b>: “{html.escape(token)}” is kept at position {kept + 1}, and the "
                   f"check goes on along draft {k} by GBV with p.")
    else:
        outcome = (f"The offer is <b>rejected</b>: draft {k}'s own chance of proposing each token there is taken away "
                   f"from the leftover (cut at 0, rescaled), "
                   + ("and the next draft offers its token." if more else "and the final token is drawn from what is "
                      "left."))
    paragraph = (f"<b>Hand-off</b>: {stop}. Draft {k} agrees with it up to there but carries another token there, "
                 f"“{html.escape(token)}”: it offers that token to the leftover R, what the target still wants at "
                 f"position {kept + 1}{before}.")
    aside = (f"Here h = min(1, R(z)/G(z)) with z = “{html.escape(token)}”: R the leftover, G draft {k}'s own "
             f"chance of proposing z given what the selection did (not the plotted p).")
    return f"hand-off: draft {k} offers “{token}”", paragraph, outcome, aside


PREDICT_QUESTION = "Kept or not? Decide before you reveal."
REVEAL = "Reveal the test's result"


def _reveal(question: str, answer: str) -> str:
    """`answer` folded under a question until it is clicked open: a predict-then-reveal pause (plain HTML, so it
    works in any browser and without a server round trip)."""
    return (f'<p class="step-ask">{question}</p><details class="step-reveal"><summary>{REVEAL}</summary>'
            f"{answer}</details>")


def _test_stage(it: IterationRecord, token_text: TokenText, j: int, method: str = "", predict: bool = False) -> Stage:
    test = it.tests[j]
    end = test.start + test.length - 1
    tokens = token_text(it.draft_tokens[test.draft][test.start:end + 1])
    sentence, data = _coin(test)
    p, q = it.draft_token_probs[test.draft][end], it.target_token_probs[test.draft][end]
    ratio = f"{q / p:.3f}" if p > 0 else "undefined (p = 0)"
    title = f"Test {j + 1} of {len(it.tests)}"
    found = _handoff(it, method)
    place = _offer_place(it, found, j)
    what_h = _what_h_is(test, p, q)
    words = offered = ""
    if place is not None:
        named, offered, words, what_h = _handoff_words(it, token_text, found, place)
        title += f", {named}"
        data = (*data, ("handoff", "true"))
    elif _is_block(method) and not test.accepted:
        words = _failed_prefix_words(it, j)
    result = f"<p>{sentence}</p>" + (f"<p>{words}</p>" if words else "")
    aside = (f'<p class="step-aside">At token {end + 1}: q = {shown_number(q)}, p = {shown_number(p)}, q/p = {ratio}. '
             f"{what_h}</p>")
    # Predicting: what the class can reason from (the tokens, q, p) first, the coin and the verdict folded away.
    body = (f"<p>Draft {test.draft + 1}, {_span(test)}: {html.escape(_quoted(tokens))}.</p>"
            + (f"<p>{offered}</p>" if offered else "")
            + (aside + _reveal(PREDICT_QUESTION, result) if predict else result + aside)
            + _drafts_table(it, token_text, {(test.draft, i) for i in range(test.start, end + 1)},
                            _test_marks(it.tests[:j])))
    data = (("test", str(j + 1)), ("draft", str(test.draft + 1)), ("end", str(end + 1)), *data,
            *((("predict", "true"),) if predict else ()))
    return Stage("test", title, body, test, data)


def _decision_stage(it: IterationRecord, token_text: TokenText, method: str = "") -> Stage:
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
        found = _handoff(it, method)
        story = handoff_story(it, token_text) if found is not None and found.offers else None
        later = any(t.accepted for t in it.tests[j + 1:])
        block = (" In a block rule the first failure does not end the check: every prefix is tested, and the "
                 "longest that passes is kept." if _is_block(method) else "")
        body = (f"<p>The first failure: test {j + 1}, draft {test.draft + 1}, {_span(test)} "
                f"({'h not computed' if test.accept_prob is None else f'h = {shown_number(test.accept_prob)}'}"
                f"{'' if test.uniform is None else f', η = {shown_number(test.uniform)}'}).{block}</p>"
                + (f"<p>Hand-off: {html.escape(story)}</p><p>{kept}.</p>" if story
                   else f"<p>A later test passed: the rule keeps its longest success. {kept}.</p>" if later
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
    title, words = _residual_words(it, method)
    own = method in METHODS and not METHODS[method].plots_its_residual
    rule = html.escape(final_token_rule(method, "correction"))
    formula = f'<p class="step-aside">In symbols: {rule}</p>' if method in METHODS else ""
    compare = "max(q − p, 0), to compare" if own else "max(q − p, 0)"
    body = (f"<p>{words}</p>{formula}"
            f'<table class="step-dist"><thead><tr><th>token</th><th>q</th><th>p</th><th>{compare}</th>'
            f"<th>residual (drawn from)</th></tr></thead><tbody>{rows}</tbody></table>")
    data = (("kind", it.final_kind), ("subtracts", _SUBTRACTS.get(method, "p")))
    return Stage("distribution", title, body, data=data)


# What each rule's residual takes away from q, as the distribution stage's data-subtracts.
_SUBTRACTS = {"sd": "p", "rrs": "p", "spectr": "kseq", "gbv": "gbv", "spectr_gbv": "gbv", "as_bv": "law",
              "as_bv_handoff": "law", "traversal": "gbv", "spectr_gbv_released": "released"}
KEPT_WEIGHT = ("scaled down by the weight ω of the tokens already kept (ω = 1 when none was kept, and then this is "
               "SD's q − p)")
NOT_Q_MINUS_P = ("The rule subtracts what its own law already gave, so in general the residual is not q − p of the "
                 "bars: the q − p column is only to compare.")


def _residual_words(it: IterationRecord, method: str) -> tuple[str, str]:
    """(title, plain words) of the residual at position tau + 1, for the rule shown: SD subtracts p; a block rule
    subtracts what its law subtracts, and is never titled "q − p"."""
    at = f"At position {it.num_accepted + 1}"
    if method == "rrs":
        return ("q − p, once per rejected draft, becomes the residual",
                f"{at} each rejected draft's p was taken away from the target's q in turn, cut at 0 and renormalised "
                f"each time; what is left is the <b>residual</b>. The correction is drawn from it.")
    if method == "spectr":
        return ("q minus K-SEQ's share of p becomes the residual",
                f"{at} every draft proposing there was rejected. The target's q minus the mass their acceptances "
                f"would have emitted (p capped at q/ρ*, scaled by how many drafts tried there), cut at 0 and "
                f"renormalised, becomes the <b>residual</b>: it subtracts more than one draft's p.")
    if method == "gbv":
        return ("GBV's leftover becomes the residual",
                f"GBV kept τ = {it.num_accepted} token(s). {at} the target's q, {KEPT_WEIGHT}, minus the draft's p, "
                f"cut at 0 and renormalised, becomes the <b>residual</b>. {NOT_Q_MINUS_P}")
    if method == "spectr_gbv":
        return ("SpecTr-GBV's leftover becomes the residual",
                f"{at} a draft whose block check stopped hands on GBV's leftover (the target's q, {KEPT_WEIGHT}, minus "
                f"p, cut at 0); when every draft still consistent there fails, K-SEQ also takes away what their "
                f"acceptances would have emitted. What is left, renormalised, is the <b>residual</b>. {NOT_Q_MINUS_P}")
    if method == "as_bv":
        return ("AS-BV's leftover becomes the residual",
                f"{at} AS-BV's check on the selected draft stopped. The target's q, {KEPT_WEIGHT}, minus D, the chance "
                f"that the selection proposes each token there (its own law, which mixes the drafts), cut at 0 and "
                f"renormalised, becomes the <b>residual</b>. {NOT_Q_MINUS_P}")
    if method == "as_bv_handoff":
        found = read_handoff(it)
        drawn = drawn_from_words(it)
        if found is None or drawn is None:
            return ("AS-BV+H's leftover becomes the residual",
                    f"{at} the final token is drawn from AS-BV+H's leftover. {NOT_Q_MINUS_P}")
        title = (f"GBV's leftover on draft {found.taken.draft + 1} becomes the residual" if found.taken
                 else "The leftover after the hand-off becomes the residual" if found.offers
                 else "AS-BV's leftover becomes the residual")
        return title, f"The final token is drawn from {html.escape(drawn)} {NOT_Q_MINUS_P}"
    if method == "traversal":
        return ("Traversal's leftover becomes the residual",
                f"Each rejected leaf handed its parent the block leftover (the parent's law scaled down by the leaf's "
                f"weight, minus what was sampled there, cut at 0). {at} the walk stopped, and what is left there, "
                f"renormalised, is the <b>residual</b>. {NOT_Q_MINUS_P}")
    if method == "spectr_gbv_released":
        return ("The released rule's residual (lossy)",
                f"{at} the released rule draws from its own residual, built from the accepted prefix's joint "
                f"probabilities. It is not q − p, and it is lossy: the output's law is not the target's.")
    return ("q − p becomes the residual",
            f"{at} the target's q minus the draft's p, cut at 0 and renormalised, becomes the <b>residual</b>: the "
            f"part of q the draft under-proposed. The correction is drawn from it.")


def _final_stage(it: IterationRecord, token_text: TokenText, method: str, cut_by: str | None) -> Stage:
    (text,) = token_text([it.final_token])
    top = next((t for t in it.final_top if t.token == it.final_token), None)
    chance = "" if top is None else f" (probability {shown_number(top.final_prob)} there)"
    made, kept = it.num_accepted + 1, len(it.emitted)
    emitted = _quoted(token_text(it.emitted)) or "nothing"
    where = {"correction": "drawn from the residual", "bonus": "drawn from q after the last drafted token",
             "target": "drawn from the target's q: a plain AR step"}[it.final_kind]
    if kept < made:  # the token cap or the end-of-text token cut the block: count what reached the output
        reason = f"Cut by {html.escape(cut_by)}" if cut_by else "Cut"
        emitted_words = (f"<p>This iteration emitted <b>{kept}</b> token(s) into the output: {html.escape(emitted)} "
                         f"(one target call).</p>"
                         f"<p>{reason}: the rule made {made} token(s) "
                         f"({html.escape(_quoted(token_text([*it.accepted_tokens, it.final_token])))}), and only the "
                         f"first {kept} of these {made} token(s) are in the output (the final token is not).</p>")
    else:
        emitted_words = (f"<p>This iteration emitted <b>{kept}</b> token(s) into the output: {html.escape(emitted)} "
                         f"(one target call).</p>")
    body = (f"<p>The final token: <b>{html.escape(visible_token(text))}</b>, a <b>{it.final_kind}</b> {where}"
            f"{chance}, at position {made}.</p>"
            f"{emitted_words}"
            f'<p class="step-aside">{html.escape(final_token_rule(method, it.final_kind))}</p>')
    if it.draft_tokens:
        body += _drafts_table(it, token_text, marks=_accepted_marks(it), final=it.final_kind)
    return Stage("final", f"The final token: {visible_token(text)}", body,
                 data=(("final-token", visible_token(text)), ("final-kind", it.final_kind),
                       ("tau", str(it.num_accepted)), ("emitted", str(len(it.emitted)))))


def stages(it: IterationRecord, token_text: TokenText, method: str = "", cut_by: str | None = None,
           predict: bool = False) -> list[Stage]:
    """Every stage of the iteration, in order (`cut_by` names what cut a last iteration short, if anything;
    `predict` folds each test's result under "kept or not?")."""
    if not it.draft_tokens:
        return [Stage("drafts", "No drafts", "<p>Plain AR step: nothing is drafted, nothing verified; the target "
                      "samples one token.</p>", data=(("drafts", "0"),)),
                _final_stage(it, token_text, method, cut_by)]
    return [_drafts_stage(it, token_text),
            *(_test_stage(it, token_text, j, method, predict) for j in range(len(it.tests))),
            _decision_stage(it, token_text, method), _distribution_stage(it, token_text, method),
            _final_stage(it, token_text, method, cut_by)]


def clamp_stage(it: IterationRecord, index) -> int:
    """A stage index (0-based) within the iteration's stages."""
    return min(max(int(index or 0), 0), stage_count(it) - 1)


def step_through_html(it: IterationRecord, token_text: TokenText, method: str = "", index: int = 0,
                      cut_by: str | None = None, predict: bool = False) -> str:
    """Stage `index` (0-based, clamped) of the iteration, with its place among the stages."""
    every = stages(it, token_text, method, cut_by, predict)
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
