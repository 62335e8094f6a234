"""What AS-BV and AS-BV+H bring to the host before phase 1, in one copy.

Phase 1 walks the drafts' trie on the host: it needs the drafts' tokens, and at each node
p(y | u) of the token y it selects there (Bayes' rule on the alive count, `as_bv.child_alive_law`).
Both are read here in one copy, and on a large vocabulary so is the size of the draft's
support, which sets the layout the rule runs on (`as_bv_fast.on_support`). On a GPU each host
read is a device sync; this one replaces one per node and one for the support.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from . import as_bv_fast
from .base import VerifyInput
from .support import OnSupport, proposable_tokens


@dataclass(frozen=True)
class DraftsOnHost:
    """The drafts' tokens and probabilities phase 1 needs, as Python values."""

    tokens: list[list[int]]  # [K][L] the drafts' tokens in the ids the rule runs on
    emitted: list[list[int]]  # [K][L] the same tokens in the ids the result is written in
    # [K][L][K]: p at draft k's node at depth d of draft k2's token there. A candidate y at a node
    # is some alive draft k2's token and the node's row is its first alive draft's, so this holds
    # p(y | u) for every node and candidate phase 1 can meet.
    draft_at: list[list[list[float]]]


def read_drafts(inp: VerifyInput, emitted: torch.Tensor | None = None) -> DraftsOnHost:
    """`DraftsOnHost` of `inp` in one host read; `emitted` [K, L]: the tokens in the result's ids
    (`inp`'s own by default)."""
    return _read(inp.draft_tokens, inp.draft_tokens if emitted is None else emitted, _draft_at(inp))[0]


def on_support_with_drafts(inp: VerifyInput) -> tuple[OnSupport | None, DraftsOnHost]:
    """`as_bv_fast.on_support(inp)` and the `DraftsOnHost` of the input the rule runs on (the
    tokens renumbered where that is the support layout, written out in `inp`'s ids), in one host
    read: the support's size travels with the drafts, so the support is found without `nonzero`'s."""
    if inp.vocab_size < as_bv_fast.SUPPORT_FROM_VOCAB:  # the full vocabulary whatever the support
        return None, read_drafts(inp)
    proposable = proposable_tokens(inp)
    # A token's id on the support layout: how many proposable ids lie below it (searchsorted's answer).
    on_layout = (proposable.cumsum(0) - proposable.long())[inp.draft_tokens]
    drafts, (size,) = _read(on_layout, inp.draft_tokens, _draft_at(inp), proposable.sum()[None])
    small = as_bv_fast.on_support(inp, proposable, int(size))
    return small, drafts if small is not None else dataclasses.replace(drafts, tokens=drafts.emitted)


def _draft_at(inp: VerifyInput) -> torch.Tensor:
    """[K, L, K]: draft_probs[k, d, draft_tokens[k2, d]]. The support layout only copies
    columns, so these are the same values on either layout."""
    K, L = inp.num_drafts, inp.draft_length
    return inp.draft_probs.gather(-1, inp.draft_tokens.T.unsqueeze(0).expand(K, L, K))


def _read(tokens: torch.Tensor, emitted: torch.Tensor, draft_at: torch.Tensor,
          extra: torch.Tensor | None = None) -> tuple[DraftsOnHost, list[float]]:
    """One host read of the tokens [K, L] (twice: the rule's ids, the result's), draft_at
    [K, L, K] and `extra` [X]. Token ids travel as float64, exact below 2**53."""
    K, L = tokens.shape
    parts = [tokens.reshape(-1), emitted.reshape(-1), draft_at.reshape(-1)] + ([] if extra is None else [extra])
    values = torch.cat([part.to(torch.float64) for part in parts]).tolist()

    def rows(start: int) -> list[list[int]]:
        return [[int(t) for t in values[start + k * L : start + (k + 1) * L]] for k in range(K)]

    probs = values[2 * K * L : 2 * K * L + K * L * K]
    draft_rows = [[probs[(k * L + d) * K : (k * L + d + 1) * K] for d in range(L)] for k in range(K)]
    return DraftsOnHost(rows(0), rows(K * L), draft_rows), values[2 * K * L + K * L * K :]
