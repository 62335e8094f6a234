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

from ..probs import residual, residual_mass, token_probs
from ..randomness import Randomness, torch_uniforms
from .base import FinalKind, SubBlockTest, VerifyInput, VerifyResult, decision, emit, law_at
from .gbv import all_fail_from, block_accept_probs, block_weights, log_ratios, scan_block, stop_law, sub_block_probs
from .spectr import kseq_beta, kseq_residual, kseq_residual_n, optimal_rho, rho_on_device


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


def uniform_budget(num_drafts: int, draft_length: int) -> int:
    """Every draft is scanned at most once, with at most L coins, then Y: K L + 1 uniforms."""
    return num_drafts * draft_length + 1


# ------------------------------------------------------------------ the same rule on tensors


def decide(inp: VerifyInput, generator: torch.Generator) -> torch.Tensor:
    """`verify` on tensors, from the same K L + 1 uniforms (`uniform_budget`; `verify` takes
    them in order from `BudgetRandomness`, this indexes into them).

    Each draft is scanned at most once (a failed draft is spent; a commit spends every draft
    up to the winner), so K attempts, each the scan of the first draft still unused at the
    current node, replay the while loop of `verify` with masks: an attempt after the iteration
    has ended changes nothing. Per attempt only that draft's rows are read: its omega over the
    positions depth .. L-1 (zeros before depth leave `block_weights`' closed form unchanged),
    every h_t (no shortcut: skipping one would take a read), its coins at the uniforms
    offset .. offset + m - 1, and t*. rho* comes from `optimal_rho_on_device` (`rho_on_device`),
    and only where two or more drafts can still pass through the node (else rho* = 1, the root at K = 1 too)."""
    K, L, device = inp.num_drafts, inp.draft_length, inp.draft_tokens.device
    q, p, X = inp.target_probs, inp.draft_probs, inp.draft_tokens
    uniforms = torch_uniforms(generator, uniform_budget(K, L), device)
    positions = torch.arange(L, device=device)
    drafts = torch.arange(K, device=device)
    qx = token_probs(q[:, :L], X)  # q(X_i | X_{1:i-1}) of every draft, [K, L]
    px = token_probs(p, X)
    later_log = log_ratios(qx, px)  # [K, L]; the entry at a scan's first position is unused
    zero = torch.zeros((), dtype=torch.long, device=device)
    # The state of `verify`'s loop: node (depth, f, rho, beta, n), the drafts not yet spent at it.
    depth, offset, winner = zero, zero, zero
    node_target = q[0, 0]
    remaining = torch.ones(K, dtype=torch.bool, device=device)
    n = torch.full((), K, dtype=torch.long, device=device)
    rho = rho_on_device(node_target, p[0, 0], n, K)  # K = 1: rho* = 1, no search
    beta = kseq_beta(node_target, p[0, 0], rho)
    done = torch.zeros((), dtype=torch.bool, device=device)
    final = node_target
    for attempt in range(K):
        j = torch.where(remaining, drafts, K).min().clamp(max=K - 1)  # the first unused draft
        active = ~done & remaining.any()
        qj, pj, xj = law_at(j, q), law_at(j, p), law_at(j, X)  # [L+1, V], [L, V], [L]
        m, at = L - depth, depth.clamp(max=L - 1)  # `at`: a safe index once the iteration has ended
        # omega of X^(j)_{depth+1..L}: first weight min(f(y_1) / (rho p(y_1 | u)), 1), then GBV's ratios.
        first = (law_at(at, node_target[xj]) / (rho * law_at(at, law_at(j, px)))).clamp(max=1.0)
        log_steps = torch.where(positions > depth, law_at(j, later_log), 0.0)
        log_steps = torch.where(positions == depth, first.log(), log_steps)
        cumulative = log_steps.cumsum(0)
        omega = torch.exp(cumulative - torch.cummax(cumulative, 0).values.clamp(min=0.0))  # [L], valid from depth
        mass = residual_mass(qj[1:L], pj[1:], omega[:-1])  # S_t at the node after position t
        h = torch.cat([sub_block_probs(omega[:-1], mass), omega[-1:]])
        eta = uniforms[(offset + positions - depth).clamp(0, uniforms.numel() - 1)]
        succeeded = (positions >= depth) & (eta < omega) & (eta < h)
        tau = ((positions - depth + 1) * succeeded).max()  # t*, 0 if no coin succeeded
        failed, bonus = tau == 0, tau == m
        committed = ~failed & ~bonus
        new_depth = depth + tau
        # GBV's residual at the new node becomes f there (a commit; unused when new_depth = L).
        stop = new_depth.clamp(max=L - 1)
        new_target = residual(law_at(stop, qj), law_at(stop, pj), law_at((new_depth - 1).clamp(min=0), omega))
        # The drafts after j that agree with it on the first new_depth tokens.
        agree = ((X == xj) | (positions >= new_depth)).all(-1)
        members = agree & (drafts > j) & remaining
        new_n = members.sum()
        # At most the K - 1 - attempt drafts after j can pass the new node: below two, rho* = 1.
        new_rho = rho_on_device(new_target, law_at(stop, pj), new_n, K - 1 - attempt)
        # Where every draft of the node failed: Y from the K-SEQ residual of f (f itself if beta = 0).
        spent = remaining & (drafts != j)
        node_draft = law_at(at, pj)
        all_failed = failed & ~spent.any()
        kseq_final = torch.where(beta > 0, kseq_residual_n(node_target, node_draft, rho, n), node_target)
        # The state after this attempt, where it was active.
        commit_now, bonus_now = active & committed, active & bonus
        fail_now, all_failed_now = active & failed, active & all_failed
        final = torch.where(bonus_now, qj[L], final)
        final = torch.where(commit_now & (new_n == 0), new_target, final)
        final = torch.where(all_failed_now, kseq_final, final)
        winner = torch.where(commit_now | bonus_now, j, winner)
        offset = torch.where(active, offset + m, offset)
        remaining = torch.where(fail_now, spent, torch.where(commit_now, members, remaining))
        remaining = torch.where(bonus_now, torch.zeros_like(remaining), remaining)
        n = torch.where(commit_now, new_n, n)
        rho = torch.where(commit_now, new_rho, rho)
        beta = torch.where(commit_now, kseq_beta(new_target, law_at(stop, pj), new_rho), beta)
        node_target = torch.where(commit_now, new_target, node_target)
        depth = torch.where(commit_now | bonus_now, new_depth, depth)
        done = done | bonus_now | all_failed_now | (commit_now & (new_n == 0))
    return decision(inp, winner, depth, final, law_at(offset, uniforms))


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

