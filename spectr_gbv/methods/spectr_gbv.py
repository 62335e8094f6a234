"""SpecTr-GBV, exact: recursive block K-SEQ (docs/algorithms.md §4, "SpecTr-GBV*").

The project's `spectr_gbv`. The rule the authors released (docs/algorithms.md §5) does not preserve
the target distribution; it lives in `spectr_gbv_released.py`. This one is proven exact
(docs/algorithms.md §4.4), equals GBV at K = 1 and SpecTr's K-SEQ at L = 1.

    paper (docs/algorithms.md §4.2)           here
    u, d = |u|                                accepted prefix, depth
    f                                         node_target: first-token target at u
    S (unused drafts consistent with u)       unused
    rho, beta                                 rho, via spectr.optimal_rho / kseq_beta
    omega_1 = min(f(y_1) / (rho p(y_1|u)), 1) first weight (the rho-scaled SpecTr ratio)
    omega_t, S_t, h_t                         gbv.block_weights / gbv.block_accept_probs
    t*, the stop's residual                   gbv.scan_block / gbv.stop_law

At node u, the unused drafts through u are tried in order. Each attempt is a GBV scan of
the draft's remaining m = L - d tokens whose first weight is SpecTr's rho-scaled ratio
against f. A full-length success ends the iteration with a bonus token. An intermediate
stop at t* commits y_{1:t*}, and the GBV residual at the new node becomes f there for the
drafts not yet used (our stand-in for the paper's "modify the target distribution for the
non-accepted positions"). If every unused draft fails at u, the K-SEQ residual supplies Y.
A failed draft is never reused deeper: its failure depended on its later tokens.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..probs import token_probs
from ..randomness import Randomness
from .base import FinalKind, SubBlockTest, VerifyInput, VerifyResult, emit
from .gbv import all_fail_from, block_accept_probs, block_weights, log_ratios, scan_block, stop_law
from .spectr import kseq_beta, kseq_residual, optimal_rho


@dataclass(frozen=True)
class NodeWeights:
    """What is decided at node u before any coin, for the n unused drafts through u."""

    rho: torch.Tensor  # scalar
    beta: torch.Tensor  # scalar
    omega: torch.Tensor  # [n, m] residual weights of each unused draft's remaining m tokens


def node_weights(inp: VerifyInput, depth: int, node_target: torch.Tensor, unused: list[int]) -> NodeWeights:
    """rho*, beta and every unused draft's omega at depth d, batched; O(n m) beyond rho*."""
    node_draft = inp.draft_probs[unused[0], depth]  # canonical p(. | u): identical for all unused
    rho = optimal_rho(node_target, node_draft, len(unused))
    tokens = select_drafts(inp.draft_tokens, unused)[:, depth:]  # [n, m]
    target_rows = select_drafts(inp.target_probs, unused)[:, depth:]  # [n, m+1, V] nodes u .. u y_{1:m}
    draft_rows = select_drafts(inp.draft_probs, unused)[:, depth:]  # [n, m, V]
    first = torch.clamp(token_probs(node_target, tokens[:, 0]) / (rho * token_probs(node_draft, tokens[:, 0])), max=1.0)
    later = log_ratios(token_probs(target_rows[:, 1:-1], tokens[:, 1:]), token_probs(draft_rows[:, 1:], tokens[:, 1:]))
    return NodeWeights(rho, kseq_beta(node_target, node_draft, rho), block_weights(first, later))


def node_accept_probs(inp: VerifyInput, depth: int, unused: list[int], omega: torch.Tensor) -> torch.Tensor:
    """Every h_t of every unused draft at depth d, [n, m] (the theory line needs them all)."""
    rows = slice(depth + 1, inp.draft_length)  # nodes after t = 1..m-1 tokens
    return block_accept_probs(omega, select_drafts(inp.target_probs, unused)[:, rows], select_drafts(inp.draft_probs, unused)[:, rows])


def select_drafts(tensor: torch.Tensor, drafts: list[int]) -> torch.Tensor:
    """tensor[drafts] as a view when the drafts are a contiguous run (the usual case at the
    root, where all K are unused), avoiding a copy of [n, L, V] rows."""
    if drafts == list(range(drafts[0], drafts[0] + len(drafts))):
        return tensor[drafts[0] : drafts[0] + len(drafts)]
    return tensor[drafts]


def stop_at(inp: VerifyInput, depth: int, draft: int, stop: int, omega: torch.Tensor) -> tuple[torch.Tensor, FinalKind]:
    """Draft j's scan from depth d stopped at t*: the bonus law at t* = m, else GBV's residual,
    which becomes f at the new node u + y_{1:t*}."""
    return stop_law(omega, stop, inp.target_probs[draft, depth:], inp.draft_probs[draft, depth:])


def consistent_unused(inp: VerifyInput, later: list[int], draft: int, depth: int) -> list[int]:
    """The not-yet-used drafts whose first `depth` tokens equal draft j's."""
    prefix = inp.draft_tokens[draft, :depth]
    return [i for i in later if bool((inp.draft_tokens[i, :depth] == prefix).all())]


def verify(inp: VerifyInput, rng: Randomness) -> VerifyResult:
    L = inp.draft_length
    depth, winner = 0, None
    node_target = inp.target_probs[0, 0]
    unused = list(range(inp.num_drafts))
    tests: list[SubBlockTest] = []
    while unused:
        weights = node_weights(inp, depth, node_target, unused)
        committed = False
        for position, j in enumerate(unused):
            rows = slice(depth + 1, L)  # the nodes after 1 .. m-1 of draft j's remaining tokens
            scan = scan_block(rng, weights.omega[position], inp.target_probs[j, rows], inp.draft_probs[j, rows], j, depth)
            tests += scan.tests
            if scan.tau == 0:
                continue  # this draft is spent; it is NOT reused deeper
            final, kind = stop_at(inp, depth, j, scan.tau, scan.omega)
            if kind == "bonus":  # the whole remaining block
                return emit(inp, rng, j, L, final, kind, tests)
            depth, node_target = depth + scan.tau, final
            unused, winner, committed = consistent_unused(inp, unused[position + 1 :], j, depth), j, True
            break
        if not committed:  # all unused drafts failed at u: the K-SEQ residual
            node_draft = inp.draft_probs[unused[0], depth]
            final = kseq_residual(node_target, node_draft, weights.rho, len(unused)) if weights.beta > 0 else node_target
            return emit(inp, rng, winner, depth, final, "correction", tests)
    return emit(inp, rng, winner, depth, node_target, "correction", tests)  # no draft left at u: Y ~ f


def expected_accepted(inp: VerifyInput) -> float:
    """E[tau | drafts]: recurse over attempts and stopping points (docs/algorithms.md §9.2).

    P(t* = t | draft) = h_t prod_{s>t} (1 - h_s); P(t* = 0) = prod_s (1 - h_s). Branches of
    probability 0 are pruned, which keeps the recursion small in practice.
    """
    L = inp.draft_length

    def expected(depth: int, node_target: torch.Tensor, unused: list[int]) -> float:
        if not unused:
            return 0.0
        weights = node_weights(inp, depth, node_target, unused)
        h = node_accept_probs(inp, depth, unused, weights.omega)
        after = all_fail_from(h)  # prod_{s>=t}(1-h_s)
        stop_probs = h * torch.cat([after[:, 1:], torch.ones_like(after[:, :1])], dim=-1)  # [n, m]
        stop_rows, fail_probs = stop_probs.tolist(), after[:, 0].tolist()
        reach, total = 1.0, 0.0
        for position, j in enumerate(unused):
            for t, prob in enumerate(stop_rows[position], start=1):
                if reach * prob <= 0:
                    continue
                gain = float(t)
                if t < L - depth:
                    new_target = stop_at(inp, depth, j, t, weights.omega[position])[0]
                    later = consistent_unused(inp, unused[position + 1 :], j, depth + t)
                    gain += expected(depth + t, new_target, later)
                total += reach * prob * gain
            reach *= fail_probs[position]
        return total

    return expected(0, inp.target_probs[0, 0], list(range(inp.num_drafts)))

