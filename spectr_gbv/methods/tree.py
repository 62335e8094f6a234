"""The token-level tree walk shared by SpecTr and SpecInfer-style RRS (docs/algorithms.md §3.1).

At depth d the accepted prefix is u; the alive drafts are ALL drafts with X_{1:d} = u
(drafts whose token was rejected at an earlier node are kept: their continuations are
still i.i.d. draft samples, docs/algorithms.md §3.1). A node rule looks at the alive
drafts' next tokens and either accepts one of them or rejects them all and supplies a
residual to draw the correction token from.

A node rule is `rule(target, draft, candidates) -> NodePlan`: the sequential acceptance
probability of each candidate given that all before it were rejected, and the residual
used if all are rejected. Both rules here can be planned before any coin is drawn, which
lets `verify` draw all coins of a node at once and `expected_accepted` reuse the plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..randomness import Randomness
from .base import SubBlockTest, VerifyInput, VerifyResult


@dataclass(frozen=True)
class NodePlan:
    accept_probs: torch.Tensor  # [n] P(accept candidate k | candidates before it rejected)
    residual: torch.Tensor  # [V] correction distribution if all n are rejected


NodeRule = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], NodePlan]


def _node(inp: VerifyInput, alive: list[int], depth: int, rule: NodeRule) -> tuple[NodePlan, torch.Tensor]:
    row = alive[0]  # the canonical row of node u (lowest draft index through u)
    candidates = inp.draft_tokens[alive, depth]
    return rule(inp.target_probs[row, depth], inp.draft_probs[row, depth], candidates), candidates


def tree_verify(inp: VerifyInput, rng: Randomness, rule: NodeRule) -> VerifyResult:
    alive = list(range(inp.num_drafts))
    accepted: list[int] = []
    tests: list[SubBlockTest] = []
    for depth in range(inp.draft_length):
        plan, candidates = _node(inp, alive, depth, rule)
        # All coins of the node in one draw; the first success is the accepted candidate.
        outcomes, uniforms = rng.coins(plan.accept_probs)
        probs = plan.accept_probs.tolist()
        first = outcomes.index(True) if True in outcomes else None
        for i, k in enumerate(alive[: len(alive) if first is None else first + 1]):
            tests.append(SubBlockTest(k, depth, 1, probs[i], outcomes[i], uniforms[i]))
        if first is None:
            return VerifyResult(
                accepted_tokens=accepted,
                final_token=rng.sample(plan.residual),
                final_kind="correction",
                final_distribution=plan.residual,
                final_position=depth,
                winning_draft=alive[0] if accepted else None,
                tests=tests,
            )
        token = int(candidates[first])
        accepted.append(token)
        alive = [k for k in alive if int(inp.draft_tokens[k, depth]) == token]
    bonus = inp.target_probs[alive[0], inp.draft_length]
    return VerifyResult(accepted, rng.sample(bonus), "bonus", bonus, inp.draft_length, alive[0], tests)


def tree_expected_accepted(inp: VerifyInput, rule: NodeRule) -> float:
    """E[tau | drafts]: sum over candidates of P(first acceptance there) * (1 + E[child]).

    Memoised per trie node: alive drafts that share their next token lead to the same child, and
    without the memo the recursion would revisit it once per such draft (n^L calls when n drafts
    agree on a whole block, which low temperatures make common)."""
    memo: dict[tuple[tuple[int, ...], int], float] = {}

    def expected(alive: list[int], depth: int) -> float:
        if depth == inp.draft_length:
            return 0.0
        key = (tuple(alive), depth)
        if key not in memo:
            memo[key] = node_expected(alive, depth)
        return memo[key]

    def node_expected(alive: list[int], depth: int) -> float:
        plan, candidates = _node(inp, alive, depth, rule)
        probs = plan.accept_probs.tolist()
        tokens = candidates.tolist()
        reach, total = 1.0, 0.0
        for a, token in zip(probs, tokens):
            if reach * a > 0:
                child = [k for k in alive if int(inp.draft_tokens[k, depth]) == token]
                total += reach * a * (1.0 + expected(child, depth + 1))
            reach *= 1.0 - a
        return total

    return expected(list(range(inp.num_drafts)), 0)
