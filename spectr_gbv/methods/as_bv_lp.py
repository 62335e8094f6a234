"""AS-BV's mixture weights lambda (docs/algorithms.md §6.4, phase 1): the LP solver.

At node u, lambda[n] = argmax over the 2-simplex of F(lambda) = sum_x min(lambda . s(x), cap(x)),
s = the three components' marginals s_r[n] (lex, seq, first, in this order), cap = omega q(. | u).
Deviation from paper: the reference formulation takes lambda as the argmax "on a fixed
grid". The golden values of docs/algorithms.md §6.7 are reproduced, to 1e-6, only by the
exact LP solved by HiGHS with lambda as the first variables (a 231-point grid misses four of
the six, by up to 0.02, through tie-breaking in flat regions), so that LP is solved here on
tables of at most MAX_LP_TOKENS tokens. Above that, a reduced LP whose
maximum is found among the vertices of its arrangement, at a cost independent of V beyond a few
passes. Any deterministic lambda keeps AS-BV exact (lambda depends only on the selected path).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

# The lambda LP keeps at most this many tokens as variables (all of them below it, which
# is exactly the LP behind the golden values); see `mixture_weights`.
MAX_LP_TOKENS = 64

# Mixture weights below this are rounding residue of the LP solution and are set to 0.
NEGLIGIBLE_WEIGHT = 1e-12


@dataclass(frozen=True)
class NodeMixture:
    """What the LP's one host read brings back for a node: lambda and the values around it."""

    weights: tuple[float, float, float]  # lambda (lex, seq, first)
    # sum_x min(s_r(x), cap(x)) per r, computed on the way on a large table (None on a small one).
    capped_sums: list[float] | None
    # A lower bound on F(weights) (the reduced objective, `_vertex_maximum`) on a large table.
    lower_bound: float | None
    extra: list[float]  # the caller's `extra`, as host floats


def node_mixture(marginals: torch.Tensor, cap: torch.Tensor, extra: torch.Tensor | None = None) -> NodeMixture:
    """lambda at one node, with sums that spare the caller passes and reads (`NodeMixture`),
    and `extra` (float64 [X], the caller's) as host floats. All from the one host read that
    brings the LP its inputs."""
    if marginals.shape[-1] <= MAX_LP_TOKENS:
        return _weights_and_values(marginals, cap, extra=extra)
    capped = torch.minimum(marginals, cap)
    return _weights_and_values(marginals, cap, capped, capped.sum(-1), extra)


def mixture_weights(marginals: torch.Tensor, cap: torch.Tensor, capped: torch.Tensor | None = None,
                    capped_sums: torch.Tensor | None = None) -> tuple[float, float, float]:
    """lambda = argmax over the 2-simplex of F(lambda) = sum_x min(lambda . s(x), cap(x)),
    cap = omega q(. | u); F is concave and piecewise linear.

    Up to MAX_LP_TOKENS tokens: the LP max sum_x t_x with t_x <= lambda . s(x), t_x <= cap(x),
    solved by HiGHS's dual simplex with lambda as the first variables. That is the
    formulation behind the golden values of docs/algorithms.md §6.7; where the maximum is not
    unique, the solver's vertex is the tie-break, and the golden values depend on it.

    Above that (real vocabularies): a token with s_r(x) <= cap(x) for every r adds
    lambda . s(x), one with s_r(x) >= cap(x) for every r adds cap(x), exactly. Of the others
    (whose kink crosses the simplex) the MAX_LP_TOKENS with the widest range stay exact and
    the rest add their chord sum_r lambda_r min(s_r(x), cap(x)); the maximum of that reduced F
    is found among the vertices of its arrangement (`_vertex_maximum`). Deviation from
    paper: a deterministic stand-in for the full argmax, which is all exactness needs, at
    a cost independent of V beyond a few passes. `capped` = min(s, cap) [3, V] and its row
    sums may be passed in by a caller that needs them too (`node_law`).
    """
    return _weights_and_values(marginals, cap, capped, capped_sums).weights


def _weights_and_values(
    marginals: torch.Tensor, cap: torch.Tensor, capped: torch.Tensor | None = None,
    capped_sums: torch.Tensor | None = None, extra: torch.Tensor | None = None,
) -> NodeMixture:
    """`mixture_weights`, plus the row sums of `capped` and a lower bound on F at lambda (large
    tables; None on small ones) and `extra` as host floats: everything the LP and its caller
    need crosses in one host read (`_to_host`), as the same float64 values a copy per tensor
    would give."""
    extras = [] if extra is None else [extra]
    if marginals.shape[-1] <= MAX_LP_TOKENS:
        s, b, *rest = _to_host([marginals, cap, *extras])
        return NodeMixture(_solve_mixture(s.tobytes(), b.tobytes()), None, None, rest[0].tolist() if rest else [])
    capped = torch.minimum(marginals, cap) if capped is None else capped  # [3, V]
    capped_sums = capped.sum(-1) if capped_sums is None else capped_sums
    # Row-wise max and min, not .all(0) over [3, V], which costs ten elementwise passes.
    highest = torch.maximum(torch.maximum(marginals[0], marginals[1]), marginals[2])
    lowest = torch.minimum(torch.minimum(marginals[0], marginals[1]), marginals[2])
    crossing = (lowest < cap) & (cap < highest)  # neither all below nor all above the cap
    # Where a kink crosses, min(highest, cap) = cap and min(lowest, cap) = lowest.
    spread = torch.where(crossing, cap - lowest, -1.0)
    # The widest crossing kinks come first (sorted), then tokens that do not cross (spread -1), if
    # fewer than MAX_LP_TOKENS cross: those are cut on the host, where their count is known. A
    # boolean index here would cost a device sync of its own (its result's size is data).
    kept = torch.topk(spread, MAX_LP_TOKENS, sorted=True).indices
    s, b, capped_kept, crosses, sums, *rest = _to_host([
        marginals.index_select(1, kept), cap.index_select(0, kept), capped.index_select(1, kept),
        crossing.index_select(0, kept), capped_sums, *extras])
    m = int(crosses.sum())
    # Every token but the kept adds sum_r lambda_r min(s_r(x), cap(x)): the chord, and exactly
    # lambda . s below and cap above (sum_r lambda_r = 1). So one sum serves all of them.
    linear = sums - capped_kept[:, :m].sum(-1)
    s, b = np.ascontiguousarray(s[:, :m]), b[:m]
    weights, lower_bound = _vertex_maximum(s.tobytes(), b.tobytes(), linear.tobytes())
    return NodeMixture(weights, sums.tolist(), lower_bound, rest[0].tolist() if rest else [])


def _to_host(tensors: list[torch.Tensor]) -> list[np.ndarray]:
    """The tensors as contiguous float64 numpy arrays of their shapes, in one host read."""
    flat = torch.cat([t.detach().reshape(-1).to(torch.float64) for t in tensors]).numpy(force=True)  # copies off a GPU
    out, start = [], 0
    for t in tensors:
        out.append(flat[start : start + t.numel()].reshape(t.shape))
        start += t.numel()
    return out


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
def _vertex_maximum(marginals: bytes, cap: bytes, linear: bytes) -> tuple[tuple[float, float, float], float]:
    """argmax of linear . lambda + sum_x min(lambda . s(x), cap(x)) over the simplex, among the
    vertices of the arrangement: every point where two of the planes {lambda . s(x) = cap(x)}
    and {lambda_r = 0} meet on the simplex (a concave piecewise-linear function attains its
    maximum at one). The first maximal candidate wins; the simplex vertices come first.

    Returns lambda and this reduced objective at lambda (as cleaned). It bounds the full F at
    lambda from below: a token outside the kept adds its chord sum_r lambda_r min(s_r(x), cap(x))
    here, and min(., cap(x)) is concave."""
    b = np.frombuffer(cap, dtype=np.float64)
    s = np.frombuffer(marginals, dtype=np.float64).reshape(3, -1)
    normals = np.concatenate([np.eye(3), s.T])  # [m+3, 3]: the edges first
    levels = np.concatenate([np.zeros(3), b])
    points = _pair_solutions(normals, levels)
    points = points.clip(min=0.0)
    points /= points.sum(-1, keepdims=True)
    linear = np.frombuffer(linear, dtype=np.float64)
    values = points @ linear + np.minimum(points @ s, b).sum(-1)
    weights = _clean(points[int(np.argmax(values))])
    chosen = np.asarray(weights)
    return weights, float(chosen @ linear + np.minimum(chosen @ s, b).sum())


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

