"""SpecTr: K-SEQ token-level multi-draft selection with tree pruning.

Sun, Suresh, Ro, Beirami, Jain, Yu; NeurIPS 2023, arXiv 2310.15141. docs/algorithms.md §3.1-§3.4.

    paper (docs/algorithms.md §3.2)    here
    f = q(. | u), g = p(. | u)         target, draft
    rho*, beta(rho)                    optimal_rho(...), kseq_beta(...)
    n candidates                       num_candidates

`optimal_rho`, `kseq_beta` and `kseq_residual` are shared with SpecTr-GBV's node rule.
"""

from __future__ import annotations

import torch

from ..probs import normalize, token_probs
from ..randomness import Randomness, torch_uniforms
from .base import VerifyInput, VerifyResult, decision, law_at
from .tree import NodePlan, tree_expected_accepted, tree_verify

# Scalar bisection steps inside the final bracket (host floats): the bracket shrinks by
# 2**-100, far below float64 resolution, so the result is the feasible end to machine precision.
RHO_BISECTION_STEPS = 100


def kseq_beta(target: torch.Tensor, draft: torch.Tensor, rho: torch.Tensor) -> torch.Tensor:
    """beta(rho) = sum_x min(g(x), f(x) / rho); rho may be batched: [...] -> [...]."""
    return torch.minimum(draft, target / rho.unsqueeze(-1)).sum(-1)


def optimal_rho(
    target: torch.Tensor, draft: torch.Tensor, num_candidates: int, descending: torch.Tensor | None = None
) -> torch.Tensor:
    """rho* = smallest rho in [1, n] with G(rho) = rho*beta(rho) - 1 + (1-beta(rho))^n >= 0.

    `descending` optionally gives the token ids by decreasing ratio f/g (g = 0: inf), so a
    caller that needs rho* for several n at one node sorts once. Any order of tied ratios
    gives the same beta at the breakpoints (a tied token adds g = f/rho there either way).

    G is nondecreasing and G(n) >= 0 (docs/algorithms.md §3.3); rho* = 1 whenever G(1) >= 0, in
    particular for n = 1 (plain SD). beta is piecewise of the form A + B/rho between the
    breakpoints r_x = f(x)/g(x): A = sum_{r >= rho} g, B = sum_{r < rho} f. So G is
    evaluated at every breakpoint at once from sorted cumulative sums, which brackets rho*
    between two neighbouring breakpoints, and a scalar bisection on that one smooth piece
    finishes it. Deviation from paper: SpecTr bisects on beta directly; this gives the
    same root with one sort instead of ~60 passes over the vocabulary.
    """
    n = num_candidates
    one = torch.ones((), dtype=torch.float64, device=target.device)
    if n == 1:
        return one
    ratio = torch.where(draft > 0, target / torch.where(draft > 0, draft, 1.0), float("inf"))
    order = torch.argsort(ratio, descending=True) if descending is None else descending
    r = ratio[order]
    above_g = draft[order].cumsum(0)  # A at rho = r_j
    below_f = target.sum() - target[order].cumsum(0)  # B at rho = r_j
    beta = above_g + below_f / r
    inside = (r > 1) & (r < n)
    feasible = inside & (r * beta - 1 + (1 - beta) ** n >= 0)
    hi = torch.where(feasible, r, float(n)).min().clamp(max=n)
    lo = torch.where(inside & (r < hi), r, 1.0).max().clamp(min=1.0)
    # A and B are constant on the open piece (lo, hi); read them at its midpoint.
    mid = (lo + hi) / 2
    piece_a = torch.where(ratio >= mid, draft, 0.0).sum()
    piece_b = torch.where(ratio < mid, target, 0.0).sum()
    beta_one = torch.minimum(draft, target).sum()
    lo, hi, a, b, beta_one = torch.stack([lo, hi, piece_a, piece_b, beta_one]).tolist()
    if beta_one - 1 + (1 - beta_one) ** n >= 0:
        return one

    def g_of(rho: float) -> float:
        beta_rho = a + b / rho
        return rho * beta_rho - 1 + (1 - beta_rho) ** n

    for _ in range(RHO_BISECTION_STEPS):
        mid = (lo + hi) / 2
        if mid <= lo or mid >= hi:
            break
        lo, hi = (lo, mid) if g_of(mid) >= 0 else (mid, hi)
    return torch.tensor(hi, dtype=torch.float64, device=target.device)


# The device-side search for rho*: each step evaluates G at RHO_GRID points of the bracket at
# once; RHO_GRID_STEPS steps shrink it by (RHO_GRID + 1)**RHO_GRID_STEPS = 64**10 ~ 1e18, below
# float64 resolution on [1, n].
RHO_GRID, RHO_GRID_STEPS = 63, 10


def optimal_rho_on_device(target: torch.Tensor, draft: torch.Tensor, num_candidates: torch.Tensor,
                          steps: int = RHO_GRID_STEPS) -> torch.Tensor:
    """`optimal_rho` with no host read, for the tensor rules (`MethodSpec.decide`); n may be a
    0-dim tensor (the drafts through a node, known only on the device).

    The same bracket between breakpoints, then a grid search instead of the scalar bisection:
    G is nondecreasing, so the feasible end of the bracket moves to the first grid point where
    G >= 0 and the infeasible end to the point before it. The root agrees with `optimal_rho`
    to a few units in the last place (the two searches round differently); n <= 1 gives 1.
    Fewer `steps` return the feasible end of a wider bracket: G(rho) >= 0 and
    rho - rho* <= (n - 1) / (RHO_GRID + 1)**steps."""
    if isinstance(num_candidates, torch.Tensor):
        n = num_candidates.to(torch.float64)
    else:  # filled on the device: a copy from the host would wait for the device on CUDA
        n = torch.full((), float(num_candidates), dtype=torch.float64, device=target.device)
    one = torch.ones((), dtype=torch.float64, device=target.device)
    ratio = torch.where(draft > 0, target / torch.where(draft > 0, draft, 1.0), float("inf"))
    order = torch.argsort(ratio, descending=True)
    r = ratio[order]
    beta = draft[order].cumsum(0) + (target.sum() - target[order].cumsum(0)) / r
    inside = (r > 1) & (r < n)
    hi = torch.where(inside & (r * beta - 1 + (1 - beta) ** n >= 0), r, n).min().clamp(max=n)
    lo = torch.where(inside & (r < hi), r, 1.0).max().clamp(min=1.0)
    mid = (lo + hi) / 2
    a, b = torch.where(ratio >= mid, draft, 0.0).sum(), torch.where(ratio < mid, target, 0.0).sum()
    beta_one = torch.minimum(draft, target).sum()
    fractions = torch.arange(1, RHO_GRID + 1, dtype=torch.float64, device=target.device) / (RHO_GRID + 1)
    for _ in range(steps):
        grid = lo + (hi - lo) * fractions
        beta_grid = a + b / grid
        feasible = grid * beta_grid - 1 + (1 - beta_grid) ** n >= 0
        new_hi = torch.where(feasible, grid, hi).min()
        lo = torch.where(~feasible & (grid < new_hi), grid, lo).max()
        hi = new_hi
    settled = (n <= 1) | (beta_one - 1 + (1 - beta_one) ** n >= 0)  # G(1) >= 0: rho* = 1
    return torch.where(settled, one, hi)


def kseq_residual(target: torch.Tensor, draft: torch.Tensor, rho: torch.Tensor, num_candidates: int) -> torch.Tensor:
    """r(x) = [f(x) - min(g(x), f(x)/rho) (1 - (1-beta)^n) / beta] / (1-beta)^n, normalised.

    With beta = 0 nothing can be accepted and r = f. Tiny negative entries (rounding of
    the bisection's feasible end) are clamped to 0 before normalising.
    """
    beta = kseq_beta(target, draft, rho)
    through_acceptance = torch.minimum(draft, target / rho) * (1.0 - (1.0 - beta) ** num_candidates)
    through_acceptance = through_acceptance / torch.where(beta > 0, beta, 1.0)
    return normalize(torch.relu(target - through_acceptance), fallback=target)


def kseq_residual_n(target: torch.Tensor, draft: torch.Tensor, rho: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
    """`kseq_residual` with n a 0-dim tensor (n >= 1 where it is used)."""
    return kseq_residual(target, draft, rho, n.clamp(min=1).to(torch.float64))


def rho_on_device(target: torch.Tensor, draft: torch.Tensor, n: torch.Tensor, most_drafts: int) -> torch.Tensor:
    """rho* for a tensor rule at a node that at most `most_drafts` drafts can pass: 1 without
    any search where that is one (rho* = 1 for n = 1), else `optimal_rho_on_device`."""
    if most_drafts <= 1:
        return torch.ones((), dtype=torch.float64, device=target.device)
    return optimal_rho_on_device(target, draft, n)


def kseq_node(target: torch.Tensor, draft: torch.Tensor, candidates: torch.Tensor) -> NodePlan:
    """K-SEQ: candidate k is accepted with min(1, f(x_k) / (rho* g(x_k)))."""
    rho = optimal_rho(target, draft, len(candidates))
    accept = torch.clamp(token_probs(target, candidates) / (rho * token_probs(draft, candidates)), max=1.0)
    return NodePlan(accept, kseq_residual(target, draft, rho, len(candidates)))


def verify(inp: VerifyInput, rng: Randomness) -> VerifyResult:
    return tree_verify(inp, rng, kseq_node)


def uniform_budget(num_drafts: int, draft_length: int) -> int:
    """At most K coins at each of the L nodes, then Y: K L + 1 uniforms."""
    return num_drafts * draft_length + 1


def decide(inp: VerifyInput, generator: torch.Generator) -> torch.Tensor:
    """`verify` on tensors, from the same K L + 1 uniforms (`uniform_budget`; `verify` takes them
    in order from `BudgetRandomness`, this indexes into them).

    The tree walk with masks over the L nodes: `alive` holds the drafts through the accepted
    prefix, in draft order, so the i-th alive draft's coin is the uniform at offset + i; the
    first success (in draft order) is accepted, none ends the walk with the K-SEQ residual.
    A node after the walk has ended changes nothing. rho* comes from `optimal_rho_on_device`
    (equal to `optimal_rho` to a few units in the last place), and is 1 with no search where
    at most one draft can pass the node (K = 1)."""
    K, L, device = inp.num_drafts, inp.draft_length, inp.draft_tokens.device
    # float64 throughout (VerifyInput's rows): the K-SEQ residual subtracts nearly equal masses.
    q, p, X = inp.target_probs, inp.draft_probs, inp.draft_tokens
    uniforms = torch_uniforms(generator, uniform_budget(K, L), device)
    drafts = torch.arange(K, device=device)
    zero = torch.zeros((), dtype=torch.long, device=device)
    alive = torch.ones(K, dtype=torch.bool, device=device)
    done = torch.zeros((), dtype=torch.bool, device=device)
    offset, tau, winner = zero, zero, zero
    final = q[0, L]
    for depth in range(L):
        row = torch.where(alive, drafts, K).min()  # alive[0]: the canonical row of the node
        target, draft = law_at(row, q[:, depth]), law_at(row, p[:, depth])
        n = alive.sum()
        rho = rho_on_device(target, draft, n, K)
        candidates = X[:, depth]
        accept = (target[candidates] / (rho * draft[candidates])).clamp(max=1.0)  # [K]; read where alive
        place = alive.long().cumsum(0) - 1  # the i-th alive draft's coin is the uniform at offset + i
        eta = uniforms[(offset + place).clamp(0, uniforms.numel() - 1)]
        succeeded = alive & (eta < accept)
        first = torch.where(succeeded, drafts, K).min().clamp(max=K - 1)
        accepted = succeeded.any()
        # Every candidate rejected: Y from the K-SEQ residual; the winner is the node's canonical draft.
        rejected_now = ~done & ~accepted
        final = torch.where(rejected_now, kseq_residual_n(target, draft, rho, n), final)
        winner = torch.where(rejected_now & (depth > 0), row, winner)
        offset = torch.where(done, offset, offset + n)
        alive = torch.where(done | rejected_now, alive, alive & (candidates == law_at(first, candidates)))
        tau = torch.where(done | rejected_now, tau, tau + 1)
        done = done | rejected_now
    last = torch.where(alive, drafts, K).min().clamp(max=K - 1)  # the bonus, where every node accepted
    final = torch.where(done, final, law_at(last, q[:, L]))
    winner = torch.where(done, winner, last)
    return decision(inp, winner, tau, final, law_at(offset, uniforms))


def expected_accepted(inp: VerifyInput) -> float:
    return tree_expected_accepted(inp, kseq_node)
