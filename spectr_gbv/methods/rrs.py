"""SpecInfer-style multi-draft recursive rejection sampling (RRS), docs/algorithms.md §3.5.

Each candidate gets an ordinary SD test against the current target f'; after a rejection
f' becomes norm((f' - g)_+) for the next candidate. A rejected token has f'(x) = 0
afterwards, so duplicates of it are rejected without a coin. Tree walk as SpecTr's.
"""

from __future__ import annotations

import torch

from ..probs import residual
from ..randomness import Randomness
from .base import VerifyInput, VerifyResult
from .tree import NodePlan, tree_expected_accepted, tree_verify


def rrs_node(target: torch.Tensor, draft: torch.Tensor, candidates: torch.Tensor) -> NodePlan:
    current = target
    accept = []
    for token in candidates:
        accept.append(torch.clamp(current[token] / draft[token], max=1.0))
        current = residual(current, draft)  # the target for the next candidate
    return NodePlan(torch.stack(accept), current)


def verify(inp: VerifyInput, rng: Randomness) -> VerifyResult:
    return tree_verify(inp, rng, rrs_node)


def expected_accepted(inp: VerifyInput) -> float:
    return tree_expected_accepted(inp, rrs_node)
