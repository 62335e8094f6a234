"""The ceiling: the largest E[tau] any exact K-draft verifier can reach, on small tables.

docs/algorithms.md §6.1 and §6.2. For K i.i.d. draft blocks with block law P on Omega^L, let
f(S) = 1 - (1 - P(S))^K and B(f) = {laws D on Omega^L : D(S) <= f(S) for every set S}. Every
exact rule selects, in effect, one draft and verifies it; the selected draft's law lies in
B(f), and GBV is the best single-draft verifier. So

    OPT_K = max over D in B(f) of GBV(D),  GBV(D) = sum_i sum_{y in Omega^i} w_i(y),
    w_0 = 1,  w_i(y) = min(w_{i-1}(y_<i) q(y_i | y_<i), D(y_1:i)),

which is a linear program (`optimal_expected_accepted`, solved by scipy's HiGHS):

    maximise   sum_y w(y)
    subject to w(y) <= q(y_i | y_<i) w(y_<i),   w(y) <= sum_{x extends y} D(x),
               sum_x D(x) = 1,  D >= 0,  D(S) <= f(S) for every S.

B(f) has one constraint per subset of Omega^L; they are brought in through the tangents of
phi(t) = 1 - (1 - t)^K, which is concave, so phi(t) = min over lambda of a_lambda + lambda t and

    D(S) <= f(S) for all S   <=>   sum_x (D(x) - lambda P(x))_+ <= a_lambda for every lambda >= 0.

One tangent (lambda = phi'(t), a_lambda = phi(t) - lambda t) is linear with one auxiliary e_x >= 0
per block and implies D(S) <= f(S) for every S with P(S) = t. For a candidate D the most
violated sets are threshold sets {x : D(x) / P(x) > c} (the inner maximiser above), so sorting
the blocks by D / P is an exact separation oracle: the LP is re-solved with the tangents at
P(S) of the worst violated sets until none is violated. If the target's own block law Q lies
in B(f), OPT_K = L and no LP is needed (one sort); at K = 1, B(f) = {P} and OPT_1 is GBV's own
E[tau] (the sum of w over the block trie).

Sizes: V^L up to MAX_BLOCKS for those two, up to MAX_LP_BLOCKS for the LP (it needs about one
tangent per block, each with one variable per block); larger tables are refused with a
ValueError.
"""

from __future__ import annotations

import itertools
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np
import torch

DistributionFn = Callable[[tuple[int, ...]], torch.Tensor]

# Largest V^L for the "is Q itself selectable" check, and for the LP (seconds at 128 blocks;
# the tangents grow the LP like blocks^2).
MAX_BLOCKS = 4096
MAX_LP_BLOCKS = 128
# A set constraint violated by less than this counts as satisfied.
VIOLATION_TOLERANCE = 1e-10
MAX_ROUNDS = 200
INITIAL_TANGENTS = 16
TANGENTS_PER_ROUND = 32


def optimal_expected_accepted(target_fn: DistributionFn, draft_fn: DistributionFn, num_drafts: int, draft_length: int) -> float:
    """OPT_K: the best E[tau] of one iteration over all exact K-draft verifiers (module docstring).

    `target_fn` / `draft_fn` map a prefix (tuple of token ids after the context) to the
    processed next-token distribution, as in `spectr_gbv.exact`. Raises ValueError when
    V^L exceeds MAX_BLOCKS.
    """
    if num_drafts < 1 or draft_length < 1:
        raise ValueError(f"need K >= 1 and L >= 1, got K = {num_drafts}, L = {draft_length}")
    vocab = len(target_fn(()))
    if vocab**draft_length > MAX_BLOCKS:
        raise ValueError(f"the ceiling is computed for V^L <= {MAX_BLOCKS} draft blocks; V = {vocab}, "
                         f"L = {draft_length} gives {vocab**draft_length}")
    tables = _BlockTables.build(target_fn, draft_fn, vocab, draft_length)
    if not _violated(tables.target_law, tables.block_probs, num_drafts, 1).size:
        return float(draft_length)  # Q in B(f): some exact rule accepts every block
    if num_drafts == 1:  # B(f) = {P}: GBV itself (Sun et al., Thm 2; docs/algorithms.md §2.6)
        return _gbv_expected(tables)
    if vocab**draft_length > MAX_LP_BLOCKS:
        raise ValueError(f"the ceiling LP is limited to V^L <= {MAX_LP_BLOCKS} draft blocks (V = {vocab}, "
                         f"L = {draft_length} gives {vocab**draft_length}), and here the best rule cannot "
                         "accept every block")
    return _solve(tables, num_drafts)


class _BlockTables:
    """Blocks of positive draft probability, their prefixes, and the LP's fixed rows."""

    def __init__(self, blocks, block_probs, target_law, prefixes, target_steps, parents, covers):
        self.blocks = blocks  # list of tuples, P(x) > 0
        self.block_probs = block_probs  # [N] P(x)
        self.target_law = target_law  # [N] Q(x)
        self.prefixes = prefixes  # list of tuples y, |y| = 1..L, prefixes of some block
        self.target_steps = target_steps  # [M] q(y_i | y_<i)
        self.parents = parents  # [M] index of y_<i among prefixes, -1 for |y| = 1
        self.covers = covers  # list of [blocks extending y] per prefix

    @classmethod
    def build(cls, target_fn: DistributionFn, draft_fn: DistributionFn, vocab: int, length: int) -> "_BlockTables":
        memo_target, memo_draft = {}, {}

        def q(prefix):
            if prefix not in memo_target:
                memo_target[prefix] = target_fn(prefix).tolist()
            return memo_target[prefix]

        def p(prefix):
            if prefix not in memo_draft:
                memo_draft[prefix] = draft_fn(prefix).tolist()
            return memo_draft[prefix]

        blocks, probs = [], []
        for x in itertools.product(range(vocab), repeat=length):
            prob = 1.0
            for i, token in enumerate(x):
                prob *= p(x[:i])[token]
                if prob == 0.0:
                    break
            if prob > 0.0:
                blocks.append(x)
                probs.append(prob)
        index: dict[tuple[int, ...], int] = {}
        prefixes, steps, parents, covers = [], [], [], []
        for b, x in enumerate(blocks):
            for i in range(1, length + 1):
                y = x[:i]
                if y not in index:
                    index[y] = len(prefixes)
                    prefixes.append(y)
                    steps.append(q(y[:-1])[y[-1]])
                    parents.append(index[y[:-1]] if i > 1 else -1)
                    covers.append([])
                covers[index[y]].append(b)
        target_law = np.array([float(np.prod([q(x[:i])[t] for i, t in enumerate(x)])) for x in blocks])
        return cls(blocks, np.array(probs), target_law, prefixes, np.array(steps), np.array(parents), covers)


def _solve(tables: _BlockTables, num_drafts: int) -> float:
    from scipy.optimize import linprog
    from scipy.sparse import coo_matrix

    K, P = num_drafts, tables.block_probs
    n, m = len(tables.blocks), len(tables.prefixes)
    # Columns: D (n), w (m), then e (n per tangent). Fixed rows: w(y) - q w(parent) <= 0 for
    # |y| >= 2 (|y| = 1 is the bound w <= q(y_1)), and w(y) - sum_{x extends y} D(x) <= 0.
    rows, cols, vals = [], [], []
    row = 0
    for j, parent in enumerate(tables.parents.tolist()):
        if parent >= 0:
            rows += [row, row]
            cols += [n + j, n + parent]
            vals += [1.0, -float(tables.target_steps[j])]
            row += 1
    for j, cover in enumerate(tables.covers):
        rows += [row] * (1 + len(cover))
        cols += [n + j, *cover]
        vals += [1.0] + [-1.0] * len(cover)
        row += 1
    fixed_rows = row
    bounds = [(0.0, float(b)) for b in 1.0 - (1.0 - P) ** K]  # D(x) <= f({x})
    bounds += [(0.0, float(tables.target_steps[j]) if tables.parents[j] < 0 else None) for j in range(m)]
    # Start from tangents at the sets D would want if it could copy the target: prefixes of
    # the blocks in decreasing Q / P.
    by_target = np.minimum(np.cumsum(P[np.argsort(-tables.target_law / P, kind="stable")]), 1.0)
    tangents = sorted({float(by_target[k]) for k in np.linspace(0, n - 1, INITIAL_TANGENTS).astype(int)} - {1.0})
    for _ in range(MAX_ROUNDS):
        t_rows, t_cols, t_vals, limits = list(rows), list(cols), list(vals), [0.0] * fixed_rows
        row, column = fixed_rows, n + m
        for t in tangents:
            slope = K * (1.0 - t) ** (K - 1)
            for x in range(n):  # D(x) - e_x <= slope P(x)
                t_rows += [row, row]
                t_cols += [x, column + x]
                t_vals += [1.0, -1.0]
                limits.append(slope * float(P[x]))
                row += 1
            t_rows += [row] * n  # sum_x e_x <= a = phi(t) - slope t
            t_cols += list(range(column, column + n))
            t_vals += [1.0] * n
            limits.append(1.0 - (1.0 - t) ** K - slope * t)
            row, column = row + 1, column + n
        solution = linprog(
            np.concatenate([np.zeros(n), -np.ones(m), np.zeros(column - n - m)]),
            A_ub=coo_matrix((t_vals, (t_rows, t_cols)), shape=(row, column)).tocsr(), b_ub=np.array(limits),
            A_eq=coo_matrix((np.ones(n), (np.zeros(n, dtype=int), np.arange(n))), shape=(1, column)), b_eq=[1.0],
            bounds=bounds + [(0.0, None)] * (column - n - m), method="highs",
        )
        if solution.status != 0:
            raise RuntimeError(f"the ceiling LP did not solve: {solution.message}")
        new = set(_violated(solution.x[:n], P, K, TANGENTS_PER_ROUND).tolist()) - set(tangents)
        if not new:  # feasible, or violated only at a tangent already imposed (solver tolerance)
            return float(-solution.fun)
        tangents = sorted(set(tangents) | new)
    raise RuntimeError(f"the ceiling LP did not converge in {MAX_ROUNDS} rounds")


def _gbv_expected(tables: _BlockTables) -> float:
    """GBV(P) = sum_y w(y), w(y) = min(w(y_<i) q(y_i | y_<i), P(y)) over the block trie."""
    prefix_probs = np.array([tables.block_probs[cover].sum() for cover in tables.covers])
    weights = np.zeros(len(tables.prefixes))
    for j, parent in enumerate(tables.parents.tolist()):  # parents come before children
        weights[j] = min((weights[parent] if parent >= 0 else 1.0) * tables.target_steps[j], prefix_probs[j])
    return float(weights.sum())


def _violated(law: np.ndarray, block_probs: np.ndarray, num_drafts: int, count: int) -> np.ndarray:
    """P(S) of the (at most `count`) most violated threshold sets S = {x : D(x) / P(x) >= c}:
    D(S) > f(S) + VIOLATION_TOLERANCE. Empty when D is in B(f)."""
    order = np.argsort(-law / block_probs, kind="stable")
    reach = np.minimum(np.cumsum(block_probs[order]), 1.0)
    excess = np.cumsum(law[order]) - (1.0 - (1.0 - reach) ** num_drafts)
    worst = np.argsort(-excess, kind="stable")[:count]
    return reach[worst[excess[worst] > VIOLATION_TOLERANCE]]


# ------------------------------------------------------------------------- app helpers

def processed(model, context: Sequence[int], temperature: float, top_k: int | None, top_p: float | None) -> DistributionFn:
    """The distributions the verifiers see after `context`: the model's, through the same
    temperature / top-k / top-p processing the engine applies (`probs.logits_to_probs`)."""
    from .probs import logits_to_probs

    prefix = tuple(context)
    return lambda suffix: logits_to_probs(model.next_token_probs(prefix + tuple(suffix)).log(), temperature, top_k, top_p).to(torch.float64)


def run_ceiling(pair_key: str, prompt_ids: Sequence[int], emitted: Sequence[Sequence[int]], config) -> float | None:
    """`teaching_ceiling` at the contexts where a run's iterations started: the prompt, then
    the prompt followed by the tokens emitted so far. `config` is the run's DecodeConfig."""
    contexts, context = [], list(prompt_ids)
    for tokens in emitted:
        contexts.append(tuple(context))
        context += list(tokens)
    return teaching_ceiling(pair_key, contexts, config.num_drafts, config.draft_length, config.temperature,
                            config.top_k, config.top_p)


def teaching_ceiling(pair_key: str, contexts: Sequence[Sequence[int]], num_drafts: int, draft_length: int,
                     temperature: float, top_k: int | None = None, top_p: float | None = None) -> float | None:
    """Mean OPT_K over the contexts at which iterations started, for the two teaching pairs
    ("toy", "two-token" in `spectr_gbv.pairs`); None for any other pair, for no contexts, or
    when V^L is over MAX_BLOCKS.

    Both teaching pairs are Markov in a known way (toy.py): the two-token pair ignores its
    context and the Toy world is a bigram model, so OPT_K depends on the last word only and
    is solved once per (word, K, L, T, top-k, top-p).
    """
    from .toy import WORDS

    vocab = {"toy": len(WORDS), "two-token": 2}.get(pair_key)
    if vocab is None or not contexts or vocab**draft_length > MAX_BLOCKS:
        return None
    states = [() if pair_key == "two-token" else tuple(context)[-1:] for context in contexts]
    try:
        values = [_teaching_opt(pair_key, s, num_drafts, draft_length, temperature, top_k, top_p) for s in states]
    except ValueError:  # over MAX_LP_BLOCKS where the target's law is not selectable
        return None
    return float(np.mean(values))


@lru_cache(maxsize=1024)
def _teaching_opt(pair_key, state, num_drafts, draft_length, temperature, top_k, top_p) -> float:
    from .toy import toy_pair, two_token_pair

    target, draft = toy_pair() if pair_key == "toy" else two_token_pair()
    return optimal_expected_accepted(processed(target, state, temperature, top_k, top_p),
                                     processed(draft, state, temperature, top_k, top_p), num_drafts, draft_length)
