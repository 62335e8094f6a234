"""The Lesson's step on K drafts: SpecTr with one draft against three, on the Toy world.

Why a second draft helps: each draft is one more chance that the target accepts a drafted
word. The step's "try it" runs SpecTr with K = 3, L = 1 in Generate and opens the explorer on
its first iteration, at the first seed where draft 1's word is rejected and another draft's
different word is kept. Every number in the text is read from that run (the same engine, the
same seed): draft 1's p and q, the chance SpecTr with K = 1 keeps it (the method's own
`expected_accepted` on draft 1 alone), and E[tau | drafts] for the three drafts, the number the
explorer's caption shows.
"""

from __future__ import annotations

import itertools
from functools import lru_cache

from spectr_gbv.engine import decode_iterations
from spectr_gbv.exact import verify_input_for
from spectr_gbv.methods import METHODS
from spectr_gbv.pairs import TOY_KEY, get_pair

from ..wiring.inputs import DEFAULT_TOKENS
from ..wiring.settings import settings
from .lesson_try import TOY_PROMPT, TryIt

STEP = 6
METHOD, DRAFTS, LENGTH, TEMPERATURE = "spectr", 3, 1, 1.0
TITLE = "A second draft"
MARGIN = 0.25  # the example's three drafts keep a word this much more often than draft 1 alone


def plan(seed: int) -> dict:
    """The Generate run the step's "try it" sets (and the text is computed from)."""
    return {"pair": TOY_KEY, "prompt": TOY_PROMPT, "method": METHOD, "K": DRAFTS, "L": LENGTH, "T": TEMPERATURE,
            "tokens": DEFAULT_TOKENS, "seed": seed}


def first_iteration(seed: int):
    """The first iteration of the plan's run at `seed`, as Generate's engine makes it."""
    pair, values = get_pair(TOY_KEY), plan(seed)
    config = settings(values["K"], values["L"], values["T"], values["tokens"], seed).config(METHOD)
    return next(iter(decode_iterations(pair.target, pair.draft, pair.encode(TOY_PROMPT), config)))


def alone(word: int) -> float:
    """E[tau] of SpecTr with one draft, `word`, after the Lesson's prompt: the chance K = 1 keeps it."""
    pair = get_pair(TOY_KEY)
    context = tuple(pair.encode(TOY_PROMPT))
    target, draft = pair.target, pair.draft
    inp = verify_input_for([[word]], lambda c: target.next_token_probs(context + c),
                           lambda c: draft.next_token_probs(context + c))
    return float(METHODS[METHOD].expected_accepted(inp))


@lru_cache(maxsize=1)
def second_draft_seed() -> int:
    """The first seed whose first iteration rejects draft 1's word and keeps another draft's different word,
    where draft 1 alone was more likely rejected than kept and the three drafts are clearly more likely
    (by MARGIN) to keep a word: an example of the point, not of luck."""
    for seed in itertools.count():
        it = first_iteration(seed)
        first_word = it.draft_tokens[0][0]
        chance = alone(first_word)
        if (it.num_accepted == 1 and it.winning_draft not in (None, 0)
                and it.draft_tokens[it.winning_draft][0] != first_word
                and chance < 0.5 and it.expected_accepted >= chance + MARGIN):
            return seed


@lru_cache(maxsize=1)
def numbers() -> dict:
    """The step's numbers, from its try-it's run."""
    seed = second_draft_seed()
    it = first_iteration(seed)
    pair = get_pair(TOY_KEY)
    words = pair.token_text([row[0] for row in it.draft_tokens])
    return {"seed": seed, "words": words, "p1": it.draft_token_probs[0][0], "q1": it.target_token_probs[0][0],
            "alone": alone(it.draft_tokens[0][0]), "with_all": it.expected_accepted, "winner": it.winning_draft + 1,
            "kept": words[it.winning_draft]}


def step() -> tuple[str, str]:
    n = numbers()
    others = " and ".join(f"*{w}*" for w in n["words"][1:])
    return (TITLE, f"""
One draft is one chance. With **K** drafts, SpecTr tests them one after another and keeps the first word the
target accepts, so one rejected draft no longer ends the block. *Try it* runs SpecTr on the Toy world with
**K = {DRAFTS}**, **L = {LENGTH}** (T = {TEMPERATURE:g}, seed {n['seed']}) and opens its first iteration: after
*"{TOY_PROMPT}"* the drafts are *{n['words'][0]}*, {others}. Draft 1's *{n['words'][0]}* has p = {n['p1']:.4f} and
q = {n['q1']:.4f} (hover its cell): alone (**one draft**) it is kept with probability min(1, q/p) =
**{n['alone']:.3f}**. With the other drafts as further chances SpecTr keeps a word with probability
**E[tau | drafts] = {n['with_all']:.3f}** (the explorer's caption), though it tests each draft a little more
strictly than a lone draft (to stay exact). Here draft 1 was rejected and draft {n['winner']}'s *{n['kept']}* was
kept; with one draft, that rejection would have ended the block with a correction token.""")


def try_it() -> TryIt:
    values = plan(second_draft_seed())
    return TryIt(f"Try it: SpecTr on the Toy world, K = {DRAFTS}, L = {LENGTH}, in the explorer", values, "explorer",
                 "generate-button")
