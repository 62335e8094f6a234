"""AS-BV's large-vocabulary machinery (docs/algorithms.md §6.3, §6.6): the strict order at a
node, the count sums of its laws, and the switch to the draft's support.

These are the speed stand-ins of `as_bv`: on tables of at most ORDER_HEAD tokens the order is
that of docs/algorithms.md §6.3 (every token ranked by q/p, ties broken by the larger id);
above that only the likeliest proposals are ranked by ratio. `count_sum` is evaluated by
Horner's rule from HORNER_FROM candidates on. From SUPPORT_FROM_VOCAB tokens on, both phases
run on the draft's support plus one rest cell (`spectr_gbv.methods.support`): a draft head
narrower than the target's vocabulary (the default pair's: 8,192 of 49,152) proposes no other
token, and tokens it cannot propose add nothing to any selection law and only their total
target mass to a residual mass, so the rule is the same. Each is either the same quantity (Horner, the support layout) or
another fixed strict order, which keeps the rule exact; tests/test_as_bv_fast.py and
tests/test_as_bv.py compare them with their references on seeded inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property

import torch

from . import as_bv_lp
from .base import VerifyInput
from .spectr import optimal_rho, optimal_rho_on_device
from .support import OnSupport, on_draft_support

# The strict order ranks at most this many tokens by ratio (`NodeOrder`).
ORDER_HEAD = 256

# Grid steps of seq's rho* search on a real vocabulary (`NodeOrder.rho`): three leave rho within
# (n - 1) / 64**3 ~ 4e-6 (n - 1) above rho*, which lowers a candidate's acceptance min(1, q / (rho p))
# by that fraction at most; the full search's other seven steps were the largest single cost of
# AS-BV's verification on the default pair. Any rho keeps the rule exact (`NodeOrder.rho`).
RHO_STEPS = 3

# From this vocabulary size on, both phases run on the draft's support plus one cell for the
# rest (`spectr_gbv.methods.support`) where that support is at most half the vocabulary: the
# default draft's head covers 8,192 of 49,152 tokens. Tables below it (every golden value,
# every enumeration) keep the full vocabulary, and so does a draft support too narrow to stay
# above the sizes at which `as_bv_lp` and `NodeOrder` switch to their large-vocabulary
# paths (a top-k draft of 50 tokens): on the same path, both layouts are the same rule.
SUPPORT_FROM_VOCAB = ORDER_HEAD + 1


def on_support(inp: VerifyInput, proposable: torch.Tensor | None = None, support_size: int | None = None) -> OnSupport | None:
    """`inp` on the draft's support plus one rest cell, where AS-BV runs there (else None).
    `proposable` and `support_size`: as `on_draft_support` takes them, to spare its host read."""
    return on_draft_support(inp, SUPPORT_FROM_VOCAB, fewest_cells=max(as_bv_lp.MAX_LP_TOKENS, ORDER_HEAD) + 1,
                            proposable=proposable, support_size=support_size)


@dataclass(frozen=True)
class NodeOrder:
    """The strict order > at node u: on the head, by q/p, ties broken by the larger token id.

    With V <= ORDER_HEAD the head is every token: the order of docs/algorithms.md §6.3.
    Otherwise the head is the ORDER_HEAD tokens the draft is likeliest to propose, and the
    tail (the rest) lies below the head, by id. Deviation from paper: any fixed strict order keeps the rule
    exact; this one needs no O(V log V) sort of the vocabulary at every node, and lex
    still ranks the proposals that carry almost all of the draft mass by ratio.
    """

    head: torch.Tensor  # [H] long: head token ids from lowest to highest
    tail: torch.Tensor | None  # [V] float64, 1 on the tail, 0 on the head; None when the head is every token
    compressed: tuple[torch.Tensor, torch.Tensor] | None  # (q, p) on the head plus one tail cell
    positive: bool  # p > 0 for every token, as checked (lets `components` skip its guards); False: unchecked
    # Places in the head already on the host (None: a tail token), read with other values
    # (`as_bv.node_law`), so that `top` and `below_mask` on them read nothing.
    known_ranks: dict[int, int | None] = field(default_factory=dict)

    def below(self, weights: torch.Tensor) -> torch.Tensor:
        """sum_{x' < x} weights(x') for every x. [V]"""
        head_below = _exclusive_cumsum(weights[self.head])
        if self.tail is None:
            return torch.empty_like(weights).index_put_((self.head,), head_below)
        tail_weights = weights * self.tail  # a 0/1 mask: torch.where's values, one pass
        below_tail = _exclusive_cumsum(tail_weights)
        tail_total = below_tail[-1] + tail_weights[-1]  # the tail's sum, without another pass
        return below_tail.index_put_((self.head,), head_below + tail_total)

    def top(self, tokens: list[int]) -> int:
        """max_> of the candidates: the one the order ranks highest (a head token by its place
        in the head, above every tail token; tail tokens by id)."""
        ranks = {t: self._rank(t) for t in tokens}
        return max(tokens, key=lambda t: (1, ranks[t]) if ranks[t] is not None else (0, t))

    def _rank(self, token: int) -> int | None:
        """token's place in the head, None for a tail token."""
        return self.known_ranks[token] if token in self.known_ranks else self._head_rank.get(token)

    def places(self, tokens: torch.Tensor) -> torch.Tensor:
        """Each token's place in the head, -1 for a tail token, as float64 on the device (to
        travel in another host read; `known_ranks` takes them back). tokens: [n] long -> [n]"""
        hits = self.head == tokens[:, None]  # [n, H]: at most one hit per row, head ids being distinct
        return torch.where(hits.any(-1), hits.to(torch.float64).argmax(-1).to(torch.float64), -1.0)

    @cached_property
    def keys(self) -> torch.Tensor:
        """[V] long, a key per token that sorts as the order does: a head token's is V + its
        place, a tail token's its id (`top` and `below_mask` on the device, with no read)."""
        vocab = self.head.shape[0] if self.tail is None else self.tail.shape[0]
        keys = torch.arange(vocab, device=self.head.device)
        return keys.index_put_((self.head,), vocab + torch.arange(self.head.shape[0], device=self.head.device))

    def top_on_device(self, tokens: torch.Tensor) -> torch.Tensor:
        """`top` of distinct candidates [n] long as their 0-dim index (0..n-1), with no read."""
        return self.keys[tokens].argmax()

    def below_mask_on_device(self, y: torch.Tensor) -> torch.Tensor:
        """`below_mask` of a 0-dim long token y, with no read. [V] bool"""
        return self.keys < self.keys.index_select(0, y.reshape(1))

    @cached_property
    def _head_rank(self) -> dict[int, int]:
        # A dict of the H head places, built when first needed: no [V] key array per node.
        return {token: place for place, token in enumerate(self.head.tolist())}

    def below_mask(self, y: int) -> torch.Tensor:
        """[V] bool: the tokens x with x < y in this order (a head token: the head tokens ranked
        lower and the whole tail; a tail token: the tail tokens of smaller id)."""
        vocab = self.head.shape[0] if self.tail is None else self.tail.shape[0]
        place = self._rank(y)
        if place is not None:
            mask = torch.zeros(vocab, dtype=torch.bool, device=self.head.device)
            mask[self.head[:place]] = True
            return mask if self.tail is None else mask | self.tail.bool()
        return self.tail.bool() & (torch.arange(vocab, device=self.head.device) < y)

    def rho(self, target: torch.Tensor, draft: torch.Tensor, n: int) -> torch.Tensor:
        """rho for seq: rho* of docs/algorithms.md §3.3 (sorted once per node), or with a
        tail, rho* of the head with the tail merged into one token. seq's law holds for any rho (its fallback
        is lex over the rejected, not a residual), so the approximation costs no exactness.

        With a tail (a real vocabulary) the search runs on the device, with no host read, and
        stops at RHO_STEPS (within (n - 1) x 4e-6 of rho*, above it). Without one (every golden
        value, every table enumerated without the large-vocabulary stand-ins) the host bisection
        stays, so those values keep their bits."""
        if self.compressed is None:
            return optimal_rho(target, draft, n, descending=self.head.flip(0))
        return optimal_rho_on_device(*self.compressed, n, steps=RHO_STEPS)


def _exclusive_cumsum(values: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values)
    out[0] = 0.0
    torch.cumsum(values[:-1], 0, out=out[1:])  # into place: no concatenation pass
    return out


def strict_order(target: torch.Tensor, draft: torch.Tensor, check_positive: bool = True) -> NodeOrder:
    """The node's `NodeOrder`; `check_positive=False` spares the host read of p > 0 everywhere
    (`positive` is then False, and `components` takes its guarded path: the same values)."""
    vocab = target.shape[-1]
    if vocab <= ORDER_HEAD:
        candidates = torch.arange(vocab, device=target.device)
    else:  # ascending ids, so that the stable sort below breaks ties by id
        candidates = torch.sort(torch.topk(draft, ORDER_HEAD, sorted=False).indices).values
    q, p = target[candidates], draft[candidates]
    # Tokens the draft cannot produce get ratio inf: they carry no draft mass, so where
    # they sit changes no law, and inf keeps q = p = 0 from producing NaN.
    ratio = torch.where(p > 0, q / torch.where(p > 0, p, 1.0), float("inf"))
    # Ascending and stable: equal ratios keep ascending ids, so the larger id ranks higher.
    head = candidates[torch.sort(ratio, stable=True).indices]
    positive = check_positive and bool(draft.amin() > 0)
    if vocab <= ORDER_HEAD:
        return NodeOrder(head, None, None, positive)
    tail = torch.ones(vocab, dtype=target.dtype, device=target.device)
    tail[head] = 0.0
    tail_q, tail_p = target @ tail, draft @ tail  # dot products: no masked copies
    compressed = (torch.cat([target[head], tail_q[None]]), torch.cat([draft[head], tail_p[None]]))
    return NodeOrder(head, tail, compressed, positive)


def count_sum(carrier: torch.Tensor, below: torch.Tensor, n: int) -> torch.Tensor:
    """sum_{c=1..n} C(n,c) carrier^c below^(n-c): P(the max of n i.i.d. draws is x), term by
    term, because (carrier + below)^n - below^n cancels for small carrier (docs/algorithms.md §6.3)."""
    if n == 1:
        return carrier  # C(1, 1) carrier below^0
    if n >= HORNER_FROM:
        return _count_sum_horner(carrier, below, n)
    carrier_to, below_to = powers(carrier, n), powers(below, n - 1)
    # Summed in the order c = 1..n; C(n, n) = 1 and below^0 = 1 are not multiplied in.
    terms = [math.comb(n, c) * carrier_to[c] * below_to[n - c] for c in range(1, n)]
    return sum(terms[1:], start=terms[0]) + carrier_to[n]  # 0 + x is x: start at the first term


# From this n on count_sum is evaluated by Horner's rule in carrier, 3n - 4 passes over the
# vocabulary instead of about 4n. Below it, the term-by-term sum the golden values were
# computed with is kept bit for bit (the golden instances have K <= 3, and the lambda LP's
# vertex in a flat region can depend on the last bit of its input).
HORNER_FROM = 4


def _count_sum_horner(carrier: torch.Tensor, below: torch.Tensor, n: int) -> torch.Tensor:
    """carrier (C(n,1) below^(n-1) + carrier (C(n,2) below^(n-2) + ... + carrier (C(n,n-1) below + carrier))):
    every term is nonnegative, so no cancellation; the same value to a few ulp."""
    below_to = powers(below, n - 1)
    acc = torch.add(carrier, below, alpha=n)  # C(n, n-1) below + C(n, n) carrier
    for c in range(n - 2, 0, -1):
        acc = torch.add(carrier * acc, below_to[n - c], alpha=math.comb(n, c))
    return carrier * acc


def powers(values: torch.Tensor, highest: int) -> list[torch.Tensor | None]:
    """[None, x, x^2, ..., x^highest], each one product from the last.

    torch's x ** k is x * x and x * x * x for k = 2, 3 (the same bits as here) but a
    transcendental pow for k >= 4, twenty times the cost of a product; there the product
    differs from it in the last bit at most, which no golden value or test tolerance sees."""
    out = [None, values]
    for _ in range(2, highest + 1):
        out.append(out[-1] * values)
    return out

