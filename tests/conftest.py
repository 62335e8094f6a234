"""Shared toy worlds for the tests: constant and context-dependent distribution functions."""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: app.py, components/


def constant(probs) -> "callable":
    """A context-independent model: the same vector after every prefix."""
    vector = torch.tensor(probs, dtype=torch.float64)
    return lambda context: vector


def _context_seed(seed: int, context: tuple[int, ...]) -> int:
    value = seed * 1_000_003 + 17
    for token in context:
        value = (value * 31 + token + 1) % (2**61 - 1)
    return value


def dirichlet_model(vocab_size: int, seed: int, concentration: float = 1.0):
    """A context-dependent model: an independent Dirichlet draw for every context (memoised)."""
    cache: dict[tuple[int, ...], torch.Tensor] = {}

    def probs(context: tuple[int, ...]) -> torch.Tensor:
        if context not in cache:
            generator = torch.Generator().manual_seed(_context_seed(seed, context))
            gamma = torch._standard_gamma(torch.full((vocab_size,), concentration, dtype=torch.float64), generator=generator)
            cache[context] = gamma / gamma.sum()
        return cache[context]

    return probs


def mixture(a, b, weight: float):
    """weight * a + (1 - weight) * b: a draft that partly agrees with the target."""
    return lambda context: weight * a(context) + (1 - weight) * b(context)
