"""What AS-BV+H did at one iteration, in plain words, for the explorer's detail panel (pure).

The registry's residual text (ω_τ, D, G, R) is exact but dense; a student reads this first:
which draft AS-BV chose, where its check stopped, which other drafts were offered the leftover
and what became of their offers, and where the final token came from. The story is read off the
iteration's recorded tests (spectr_gbv.methods.as_bv_handoff.verify): the chosen draft's L
block tests come first (GBV on the selected block, all starting at position 1), then one
length-1 test per hand-off offer at the stop position, in draft order, up to the first accepted
one, then GBV's tests on the rest of that draft.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from spectr_gbv.methods.base import SubBlockTest
from spectr_gbv.records import IterationRecord

from .text import visible_token


@dataclass(frozen=True)
class Handoff:
    """An AS-BV+H iteration read off its tests: the chosen draft, where its check stopped (the
    tokens it kept), and the offers made there by the other drafts (the last may be accepted)."""

    chosen: int
    kept: int
    offers: list[SubBlockTest]

    @property
    def taken(self) -> SubBlockTest | None:
        return self.offers[-1] if self.offers and self.offers[-1].accepted else None


def read_handoff(it: IterationRecord) -> Handoff | None:
    """The hand-off of an AS-BV+H iteration, or None where the tests do not have its shape."""
    length = len(it.draft_tokens[0]) if it.draft_tokens else 0
    block = it.tests[:length]
    if not length or len(block) < length or any(t.draft != block[0].draft or t.start != 0 for t in block):
        return None
    kept = max((t.length for t in block if t.accepted), default=0)
    offers = []
    for test in it.tests[length:]:
        if test.start != kept or test.length != 1 or test.draft == block[0].draft:
            break
        offers.append(test)
        if test.accepted:
            break
    return Handoff(block[0].draft, kept, offers)


def _tokens(n: int) -> str:
    return f"{n} token" + ("" if n == 1 else "s")


def handoff_story(it: IterationRecord, token_text: Callable[[list[int]], list[str]]) -> str | None:
    """One short paragraph in plain words: what AS-BV+H did at this iteration (None: not its shape)."""
    found = read_handoff(it)
    if found is None:
        return None
    length = len(it.draft_tokens[0])
    chosen, kept = found.chosen + 1, found.kept
    if kept == length:
        return (f"AS-BV chose draft {chosen} and its check kept all {length} drafted tokens, so nothing was handed "
                f"on: the bonus token at position {length + 1} comes straight from the target.")
    start = (f"AS-BV chose draft {chosen}; its check kept {_tokens(kept)} and stopped at position {kept + 1}. "
             if kept else f"AS-BV chose draft {chosen}; its check stopped at position 1, keeping no token. ")
    if not found.offers:
        nobody = ("With one draft, nobody could take over" if len(it.draft_tokens) == 1 else
                  "No other draft agreed with it up to there with another token there, so nobody took over")
        return start + (f"{nobody}: the final token was drawn from what the target still wanted at position "
                        f"{kept + 1}.")
    offered = ", ".join(f"draft {t.draft + 1} offered “{visible_token(token_text([it.draft_tokens[t.draft][kept]])[0])}” "
                        f"({'accepted' if t.accepted else 'rejected'})" for t in found.offers)
    start += (f"The leftover went, in turn, to the drafts that agreed with it up to there with another token there: "
              f"{offered}. ")
    if found.taken is None:
        return start + ("No offer was accepted, so the final token was drawn from what the target still wanted "
                        f"after {'all of them' if len(found.offers) > 1 else 'it'}.")
    winner, more = found.taken.draft + 1, it.num_accepted - kept - 1
    rest = (f"The check then went on along draft {winner} and kept {_tokens(more)} more" if more
            else f"The check then went on along draft {winner} and kept nothing more")
    return start + rest + (": every drafted token kept, so the bonus token comes straight from the target."
                           if it.final_kind == "bonus" else
                           f"; the final token at position {it.num_accepted + 1} was drawn from what the target "
                           f"still wanted there (GBV's leftover on draft {winner}).")


LEFTOVER = ("the target's probabilities there, scaled down by the weight of the tokens kept before it, minus {minus}, "
            "with what falls below zero cut off and the rest rescaled to add up to 1")


def drawn_from_words(it: IterationRecord) -> str | None:
    """The distribution AS-BV+H drew this iteration's final token from, in words (the registry's
    residual says it in symbols): the chosen draft's leftover, that leftover after the rejected
    offers, or GBV's leftover on the draft whose offer was taken. None where the tests do not
    have the hand-off's shape."""
    found = read_handoff(it)
    if found is None:
        return None
    position = it.num_accepted + 1
    if it.final_kind == "bonus":
        return (f"the target's own probabilities at position {position}: every drafted token was kept, so nothing "
                f"is taken away from them.")
    if found.taken is not None:
        winner = found.taken.draft + 1
        return (f"GBV's leftover on draft {winner} at position {position}: "
                + LEFTOVER.format(minus=f"the draft model's probabilities there (the p bars of draft {winner})") + ".")
    leftover = (f"the chosen draft's leftover at position {position}: "
                + LEFTOVER.format(minus="the chance that the selection of a draft proposes each token there (its own "
                                        "law, not the plotted p)"))
    if not found.offers:
        return leftover + "."
    each = "each rejected offer" if len(found.offers) > 1 else "the rejected offer"
    return (leftover + f"; then, for {each} in turn, that draft's own chance of proposing each token was taken away "
            "again, cut at zero and rescaled.")
