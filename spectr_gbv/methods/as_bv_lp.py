"""AS-BV's mixture weights lambda (docs/algorithms.md §6.4, phase 1): the LP solver.

At node u, lambda[n] = argmax over the 2-simplex of F(lambda) = sum_x min(lambda . s(x), cap(x)),
s = the three components' marginals s_r[n] (lex, seq, first, in this order), cap = omega q(. | u).
Deviation from paper: the reference formulation takes lambda as the argmax "on a fixed
grid". The golden values of docs/algorithms.md §6.7 are reproduced, to 1e-6, only by the
exact LP solved by HiGHS with lambda as the first variables (a 231-point grid misses four of
the six, by up to 0.02, through tie-breaking in flat regions), so that LP is solved here on
tables of at most MAX_LP_TOKENS tokens (`node_mixture`, on the host). Above that, a reduced LP
whose maximum is found among the vertices of its arrangement, in torch on the rule's device with
no host read, at a cost independent of V beyond a few passes (`vertex_mixture_on_device`). Any
deterministic lambda keeps AS-BV exact (lambda depends only on the selected path).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

# The lambda LP keeps at most this many tokens as variables: all of them up to this size (HiGHS,
# `node_mixture`: exactly the LP behind the golden values), the widest crossing kinks above it
# (`vertex_mixture_on_device`).
MAX_LP_TOKENS = 64

# Mixture weights below this are rounding residue of the LP solution and are set to 0.
NEGLIGIBLE_WEIGHT = 1e-12


@dataclass(frozen=True)
class NodeMixture:
    """What the LP's one host read brings back for a node: lambda and the caller's values."""

    weights: tuple[float, float, float]  # lambda (lex, seq, first)
    extra: list[float]  # the caller's `extra`, as host floats


def node_mixture(marginals: torch.Tensor, cap: torch.Tensor, extra: torch.Tensor | None = None) -> NodeMixture:
    """lambda at one node of a table of at most MAX_LP_TOKENS tokens, and `extra` (float64 [X], the
    caller's) as host floats: both from the one host read that brings the LP its inputs."""
    if marginals.shape[-1] > MAX_LP_TOKENS:
        raise ValueError(f"{marginals.shape[-1]} tokens: above {MAX_LP_TOKENS}, lambda is `vertex_mixture_on_device`'s")
    s, b, *rest = _to_host([marginals, cap, *([] if extra is None else [extra])])
    return NodeMixture(_solve_mixture(s.tobytes(), b.tobytes()), rest[0].tolist() if rest else [])


def _to_host(tensors: list[torch.Tensor]) -> list[np.ndarray]:
    """The tensors as contiguous float64 numpy arrays of their shapes, in one host read."""
    flat = torch.cat([t.detach().reshape(-1).to(torch.float64) for t in tensors]).numpy(force=True)  # copies off a GPU
    out, start = [], 0
    for t in tensors:
        out.append(flat[start : start + t.numel()].reshape(t.shape))
        start += t.numel()
    return out


def vertex_mixture_on_device(marginals: torch.Tensor, cap: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """lambda of a large table (more than MAX_LP_TOKENS tokens) on the device, with no host read.
    Returns (lambda [3], the row sums of min(s, cap) [3]), both float64 on the device.

    A token with s_r(x) <= cap(x) for every r adds lambda . s(x) to F, one with s_r(x) >= cap(x)
    for every r adds cap(x), exactly. Of the others (whose kink crosses the simplex) the
    MAX_LP_TOKENS with the widest range stay exact and the rest add their chord
    sum_r lambda_r min(s_r(x), cap(x)); the maximum of that reduced F is found among the vertices
    of its arrangement: every point where two of the planes {lambda . s(x) = cap(x)} and
    {lambda_r = 0} meet on the simplex (a concave piecewise-linear function attains its maximum at
    one). The first maximal candidate wins; the simplex vertices come first. Deviation from paper:
    a deterministic stand-in for the full argmax, which is all exactness needs. Where fewer than
    MAX_LP_TOKENS kinks cross, the kept tokens that do not are masked out of the arrangement
    rather than cut (a cut's size is data, which only a host read could give)."""
    capped = torch.minimum(marginals, cap)  # [3, V]
    capped_sums = capped.sum(-1)
    highest = torch.maximum(torch.maximum(marginals[0], marginals[1]), marginals[2])
    lowest = torch.minimum(torch.minimum(marginals[0], marginals[1]), marginals[2])
    crossing = (lowest < cap) & (cap < highest)
    kept = torch.topk(torch.where(crossing, cap - lowest, -1.0), MAX_LP_TOKENS, sorted=True).indices
    crosses = crossing.index_select(0, kept)
    linear = capped_sums - (capped.index_select(1, kept) * crosses).sum(-1)  # the chords of the tokens not kept
    # A kept token that does not cross is masked out: its plane from the arrangement (`planes`), and
    # with s = cap = 0 its term min(lambda . s, cap) from the objective.
    s, b = marginals.index_select(1, kept) * crosses, cap.index_select(0, kept) * crosses
    eye = torch.eye(3, dtype=s.dtype, device=s.device)
    normals = torch.cat([eye, s.T])  # [M+3, 3]: the edges first
    levels = torch.cat([torch.zeros(3, dtype=s.dtype, device=s.device), b])
    planes = torch.cat([torch.ones(3, dtype=torch.bool, device=s.device), crosses])  # a kept token's plane, if it crosses
    points, feasible = _pair_solutions_on_device(normals, levels, planes)
    points = points.clamp(min=0.0)
    points = points / torch.where(feasible, points @ torch.ones_like(levels[:3]), 1.0)[:, None]  # onto the simplex
    values = points @ linear + torch.minimum(points @ s, b).sum(-1)  # the reduced F at each candidate
    best = torch.argmax(torch.where(feasible, values, -torch.inf))  # the first maximal candidate
    return _clean_on_device(points.index_select(0, best.reshape(1))[0]), capped_sums  # points[best] would read best


def _pair_solutions_on_device(normals: torch.Tensor, levels: torch.Tensor,
                              planes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """For every pair i < j (triu order) of planes {lambda . normals[i] = levels[i]}, the point
    where both meet the plane sum(lambda) = 1: (points [P, 3], feasible [P]), feasible where both
    planes are in (`planes`), the pair is not (nearly) parallel (|det| > 1e-14) and no coordinate
    is below -1e-12. The rows of R = (a, b, 1) have R^-1 = (b x 1, 1 x a, a x b) / det R as
    columns, det R = a . (b x 1) (Cramer's rule), so lambda = (l_a (b x 1) - l_b (a x 1) + a x b)
    / det R, taken on the gathered rows of all pairs at once (a batched solve would spend a
    kernel on each of the 2211 pairs at MAX_LP_TOKENS = 64)."""
    first, second = _pair_rows(normals.shape[0], normals.device)
    n0, n1, n2 = normals.T
    cross_one = torch.stack([n1 - n2, n2 - n0, n0 - n1], dim=-1)  # n x (1, 1, 1)
    a, b = normals.index_select(0, first), normals.index_select(0, second)
    a_one, b_one = cross_one.index_select(0, first), cross_one.index_select(0, second)
    ones = torch.ones(3, dtype=normals.dtype, device=normals.device)
    det = (a * b_one) @ ones  # a row sum by a product: a reduction over 3 columns costs ten times more
    solvable = det.abs() > 1e-14
    numerator = levels.index_select(0, first)[:, None] * b_one - levels.index_select(0, second)[:, None] * a_one
    points = (numerator + torch.linalg.cross(a, b)) / torch.where(solvable, det, 1.0)[:, None]
    feasible = solvable & planes.index_select(0, first) & planes.index_select(0, second) & (points.amin(-1) >= -1e-12)
    return points, feasible


@lru_cache(maxsize=16)
def _pair_rows(count: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The rows i and j of the pairs i < j of `count` planes, in triu order, on `device`."""
    i, j = np.triu_indices(count, k=1)
    return torch.as_tensor(i, device=device), torch.as_tensor(j, device=device)


def _clean_on_device(weights: torch.Tensor) -> torch.Tensor:
    """`_clean` on the device: clipped at 0, weights below NEGLIGIBLE_WEIGHT set to 0, renormalised."""
    weights = weights.clamp(min=0.0)
    weights = torch.where(weights < NEGLIGIBLE_WEIGHT, 0.0, weights)
    return weights / weights.sum()


@lru_cache(maxsize=8192)
def _solve_mixture(marginals: bytes, cap: bytes) -> tuple[float, float, float]:
    # Cached on the bytes: exact enumeration and context-free models meet the same node LP
    # again and again, and the answer is a pure function of the input.
    s = np.frombuffer(marginals, dtype=np.float64).reshape(3, -1)
    b = np.frombuffer(cap, dtype=np.float64)
    x = mixture_lp(s, b)
    if x is None:  # never seen; a fixed answer keeps the rule deterministic
        return (0.0, 1.0, 0.0)
    return _clean(x[:3])


def mixture_lp(s: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """The LP behind lambda, solved by HiGHS's dual simplex: variables (lambda [3], t [m]),
    maximise sum t subject to t(x) <= lambda . s(x), t(x) <= b(x), lambda >= 0, sum lambda = 1.
    Returns the solution (None if HiGHS finds no optimum).

    Exactly what `linprog(..., method="highs-ds")` solves and returns (tests/test_as_bv_fast.py
    checks the two bit for bit), handed to the HiGHS bundled with scipy directly: linprog
    spends two thirds of a small LP's 3 ms checking its inputs and options, and a class's
    Toy-world runs solve hundreds of these LPs. Where that binding is missing (another scipy),
    linprog itself solves it."""
    m = b.shape[0]
    if _highs is None:
        from scipy.optimize import linprog

        solution = linprog(
            np.concatenate([np.zeros(3), -np.ones(m)]),
            A_ub=np.hstack([-s.T, np.eye(m)]),
            b_ub=np.zeros(m),
            A_eq=np.concatenate([np.ones(3), np.zeros(m)])[None],
            b_eq=[1.0],
            bounds=[(0.0, None)] * 3 + [(None, float(x)) for x in b],
            method="highs-ds",
        )
        return solution.x if solution.status == 0 else None
    core, infinity = _highs
    # The constraint matrix by columns, as linprog hands it on (explicit zeros dropped): rows
    # 0..m-1 are t(x) - lambda . s(x) <= 0, row m is sum lambda = 1.
    starts, rows, values = [0], [], []
    for r in range(3):
        kept = np.flatnonzero(s[r])
        rows += [kept, [m]]
        values += [-s[r, kept], [1.0]]
        starts.append(starts[-1] + kept.size + 1)
    rows.append(np.arange(m))
    values.append(np.ones(m))
    starts += range(starts[-1] + 1, starts[-1] + m + 1)
    lp = core.HighsLp()
    lp.num_col_ = lp.a_matrix_.num_col_ = 3 + m
    lp.num_row_ = lp.a_matrix_.num_row_ = m + 1
    lp.a_matrix_.format_ = core.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.asarray(starts, dtype=np.int32)
    lp.a_matrix_.index_ = np.concatenate(rows).astype(np.int32)
    lp.a_matrix_.value_ = np.concatenate(values)
    lp.col_cost_ = np.concatenate([np.zeros(3), -np.ones(m)])
    lp.col_lower_ = np.concatenate([np.zeros(3), np.full(m, -infinity)])
    lp.col_upper_ = np.concatenate([np.full(3, infinity), b])
    lp.row_lower_ = np.concatenate([np.full(m, -infinity), [1.0]])
    lp.row_upper_ = np.concatenate([np.zeros(m), [1.0]])
    highs = _solver()
    highs.passModel(lp)
    highs.run()
    if highs.getModelStatus() != core.HighsModelStatus.kOptimal:
        return None
    return np.array(highs.getSolution().col_value)


def _load_highs():
    """scipy's own HiGHS binding and its infinity, or None where this scipy has none."""
    try:
        import scipy.optimize._highspy._core as core
    except ImportError:
        return None
    return core, core.kHighsInf


_highs = _load_highs()
_solvers = threading.local()  # one HiGHS instance per thread: an instance is not safe to share


def _solver():
    """This thread's HiGHS instance, emptied (`clearModel` drops the model, the basis and the
    solution: nothing carries from one node's LP to the next), with linprog's options for
    method="highs-ds" and every other option at HiGHS's default, as there. Making an instance
    and its options costs 150 us, a fifth of a small LP."""
    highs = getattr(_solvers, "highs", None)
    if highs is None:
        core = _highs[0]
        options = core.HighsOptions()
        options.presolve = "on"
        options.solver = "simplex"
        options.simplex_strategy = int(core.simplex_constants.SimplexStrategy.kSimplexStrategyDual)
        options.highs_debug_level = 0
        options.output_flag = False
        options.log_to_console = False
        highs = _solvers.highs = core._Highs()
        highs.passOptions(options)
    highs.clearModel()
    return highs


def _clean(weights) -> tuple[float, float, float]:
    weights = np.clip(np.asarray(weights, dtype=np.float64), 0.0, None)
    weights[weights < NEGLIGIBLE_WEIGHT] = 0.0
    return tuple((weights / weights.sum()).tolist())
