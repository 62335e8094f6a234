"""AS-BV, adaptive select-then-block-verify (ALGORITHMS.md 4.9), exact.

Every exact K-draft rule is bounded by "select one draft, then run GBV with the selected
draft's exact law" (the block canonical decomposition, 4.9). AS-BV is such a rule:

* Phase 1 walks down the trie of the K drafts, one token per level. At node u it picks
  one of the alive drafts' next tokens (alive = drafts whose prefix is the selected u)
  with a mixture of three token-level selections, lex, seq and first, whose joint laws
  T_r[n](x, c) are known in closed form. It tracks pi, the law of the alive count given
  the selected prefix, so the selected block's law D = prod_u D_u is known exactly.
* Phase 2 is plain GBV (section 3) on the selected block with D in place of p.

    paper (ALGORITHMS.md 4.9)                   here
    u, d = |u|                                  node (target/draft rows at depth d)
    A, n = |A|                                  alive drafts, num_alive
    pi(n)                                       alive_law: {n: P(n alive | selected prefix u)}
    omega (phase 1)                             omega: GBV weight of the selected prefix under D
    x > x' (q/p, ties by larger id)             NodeOrder (head, top, below)
    G_<(x), R_<(x)                              below_draft, Components.below_rejected
    rho*, a(x), beta, r(x)                      spectr.optimal_rho, Components.accept / beta / rejected
    lex, seq, first                             COMPONENTS (this order everywhere, also in lambda)
    T_r[n](x, c)                                joint_at(...)
    s_r[n](x) = sum_c T_r[n](x, c)              Components.marginals [3, V]
    lambda[n]                                   NodeLaw.mixtures[n], from mixture_weights
    D_u                                         NodeLaw.selected
    omega_i, S_i, h_i, tau (phase 2)            gbv.block_weights / block_accept_probs / scan_coins

One strict order (ratio q/p, ties broken by the larger token id) is used both to select
and in the laws: an inconsistent tie-break is biased (TV 0.04-0.07, 4.9).

Deviation from paper: 4.9 says lambda is the argmax of sum_x min(lambda . s(x), omega q(x))
"on a fixed grid". Its golden values are reproduced, to 1e-6, only by the exact LP solved by
HiGHS with lambda as the first variables (a 231-point grid misses four of the six, by up
to 0.02, through tie-breaking in flat regions); this module solves that LP. Any
deterministic lambda keeps the rule exact (lambda depends only on the selected path), so
real vocabularies get cheaper stand-ins where the note's choices would cost O(V log V) per
node: a reduced LP (`mixture_weights`), an order that ranks only the likeliest proposals
by ratio (`NodeOrder`), and "first" for alive counts of negligible posterior (`node_law`).
On tables of at most 64 tokens the order and the LP are the note's; the third applies at
every size (posterior below 1e-6) and leaves every golden value unchanged.

A draft head narrower than the target's vocabulary (the default pair's: 8,192 of 49,152) is
met by running both phases on the draft's support plus one cell for the rest of the target's
mass (`spectr_gbv.methods.support`, from SUPPORT_FROM_VOCAB tokens on): tokens the draft
cannot propose add nothing to any selection law and only their total target mass to a
residual mass, so the rule is the same; only the final token is drawn on the full vocabulary.

Phase 1 spends coins only where a choice is random (the component draw, seq's tests), so
at K = 1 AS-BV draws exactly GBV's uniforms and returns GBV's outcomes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from functools import cached_property, lru_cache

import numpy as np
import torch

from ..probs import residual
from ..randomness import Randomness
from .base import SubBlockTest, VerifyInput, VerifyResult
from .gbv import block_accept_probs, block_weights, expected_from_h, last_success, log_ratios, scan_coins
from .spectr import optimal_rho
from .support import on_draft_support

COMPONENTS = ("lex", "seq", "first")
LEX, SEQ, FIRST = range(3)

# The lambda LP keeps at most this many tokens as variables (all of them below it, which
# is exactly the LP behind the golden values); see `mixture_weights`.
MAX_LP_TOKENS = 64

# Mixture weights below this are rounding residue of the LP solution and are set to 0.
NEGLIGIBLE_WEIGHT = 1e-12

# The strict order ranks at most this many tokens by ratio (`NodeOrder`).
ORDER_HEAD = 256

# An alive count this unlikely given the selected prefix is served by "first" (`node_law`).
MIN_ALIVE_MASS = 1e-6
ONLY_FIRST = (0.0, 0.0, 1.0)

# From this vocabulary size on, both phases run on the draft's support plus one cell for the
# rest (`spectr_gbv.methods.support`) where that support is at most half the vocabulary: the
# default draft's head covers 8,192 of 49,152 tokens. Tables below it (every golden value,
# every enumeration) keep the full vocabulary, and so does a draft support too narrow to stay
# above the sizes at which `mixture_weights` and `NodeOrder` switch to their large-vocabulary
# paths (a top-k draft of 50 tokens): on the same path, both layouts are the same rule.
SUPPORT_FROM_VOCAB = ORDER_HEAD + 1


def _on_support(inp: VerifyInput):
    return on_draft_support(inp, SUPPORT_FROM_VOCAB, fewest_cells=max(MAX_LP_TOKENS, ORDER_HEAD) + 1)


@dataclass(frozen=True)
class NodeOrder:
    """The strict order > at node u: on the head, by q/p, ties broken by the larger token id.

    With V <= ORDER_HEAD the head is every token: the order of 4.9. Otherwise the head is
    the ORDER_HEAD tokens the draft is likeliest to propose, and the tail (the rest) lies
    below the head, by id. Deviation from paper: any fixed strict order keeps the rule
    exact; this one needs no O(V log V) sort of the vocabulary at every node, and lex
    still ranks the proposals that carry almost all of the draft mass by ratio.
    """

    head: torch.Tensor  # [H] long: head token ids from lowest to highest
    tail: torch.Tensor | None  # [V] float64, 1 on the tail, 0 on the head; None when the head is every token
    compressed: tuple[torch.Tensor, torch.Tensor] | None  # (q, p) on the head plus one tail cell
    positive: bool  # p > 0 for every token (lets `components` skip its guards)

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
        rank = self._head_rank
        return max(tokens, key=lambda t: (1, rank[t]) if t in rank else (0, t))

    @cached_property
    def _head_rank(self) -> dict[int, int]:
        # A dict of the H head places, built when first needed: no [V] key array per node.
        return {token: place for place, token in enumerate(self.head.tolist())}

    def below_mask(self, y: int) -> torch.Tensor:
        """[V] bool: the tokens x with x < y in this order (a head token: the head tokens ranked
        lower and the whole tail; a tail token: the tail tokens of smaller id)."""
        vocab = self.head.shape[0] if self.tail is None else self.tail.shape[0]
        rank = self._head_rank
        if y in rank:
            mask = torch.zeros(vocab, dtype=torch.bool, device=self.head.device)
            mask[self.head[: rank[y]]] = True
            return mask if self.tail is None else mask | self.tail.bool()
        return self.tail.bool() & (torch.arange(vocab, device=self.head.device) < y)

    def rho(self, target: torch.Tensor, draft: torch.Tensor, n: int) -> torch.Tensor:
        """rho for seq: rho* of 2.2 (sorted once per node), or with a tail, rho* of the
        head with the tail merged into one token. seq's law holds for any rho (its fallback
        is lex over the rejected, not a residual), so the approximation costs no exactness."""
        if self.compressed is None:
            return optimal_rho(target, draft, n, descending=self.head.flip(0))
        return optimal_rho(*self.compressed, n)


def _exclusive_cumsum(values: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(values)
    out[0] = 0.0
    torch.cumsum(values[:-1], 0, out=out[1:])  # into place: no concatenation pass
    return out


def strict_order(target: torch.Tensor, draft: torch.Tensor) -> NodeOrder:
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
    positive = bool(draft.amin() > 0)
    if vocab <= ORDER_HEAD:
        return NodeOrder(head, None, None, positive)
    tail = torch.ones(vocab, dtype=target.dtype, device=target.device)
    tail[head] = 0.0
    tail_q, tail_p = target @ tail, draft @ tail  # dot products: no masked copies
    compressed = (torch.cat([target[head], tail_q[None]]), torch.cat([draft[head], tail_p[None]]))
    return NodeOrder(head, tail, compressed, positive)


def count_sum(carrier: torch.Tensor, below: torch.Tensor, n: int) -> torch.Tensor:
    """sum_{c=1..n} C(n,c) carrier^c below^(n-c): P(the max of n i.i.d. draws is x), term by
    term, because (carrier + below)^n - below^n cancels for small carrier (4.9)."""
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


@dataclass(frozen=True)
class Components:
    """The three selections among n alive drafts at node u, with their laws."""

    num_alive: int
    accept: torch.Tensor  # [V] a(x) = min(1, q / (rho p)) of seq
    beta: float  # sum_x p(x) a(x)
    rejected: torch.Tensor  # [V] r(x) = p(x) (1 - a(x)) / (1 - beta): a rejected candidate's token
    below_rejected: torch.Tensor  # [V] R_<(x)
    marginals: torch.Tensor  # [3, V] s_lex, s_seq, s_first


def components(target: torch.Tensor, draft: torch.Tensor, order: NodeOrder, below_draft: torch.Tensor, n: int) -> Components:
    rho = order.rho(target, draft, n)
    if order.positive:  # no p = 0 to guard: the same values in three passes instead of seven
        accept = torch.clamp(target / (rho * draft), max=1.0)
    else:
        accept = torch.where(draft > 0, torch.clamp(target / (rho * torch.where(draft > 0, draft, 1.0)), max=1.0), 0.0)
    accepted_mass = draft * accept
    beta = float(accepted_mass.sum())
    # beta = 1 only when every candidate is accepted surely; then the fallback never runs.
    rejected = draft * (1.0 - accept) / (1.0 - beta) if beta < 1.0 else torch.zeros_like(draft)
    below_rejected = order.below(rejected)
    reach = sum((1.0 - beta) ** k for k in range(n))  # sum_k (1-beta)^(k-1): no 1/beta
    marginals = torch.empty((3, draft.shape[-1]), dtype=draft.dtype, device=draft.device)
    marginals[LEX] = count_sum(draft, below_draft, n)
    torch.add(accepted_mass * reach, (1.0 - beta) ** n * count_sum(rejected, below_rejected, n), out=marginals[SEQ])
    marginals[FIRST] = draft
    return Components(n, accept, beta, rejected, below_rejected, marginals)


def _binomial(m: int, prob: float, c: int) -> float:
    return math.comb(m, c) * prob**c * (1.0 - prob) ** (m - c) if 0 <= c <= m else 0.0


def joint_at(comp: Components, draft_y: float, below_y: float, y: int) -> list[list[float]]:
    """T_r[n](y, c) for r in COMPONENTS and c = 0..n: P(token y selected, c candidates carry y)."""
    n = comp.num_alive
    a, r, below_r = (float(t[y]) for t in (comp.accept, comp.rejected, comp.below_rejected))
    lex = [math.comb(n, c) * draft_y**c * below_y ** (n - c) if c else 0.0 for c in range(n + 1)]
    first = [draft_y * _binomial(n - 1, draft_y, c - 1) for c in range(n + 1)]
    seq = [0.0] * (n + 1)
    for c in range(1, n + 1):
        # first acceptance at candidate k: k-1 rejected (tokens ~ r), n-k untouched (tokens ~ p)
        accepted = sum(
            (1.0 - comp.beta) ** (k - 1) * draft_y * a
            * sum(_binomial(k - 1, r, j) * _binomial(n - k, draft_y, c - 1 - j) for j in range(c))
            for k in range(1, n + 1)
        )
        seq[c] = accepted + (1.0 - comp.beta) ** n * math.comb(n, c) * r**c * below_r ** (n - c)
    return [lex, seq, first]


# ------------------------------------------------------------------------------- lambda


def mixture_weights(marginals: torch.Tensor, cap: torch.Tensor, capped: torch.Tensor | None = None,
                    capped_sums: torch.Tensor | None = None) -> tuple[float, float, float]:
    """lambda = argmax over the 2-simplex of F(lambda) = sum_x min(lambda . s(x), cap(x)),
    cap = omega q(. | u); F is concave and piecewise linear.

    Up to MAX_LP_TOKENS tokens: the LP max sum_x t_x with t_x <= lambda . s(x), t_x <= cap(x),
    solved by HiGHS's dual simplex with lambda as the first variables. That is the
    formulation behind 4.9's golden values; where the maximum is not unique, the solver's
    vertex is the tie-break, and the golden values depend on it.

    Above that (real vocabularies): a token with s_r(x) <= cap(x) for every r adds
    lambda . s(x), one with s_r(x) >= cap(x) for every r adds cap(x), exactly. Of the others
    (whose kink crosses the simplex) the MAX_LP_TOKENS with the widest range stay exact and
    the rest add their chord sum_r lambda_r min(s_r(x), cap(x)); the maximum of that reduced F
    is found among the vertices of its arrangement (`_vertex_maximum`). Deviation from
    paper: a deterministic stand-in for the full argmax, which is all exactness needs, at
    a cost independent of V beyond a few passes. `capped` = min(s, cap) [3, V] and its row
    sums may be passed in by a caller that needs them too (`node_law`).
    """
    as_bytes = lambda t: np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np.float64).tobytes()  # noqa: E731
    if marginals.shape[-1] <= MAX_LP_TOKENS:
        return _solve_mixture(as_bytes(marginals), as_bytes(cap))
    capped = torch.minimum(marginals, cap) if capped is None else capped  # [3, V]
    capped_sums = capped.sum(-1) if capped_sums is None else capped_sums
    # Row-wise max and min, not .all(0) over [3, V], which costs ten elementwise passes.
    highest = torch.maximum(torch.maximum(marginals[0], marginals[1]), marginals[2])
    lowest = torch.minimum(torch.minimum(marginals[0], marginals[1]), marginals[2])
    crossing = (lowest < cap) & (cap < highest)  # neither all below nor all above the cap
    # Where a kink crosses, min(highest, cap) = cap and min(lowest, cap) = lowest.
    spread = torch.where(crossing, cap - lowest, -1.0)
    kept = torch.topk(spread, MAX_LP_TOKENS, sorted=True).indices
    kept = kept[crossing[kept]]
    # Every token but the kept adds sum_r lambda_r min(s_r(x), cap(x)): the chord, and exactly
    # lambda . s below and cap above (sum_r lambda_r = 1). So one sum serves all of them.
    linear = capped_sums - capped[:, kept].sum(-1)
    return _vertex_maximum(as_bytes(marginals[:, kept]), as_bytes(cap[kept]), as_bytes(linear))


@lru_cache(maxsize=8192)
def _solve_mixture(marginals: bytes, cap: bytes) -> tuple[float, float, float]:
    # Cached on the bytes: exact enumeration and context-free models meet the same node LP
    # again and again, and the answer is a pure function of the input.
    from scipy.optimize import linprog

    s = np.frombuffer(marginals, dtype=np.float64).reshape(3, -1)
    b = np.frombuffer(cap, dtype=np.float64)
    m = b.shape[0]
    solution = linprog(
        np.concatenate([np.zeros(3), -np.ones(m)]),
        A_ub=np.hstack([-s.T, np.eye(m)]),
        b_ub=np.zeros(m),
        A_eq=np.concatenate([np.ones(3), np.zeros(m)])[None],
        b_eq=[1.0],
        bounds=[(0.0, None)] * 3 + [(None, float(x)) for x in b],
        method="highs-ds",
    )
    if solution.status != 0:  # never seen; a fixed answer keeps the rule deterministic
        return (0.0, 1.0, 0.0)
    return _clean(solution.x[:3])


def _clean(weights) -> tuple[float, float, float]:
    weights = np.clip(np.asarray(weights, dtype=np.float64), 0.0, None)
    weights[weights < NEGLIGIBLE_WEIGHT] = 0.0
    return tuple((weights / weights.sum()).tolist())


@lru_cache(maxsize=8192)
def _vertex_maximum(marginals: bytes, cap: bytes, linear: bytes) -> tuple[float, float, float]:
    """argmax of linear . lambda + sum_x min(lambda . s(x), cap(x)) over the simplex, among the
    vertices of the arrangement: every point where two of the planes {lambda . s(x) = cap(x)}
    and {lambda_r = 0} meet on the simplex (a concave piecewise-linear function attains its
    maximum at one). The first maximal candidate wins; the simplex vertices come first."""
    b = np.frombuffer(cap, dtype=np.float64)
    s = np.frombuffer(marginals, dtype=np.float64).reshape(3, -1)
    normals = np.concatenate([np.eye(3), s.T])  # [m+3, 3]: the edges first
    levels = np.concatenate([np.zeros(3), b])
    points = _pair_solutions(normals, levels)
    points = points.clip(min=0.0)
    points /= points.sum(-1, keepdims=True)
    values = points @ np.frombuffer(linear, dtype=np.float64) + np.minimum(points @ s, b).sum(-1)
    return _clean(points[int(np.argmax(values))])


def _pair_solutions(normals: np.ndarray, levels: np.ndarray) -> np.ndarray:
    """For every pair i < j of planes {lambda . normals[i] = levels[i]} (in triu order), the
    point where both meet the plane sum(lambda) = 1, where that point has no coordinate below
    -1e-12 and the pair is not (nearly) parallel on it (|det| > 1e-14). [P', 3]

    The rows of R = (a, b, 1) have R^-1 = (b x 1, 1 x a, a x b) / det R as columns, det R =
    a . (b x 1) (Cramer's rule), so lambda = (l_a (b x 1) + l_b (1 x a) + a x b) / det R. Each
    term is a product of a function of i and one of j, so det and the three numerators are
    four small matrix products over all pairs at once; numpy's batched det and solve would
    spend a LAPACK call on each of the 2211 pairs (m = 64), ten times the cost."""
    n0, n1, n2 = normals.T
    cross_one = np.stack([n1 - n2, n2 - n0, n0 - n1], axis=-1)  # n x (1, 1, 1), [M, 3]
    det = normals @ cross_one.T  # det[i, j] = a . (b x 1)
    numerators = [  # coordinate k: l_a (b x 1)_k - l_b (a x 1)_k + (a x b)_k
        np.stack([levels, -cross_one[:, k], normals[:, p], -normals[:, q]], axis=-1)
        @ np.stack([cross_one[:, k], levels, normals[:, q], normals[:, p]], axis=-1).T
        for k, (p, q) in enumerate(((1, 2), (2, 0), (0, 1)))
    ]
    flat = _pair_index(normals.shape[0])
    det = det.ravel()[flat]
    solvable = np.abs(det) > 1e-14
    coords = [x.ravel()[flat][solvable] / det[solvable] for x in numerators]
    feasible = (coords[0] >= -1e-12) & (coords[1] >= -1e-12) & (coords[2] >= -1e-12)
    return np.stack([c[feasible] for c in coords], axis=-1)


@lru_cache(maxsize=128)
def _pair_index(count: int) -> np.ndarray:
    """Flat indices of the pairs i < j of a [count, count] matrix, in triu order."""
    i, j = np.triu_indices(count, k=1)
    return i * count + j


# ---------------------------------------------------------------------------- phase 1


@dataclass(frozen=True)
class NodeLaw:
    """Everything phase 1 decides at node u before looking at the drafts there."""

    draft: torch.Tensor  # [V] p(. | u)
    order: NodeOrder | None  # None when no alive count needs lex or seq
    below_draft: torch.Tensor | None  # [V] G_<(x)
    alive_law: dict[int, float]  # pi
    components: dict[int, Components]  # per alive count n >= 2 that mixes lex and seq in
    mixtures: dict[int, tuple[float, float, float]]  # lambda[n], every n >= 2 in supp(pi)
    selected: torch.Tensor  # [V] D_u: the law of the selected block's next token


def node_law(target: torch.Tensor, draft: torch.Tensor, alive_law: dict[int, float], omega: float) -> NodeLaw:
    """D_u(x) = sum_n pi(n) sum_r lambda[n]_r s_r[n](x).

    One alive draft has law p (all r agree), and so has "first" for any n. Deviation from
    paper: an alive count n >= 2 whose posterior pi(n) is below MIN_ALIVE_MASS gets lambda =
    first instead of the LP: choosing there moves E[tau] by less than that mass, and it
    saves the O(V log V) node work (drafts that split at the root leave pi(n >= 2) ~ 1e-9
    at every later node).
    """
    busy = [n for n, weight in alive_law.items() if n >= 2 and weight >= MIN_ALIVE_MASS]
    order = strict_order(target, draft) if busy else None
    below_draft = order.below(draft) if busy else None
    idle = sum(w for n, w in alive_law.items() if n not in busy)
    selected = idle * draft if idle or not busy else None  # None: no pass for a zero term
    comps, mixtures = {}, {n: ONLY_FIRST for n in alive_law if n >= 2}
    cap = omega * target if busy else None
    for n in busy:
        comps[n] = components(target, draft, order, below_draft, n)
        marginals = comps[n].marginals
        if marginals.shape[-1] > MAX_LP_TOKENS:  # min(s, cap) and its sums serve the LP and the "first" check
            capped = torch.minimum(marginals, cap)
            capped_sums = capped.sum(-1)
            weights = mixture_weights(marginals, cap, capped, capped_sums)
        else:
            capped_sums, weights = None, mixture_weights(marginals, cap)
        mixtures[n], mixed = _prefer_first(marginals, cap, weights, capped_sums)
        selected = alive_law[n] * mixed if selected is None else selected + alive_law[n] * mixed
    return NodeLaw(draft, order, below_draft, alive_law, comps, mixtures, selected)


def _prefer_first(
    marginals: torch.Tensor, cap: torch.Tensor, weights: tuple[float, float, float], capped_sums: torch.Tensor | None = None
) -> tuple[tuple[float, float, float], torch.Tensor]:
    """"first" where it does as well as the solver's lambda, to the solver's precision.

    F(first) = sum_x min(p(x), cap(x)); when it is within FIRST_TOLERANCE of F(lambda), the two
    are tied as far as the LP can tell, and "first" keeps D = p at this node. Without this,
    a draft probability far below the solver's tolerance (1e-240, found by hypothesis) let
    HiGHS return "lex" for target == draft, whose law is not p, and a block that should be
    accepted whole was not. Exactness holds for any lambda; this is about acceptance only.

    Returns the weights and their mixture lambda . s [V], which the caller adds into D_u.
    `capped_sums` (sum_x min(s_r(x), cap(x)) per r), when given, spares the passes for F of a
    single component and of "first"."""
    mixed = _mix(weights, marginals)
    if weights == ONLY_FIRST:
        return weights, mixed
    single = capped_sums is not None and max(weights) == 1.0
    value = capped_sums[weights.index(1.0)] if single else torch.minimum(mixed, cap).sum()
    first = capped_sums[FIRST] if capped_sums is not None else torch.minimum(marginals[FIRST], cap).sum()
    return (ONLY_FIRST, _mix(ONLY_FIRST, marginals)) if bool(first >= value - FIRST_TOLERANCE) else (weights, mixed)


def _mix(weights: tuple[float, float, float], marginals: torch.Tensor) -> torch.Tensor:
    if max(weights) == 1.0:  # one component (the usual case): its row, which is what the product gives
        return marginals[weights.index(1.0)]
    return torch.tensor(weights, dtype=torch.float64, device=marginals.device) @ marginals


# Below this, a difference of the node objective is the LP solver's noise, not a preference.
FIRST_TOLERANCE = 1e-12


def select(law: NodeLaw, tokens: list[int], rng: Randomness) -> int:
    """Phase 1 line 6: draw a component from lambda[n], apply it to the candidates t_1..t_n."""
    return select_with_detail(law, tokens, rng)[0]


def select_with_detail(law: NodeLaw, tokens: list[int], rng: Randomness) -> tuple[int, int, int | None]:
    """`select`, also saying how: (y, the component used, for seq the 0-based place of the
    accepted candidate, None when seq rejected every candidate or another component ran)."""
    if len(tokens) == 1:
        return tokens[0], FIRST, None  # every component picks the only candidate; no coin is spent
    mixture = law.mixtures.get(len(tokens), ONLY_FIRST)  # absent: the count's posterior underflowed to 0
    used = [r for r, w in enumerate(mixture) if w > 0]
    component = used[0] if len(used) == 1 else rng.sample(torch.tensor(mixture, dtype=torch.float64))
    if component == FIRST:
        return tokens[0], FIRST, None
    if component == SEQ:
        outcomes, _ = rng.coins(law.components[len(tokens)].accept[tokens])
        if True in outcomes:
            place = outcomes.index(True)
            return tokens[place], SEQ, place
    return law.order.top(tokens), component, None  # lex, and seq when every candidate was rejected


def selection_probs(law: NodeLaw, tokens: list[int]) -> dict[int, float]:
    """P(select y | the candidates t_1..t_n), for the theory line."""
    lex, seq, first = law.mixtures.get(len(tokens), ONLY_FIRST) if len(tokens) > 1 else ONLY_FIRST
    if first == 1.0:
        return {tokens[0]: 1.0}
    top = law.order.top(tokens)
    probs: dict[int, float] = defaultdict(float)
    probs[top] += lex
    probs[tokens[0]] += first
    reach = seq
    for token, a in zip(tokens, law.components[len(tokens)].accept[tokens].tolist()):
        probs[token] += reach * a
        reach *= 1.0 - a
    probs[top] += reach
    return dict(probs)


def child_alive_law(law: NodeLaw, y: int) -> dict[int, float]:
    """Phase 1 line 7, Bayes: pi'(c) proportional to sum_n pi(n) sum_r lambda[n]_r T_r[n](y, c)."""
    draft_y = float(law.draft[y])
    below_y = float(law.below_draft[y]) if law.below_draft is not None else 0.0
    mass: dict[int, float] = defaultdict(float)
    for n, weight in law.alive_law.items():
        if n not in law.components:  # "first": the selected draft plus Bin(n-1, p(y)) others
            for c in range(1, n + 1):
                mass[c] += weight * draft_y * _binomial(n - 1, draft_y, c - 1)
            continue
        joint = joint_at(law.components[n], draft_y, below_y, y)
        for c in range(1, n + 1):
            mass[c] += weight * sum(w * joint[r][c] for r, w in enumerate(law.mixtures[n]))
    total = sum(mass.values())
    if total <= 0:  # y's selection probability underflowed (a drafted token of probability ~1e-320)
        return {1: 1.0}
    return {c: m / total for c, m in mass.items() if m > 0}


def next_omega(omega: float, target_y: float, selected_y: float) -> float:
    """Phase 1 line 8: omega <- min(omega q(y|u) / D_u(y), 1)."""
    return min(omega * target_y / selected_y, 1.0) if selected_y > 0 else 1.0


# ---------------------------------------------------------------------------- phase 2


def phase_two_probs(inp: VerifyInput, draft: int, selected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(omega, h) of GBV on the selected block X^(draft) with D (selected, [L, V]) for p."""
    tokens = inp.draft_tokens[draft]
    q = inp.target_probs[draft, :-1].gather(-1, tokens[:, None]).squeeze(-1)
    # D(y) > 0 for a selected token unless its probability underflowed; the floor keeps the
    # log ratios finite (inf - inf would be NaN in block_weights). It is the smallest subnormal,
    # not the smallest normal: a drafted token of probability 5e-324 must keep q/D = 1 when
    # target == draft (found by hypothesis).
    d = selected.gather(-1, tokens[:, None]).squeeze(-1).clamp(min=math.ulp(0.0))
    omega = block_weights((q[0] / d[0]).clamp(max=1.0), log_ratios(q[1:], d[1:]))
    return omega, block_accept_probs(omega, inp.target_probs[draft, 1:-1], selected[1:])


@dataclass(frozen=True)
class NodeChoice:
    """What phase 1 did at one node of the selected path (kept for AS-BV+H's hand-off)."""

    law: NodeLaw
    alive: list[int]  # the drafts alive there, in draft order
    tokens: list[int]  # their next tokens, the candidates
    selected: int  # y
    component: int  # the component that chose y
    accepted_place: int | None  # seq: the place of the accepted candidate; None otherwise


@dataclass(frozen=True)
class Selection:
    """Phase 1's outcome: the selected draft, its law D row by row, and every node's choice."""

    chosen: int
    laws: torch.Tensor  # [L, V] D_u along the selected path
    nodes: list[NodeChoice]


@dataclass(frozen=True)
class Verdict:
    """Phase 2's outcome on the selected block."""

    omega: torch.Tensor  # [L]
    tests: list[SubBlockTest]
    tau: int


def select_block(inp: VerifyInput, rng: Randomness) -> Selection:
    """Phase 1 (lines 1-8): walk down the drafts' trie, one selected token per level."""
    alive, alive_law, omega, rows, nodes = list(range(inp.num_drafts)), {inp.num_drafts: 1.0}, 1.0, [], []
    for depth in range(inp.draft_length):
        node = alive[0]  # canonical row of u
        target = inp.target_probs[node, depth]
        law = node_law(target, inp.draft_probs[node, depth], alive_law, omega)
        tokens = inp.draft_tokens[alive, depth].tolist()
        y, component, accepted_place = select_with_detail(law, tokens, rng)
        nodes.append(NodeChoice(law, alive, tokens, y, component, accepted_place))
        rows.append(law.selected)
        alive_law = child_alive_law(law, y)
        omega = next_omega(omega, float(target[y]), float(law.selected[y]))
        alive = [k for k, t in zip(alive, tokens) if t == y]
    return Selection(alive[0], torch.stack(rows), nodes)


def verify_block(inp: VerifyInput, rng: Randomness, selection: Selection) -> Verdict:
    """Phase 2 (lines 9-11): GBV's coins on the selected block with D for p."""
    L, chosen, selected = inp.draft_length, selection.chosen, selection.laws
    omega = phase_two_probs(inp, chosen, selected)[0]
    outcomes, uniforms, h = scan_coins(rng, omega, inp.target_probs[chosen, 1:L], selected[1:])
    tests = [SubBlockTest(chosen, 0, t + 1, h[t], outcomes[t], uniforms[t]) for t in range(L)]
    return Verdict(omega, tests, last_success(outcomes))


def verify(inp: VerifyInput, rng: Randomness) -> VerifyResult:
    L = inp.draft_length
    small = _on_support(inp)
    work = inp if small is None else small.inp  # both phases run here; ids differ only by renumbering
    selection = select_block(work, rng)
    verdict = verify_block(work, rng, selection)
    chosen, tau = selection.chosen, verdict.tau
    if tau == L:
        final, kind = inp.target_probs[chosen, L], "bonus"
    else:  # on the full vocabulary, so that the final token can be any token
        weight = verdict.omega[tau - 1] if tau > 0 else 1.0
        law_at_stop = selection.laws[tau] if small is None else small.expand(selection.laws[tau])
        final, kind = residual(inp.target_probs[chosen, tau], law_at_stop, weight), "correction"
    return VerifyResult(inp.draft_tokens[chosen, :tau].tolist(), rng.sample(final), kind, final, tau,
                        chosen if tau > 0 else None, verdict.tests)


def expected_accepted(inp: VerifyInput) -> float:
    """E[tau | drafts] = sum over the <= K selectable paths of P(path selected) x GBV's
    sum_i [1 - prod_{j>=i} (1 - h_j)] on that path with D (4.9, theory line)."""
    L = inp.draft_length
    small = _on_support(inp)
    inp = inp if small is None else small.inp  # E[tau] is a sum over the draft's tokens: the same number

    def expected(depth: int, alive: list[int], alive_law: dict[int, float], omega: float, rows: list) -> float:
        if depth == L:
            return expected_from_h(phase_two_probs(inp, alive[0], torch.stack(rows))[1]).item()
        target = inp.target_probs[alive[0], depth]
        law = node_law(target, inp.draft_probs[alive[0], depth], alive_law, omega)
        tokens = inp.draft_tokens[alive, depth].tolist()
        total = 0.0
        for y, prob in selection_probs(law, tokens).items():
            if prob > 0:
                child = [k for k, t in zip(alive, tokens) if t == y]
                total += prob * expected(depth + 1, child, child_alive_law(law, y),
                                         next_omega(omega, float(target[y]), float(law.selected[y])), rows + [law.selected])
        return total

    return expected(0, list(range(inp.num_drafts)), {inp.num_drafts: 1.0}, 1.0, [])
