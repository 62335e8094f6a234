"""One verification input, restated on the draft's support plus one "rest" cell.

The default draft's head covers 8,192 of the target's 49,152 tokens, so p(x) = 0 for five in
six tokens at every node. A token the draft cannot propose is never a candidate, adds nothing
to any draft-side law (AS-BV's s_r and D_u vanish there), and enters the rules only through
the target mass q(x) it carries: in a residual (weight q - draft)_+ it stays proportional to q.
Merging all of them into one cell holding their total target mass (and draft mass 0) therefore
changes no quantity a rule computes from sums, while every pass over the vocabulary gets six
times shorter. Token ids keep their order (the support is ascending, the rest cell last), so
an order that breaks ties by the larger id breaks them the same way.

What does not survive the merge is the identity of an off-support token, so a caller samples
its final token from the full-vocabulary distribution: `OnSupport.expand` puts a draft-side
row (zero on the rest cell) back on the full vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .base import VerifyInput


@dataclass(frozen=True)
class OnSupport:
    inp: VerifyInput  # the same drafts on [support..., rest]: draft ids renumbered, V' = S + 1
    support: torch.Tensor  # [S] long: the original ids, ascending
    vocab_size: int  # V of the original input

    def expand(self, rows: torch.Tensor) -> torch.Tensor:
        """[..., S + 1] -> [..., V] for rows with no mass on the rest cell (draft-side laws)."""
        out = rows.new_zeros(*rows.shape[:-1], self.vocab_size)
        out[..., self.support] = rows[..., :-1]
        return out

    def lift(self, row: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """A target-side law [S + 1] (a residual) back on the full vocabulary [V]: the rest cell's
        mass spread over the off-support tokens in proportion to `target`, the full-vocabulary q
        of the same node (where the draft has no mass, every rule's residual is proportional to q)."""
        out = self.expand(row)
        off = target.clone()
        off[self.support] = 0.0
        mass = off.sum()
        # Decided on the device, with no host read: where the rest cell or the off-support
        # target mass is empty, the expanded row as it is (the quotient's NaNs are not taken).
        return torch.where((row[-1] > 0) & (mass > 0), out + row[-1] * off / mass, out)


def proposable_tokens(draft_probs: torch.Tensor) -> torch.Tensor:
    """[V] bool: the tokens some draft row ([..., V]) gives positive probability."""
    return draft_probs.flatten(0, -2).amax(0) > 0  # amax, not (p > 0).any: five times faster here


def on_draft_support(
    inp: VerifyInput, smallest_vocab: int, fewest_cells: int = 0,
    proposable: torch.Tensor | None = None, support_size: int | None = None,
) -> OnSupport | None:
    """`inp` on the union of its draft rows' supports, or None where that would not pay (V
    below `smallest_vocab`, or a support wider than half the vocabulary) or would change the
    rule (fewer than `fewest_cells` cells: a caller whose code paths switch on the vocabulary
    size passes the size at which they switch, so that both layouts take the same path).

    A caller that has `proposable_tokens(inp.draft_probs)` and its count on the host (read with other
    values) passes both, and the support is found without a host read of its own."""
    vocab = inp.vocab_size
    if vocab < smallest_vocab:
        return None
    proposable = proposable_tokens(inp.draft_probs) if proposable is None else proposable
    if support_size is None:
        support = proposable.nonzero().squeeze(-1)  # a host read: the layout's size depends on it
    else:  # the same ascending ids, without a device sync
        support = torch.nonzero_static(proposable, size=support_size).squeeze(-1)
    cells = support.numel() + 1
    if 2 * cells > vocab or cells < fewest_cells:
        return None
    # The rest cell's target mass as a sum of nonnegative terms (no 1 - sum cancellation).
    off = (~proposable).to(inp.target_probs.dtype)
    target = torch.cat([inp.target_probs[..., support], (inp.target_probs @ off)[..., None]], dim=-1)
    draft = torch.cat([inp.draft_probs[..., support], inp.draft_probs.new_zeros(*inp.draft_probs.shape[:-1], 1)], dim=-1)
    tokens = torch.searchsorted(support, inp.draft_tokens)
    return OnSupport(VerifyInput(tokens, draft, target), support, vocab)
