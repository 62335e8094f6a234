"""What AS-BV and AS-BV+H bring to the host before phase 1, in one copy.

Phase 1 walks the drafts' trie on the host: it needs the drafts' tokens, and at each node
p(y | u) of the token y it selects there (Bayes' rule on the alive count, `as_bv.child_alive_law`).
Both are read here in one copy, and on a large vocabulary so is the size of the draft's
support, which sets the layout the rule runs on (`as_bv_fast.on_support`), and so are the
uniforms of phase 1's coins (`phase_one_budget`), which it then spends on the host. All of it
depends on the drafts alone, so the engine computes it before the target's forward and reads it
with the drafts' tokens, which it reads anyway to build the trie it scores (`prefetch`,
`VerifyInput.prefetched`): no read of the rule's own. On a GPU each host read is a device sync.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from ..randomness import HostUniforms, Randomness
from . import as_bv_fast
from .base import VerifyInput, read_with_drafts, token_rows
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
    # Phase 1's uniforms on the host (None: phase 1 asks the `Randomness` for each coin).
    uniforms: HostUniforms | None = None


def phase_one_budget(num_drafts: int) -> int:
    """The most uniforms phase 1 can spend: it draws only at a node whose candidates carry two
    tokens or more (one draw for the component, one coin per candidate for seq), and a path of
    the trie meets at most K - 1 such nodes, each leaving fewer drafts alive."""
    return (num_drafts - 1) * (1 + num_drafts)


def prefetch(draft_tokens: torch.Tensor, draft_probs: torch.Tensor, rng: Randomness | None) -> torch.Tensor:
    """Everything `on_support_with_drafts` reads beside the tokens, float64 [X]: on a large
    vocabulary the tokens' ids on the support layout [K L] and the support's size [1]; then
    draft_at [K L K] (`DraftsOnHost`) and phase 1's uniforms where `rng` hands them out ahead
    [`phase_one_budget`] (None: a rule that decides phase 1 on the device takes none here).
    draft_probs: the canonical float64 rows the rule will see."""
    K, L = draft_tokens.shape
    parts = []
    if draft_probs.shape[-1] >= as_bv_fast.SUPPORT_FROM_VOCAB:
        proposable = proposable_tokens(draft_probs)
        # A token's id on the support layout: how many proposable ids lie below it (searchsorted's answer).
        parts += [(proposable.cumsum(0) - proposable.long())[draft_tokens].reshape(-1), proposable.sum()[None]]
    parts.append(_draft_at(draft_tokens, draft_probs).reshape(-1))
    uniforms = None if rng is None else rng.uniform_block(phase_one_budget(K), draft_probs.device)
    if uniforms is not None:
        parts.append(uniforms)
    return torch.cat([part.to(torch.float64) for part in parts])


def on_support_with_drafts(inp: VerifyInput, rng: Randomness,
                           phase_one_ahead: bool = True) -> tuple[OnSupport | None, DraftsOnHost]:
    """`as_bv_fast.on_support(inp)` and the `DraftsOnHost` of the input the rule runs on (the
    tokens renumbered where that is the support layout, written out in `inp`'s ids): from
    `inp.prefetched` where the engine read them with the drafts, else in one host read (the
    uniforms drawn first, so that both ways spend the same draws). `phase_one_ahead` False:
    no uniforms for phase 1 (as the rule's `prefetch` then draws none)."""
    if inp.prefetched is not None:  # read by the engine for this verification, with rng's uniforms
        got = inp.prefetched.claim()
    else:
        got = read_with_drafts(inp.draft_tokens, prefetch(inp.draft_tokens, inp.draft_probs, rng if phase_one_ahead else None))
    K, L = inp.draft_tokens.shape
    values, at = got.values, 0
    large = inp.vocab_size >= as_bv_fast.SUPPORT_FROM_VOCAB
    if large:
        on_layout = token_rows(values, K, L)
        size, at = int(values[K * L]), K * L + 1
    uniforms = values[at + K * L * K :]
    drafts = DraftsOnHost(got.rows, got.rows, _draft_at_rows(values[at:], K, L), HostUniforms(uniforms) if uniforms else None)
    if not large:  # the full vocabulary whatever the support
        return None, drafts
    small = as_bv_fast.on_support(inp, proposable_tokens(inp.draft_probs), size)
    return small, drafts if small is None else dataclasses.replace(drafts, tokens=on_layout)


def read_drafts(inp: VerifyInput) -> DraftsOnHost:
    """`DraftsOnHost` of `inp` in one host read, with no uniforms (the rule asks for its coins)."""
    got = read_with_drafts(inp.draft_tokens, _draft_at(inp.draft_tokens, inp.draft_probs).reshape(-1))
    return DraftsOnHost(got.rows, got.rows, _draft_at_rows(got.values, *inp.draft_tokens.shape))


def _draft_at(draft_tokens: torch.Tensor, draft_probs: torch.Tensor) -> torch.Tensor:
    """[K, L, K]: draft_probs[k, d, draft_tokens[k2, d]]. The support layout only copies
    columns, so these are the same values on either layout."""
    K, L = draft_tokens.shape
    return draft_probs.gather(-1, draft_tokens.T.unsqueeze(0).expand(K, L, K))


def _draft_at_rows(values: list[float], K: int, L: int) -> list[list[list[float]]]:
    """`DraftsOnHost.draft_at` [K][L][K] from the first K L K of the values read."""
    return [[values[(k * L + d) * K : (k * L + d + 1) * K] for d in range(L)] for k in range(K)]
