"""`FunctionModel`: any Python callable `probs_fn(context_ids) -> probability vector` as a model.

The toy world of the tests and of the classroom: the distributions are whatever the
function says, so the exact target law is known and can be compared with the output.
Sessions recompute every distribution from the full context (no cache is needed at
these sizes).
"""

from __future__ import annotations

from typing import Callable, Sequence

import torch

from ..probs import checked_float64_distributions

ProbsFn = Callable[[tuple[int, ...]], "torch.Tensor | Sequence[float]"]


class FunctionModel:
    def __init__(self, probs_fn: ProbsFn, vocab_size: int, eos_token_id: int | None = None, name: str = "function"):
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be at least 1, got {vocab_size}")
        self.probs_fn = probs_fn
        self.vocab_size = vocab_size
        self.eos_token_id = eos_token_id
        self.name = name
        self.device = torch.device("cpu")

    def next_token_probs(self, context: Sequence[int]) -> torch.Tensor:
        """The model's next-token distribution after `context` (all ids so far). [V] float64"""
        probs = torch.as_tensor(self.probs_fn(tuple(int(t) for t in context)), dtype=torch.float64)
        if probs.shape != (self.vocab_size,):
            raise ValueError(f"{self.name}: probs_fn returned shape {tuple(probs.shape)}, expected ({self.vocab_size},)")
        return checked_float64_distributions(f"{self.name}: probs_fn output", probs)

    def start(self, prompt_ids: Sequence[int]) -> "FunctionSession":
        return FunctionSession(self, list(prompt_ids))


class FunctionSession:
    def __init__(self, model: FunctionModel, context: list[int]):
        self.model = model
        self.context = context
        self.branches: list[list[int]] = []
        self.forward_calls = 0

    def _logits(self, contexts: list[list[int]]) -> torch.Tensor:
        self.forward_calls += 1
        return torch.stack([self.model.next_token_probs(c) for c in contexts]).log()

    def branch_logits(self, num_branches: int) -> torch.Tensor:
        self.branches = [[] for _ in range(num_branches)]
        return self._logits([self.context] * num_branches)

    def extend_branches(self, tokens: torch.Tensor) -> torch.Tensor:
        for branch, token in zip(self.branches, tokens.tolist()):
            branch.append(token)
        return self._logits([self.context + b for b in self.branches])

    def score(self, blocks: torch.Tensor) -> torch.Tensor:
        self.forward_calls += 1
        rows = blocks.tolist()
        return torch.stack(
            [torch.stack([self.model.next_token_probs(self.context + row[:i]) for i in range(len(row) + 1)]) for row in rows]
        ).log()

    def commit(self, branch: int, tokens: Sequence[int]) -> None:
        self.context = self.context + list(tokens)
        self.branches = []
