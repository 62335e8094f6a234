"""`FunctionModel`: any Python callable `probs_fn(context_ids) -> probability vector` as a model.

The toy world of the tests and of the classroom: the distributions are whatever the
function says, so the exact target law is known and can be compared with the output.
Sessions recompute every distribution from the full context (no cache is needed at
these sizes).
"""

from __future__ import annotations

from typing import Callable, Hashable, Sequence

import torch

from ..probs import checked_float64_distributions

ProbsFn = Callable[[tuple[int, ...]], "torch.Tensor | Sequence[float]"]


class FunctionModel:
    """`context_key`, when given, says what of the context the law depends on (the Toy world's last
    word, a constant law's nothing): each key's law is then computed and checked once, and the same
    checked row is given after every context with that key. Without it, every call asks `probs_fn`."""

    def __init__(self, probs_fn: ProbsFn, vocab_size: int, eos_token_id: int | None = None, name: str = "function",
                 context_key: Callable[[tuple[int, ...]], Hashable] | None = None):
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be at least 1, got {vocab_size}")
        self.probs_fn = probs_fn
        self.context_key = context_key
        self._laws: dict = {}  # context_key(context) -> its checked law
        self.vocab_size = vocab_size
        self.eos_token_id = eos_token_id
        self.name = name
        self.device = torch.device("cpu")
        # A `replays.Recent` where runs on this target remember their node laws (`engine.laws_kept_by`);
        # the app gives one to its teaching pairs (`spectr_gbv.pairs`). None: nothing kept between runs.
        self.node_laws = None

    def next_token_probs(self, context: Sequence[int]) -> torch.Tensor:
        """The model's next-token distribution after `context` (all ids so far). [V] float64.
        With a `context_key` the row is shared between calls: read it, never write to it."""
        context = tuple(int(t) for t in context)
        if self.context_key is None:
            return self._checked_probs(context)
        key = self.context_key(context)
        law = self._laws.get(key)
        if law is None:
            law = self._laws[key] = self._checked_probs(context)
        return law

    def _checked_probs(self, context: tuple[int, ...]) -> torch.Tensor:
        probs = torch.as_tensor(self.probs_fn(context), dtype=torch.float64)
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

    def score(self, blocks: torch.Tensor, rows: list[list[int]] | None = None) -> torch.Tensor:
        self.forward_calls += 1
        rows = blocks.tolist() if rows is None else rows
        return torch.stack(
            [torch.stack([self.model.next_token_probs(self.context + row[:i]) for i in range(len(row) + 1)]) for row in rows]
        ).log()

    def commit(self, branch: int, tokens: Sequence[int], drafted: Sequence[int] | None = None) -> None:
        self.context = self.context + list(tokens)
        self.branches = []


# ------------------------------------------------------------------ feature-conditioned toys
# Stand-ins for the feature-conditioned path (spectr_gbv.models.feature_draft), small enough
# for exact enumeration: the target "computes" a feature per position, the draft reads them.

FeatureFn = Callable[[tuple[int, ...]], torch.Tensor]  # context ids[: t + 1] -> feature of position t
FeatureProbsFn = Callable[[torch.Tensor, tuple[int, ...]], "torch.Tensor | Sequence[float]"]


class FeatureFunctionModel(FunctionModel):
    """A target whose sessions also hand out a feature per committed position,
    `feature_fn(ids[: t + 1])`, as a transformers target hands out its last hidden states."""

    def __init__(self, probs_fn: ProbsFn, feature_fn: FeatureFn, vocab_size: int, eos_token_id: int | None = None,
                 name: str = "feature function"):
        super().__init__(probs_fn, vocab_size, eos_token_id, name)
        self.feature_fn = feature_fn

    def start(self, prompt_ids: Sequence[int]) -> "FeatureFunctionSession":
        return FeatureFunctionSession(self, list(prompt_ids))


class FeatureFunctionSession(FunctionSession):
    def __init__(self, model: FeatureFunctionModel, context: list[int]):
        super().__init__(model, context)
        self.handed = 0  # positions whose features were taken

    def prefill(self, feature_layers: tuple[int, ...] = ()) -> None:
        pass  # features are computed from the context on demand

    def take_features(self) -> torch.Tensor:
        """Features of positions handed..len(context)-2: every committed position but the last,
        whose feature a real target computes only in its next forward."""
        upto = len(self.context) - 1
        rows = [self.model.feature_fn(tuple(self.context[: t + 1])) for t in range(self.handed, upto)]
        self.handed = max(self.handed, upto)
        return torch.stack(rows) if rows else torch.empty(0, 0)


class FeatureReadingDraft:
    """A draft that reads the target's features: after committed context c (n tokens) and draft
    prefix d, its distribution is `probs_fn(feature of position n - 2, c + d)`. It checks that
    the features it is handed are exactly the target's, position by position."""

    needs_features = True

    def __init__(self, probs_fn: FeatureProbsFn, feature_fn: FeatureFn, vocab_size: int, eos_token_id: int | None = None,
                 name: str = "feature-reading draft"):
        self.probs_fn = probs_fn
        self.feature_fn = feature_fn  # only to check what the engine hands over
        self.vocab_size = vocab_size
        self.eos_token_id = eos_token_id
        self.name = name
        self.device = torch.device("cpu")

    def probs(self, feature: torch.Tensor, context: Sequence[int]) -> torch.Tensor:
        probs = torch.as_tensor(self.probs_fn(feature, tuple(int(t) for t in context)), dtype=torch.float64)
        return checked_float64_distributions(f"{self.name}: probs_fn output", probs)

    def start(self, prompt_ids: Sequence[int]) -> "FeatureReadingSession":
        return FeatureReadingSession(self, list(prompt_ids))


class FeatureReadingSession(FunctionSession):
    """A `FunctionSession` whose distributions come from the features it was handed."""

    def __init__(self, model: FeatureReadingDraft, context: list[int]):
        super().__init__(model, context)
        self.features: list[torch.Tensor] = []

    def add_features(self, features: torch.Tensor) -> None:
        for row in features:
            t = len(self.features)
            expected = self.model.feature_fn(tuple(self.context[: t + 1]))
            if not torch.equal(row, expected):
                raise AssertionError(f"feature of position {t} is not the target's")
            self.features.append(row)

    def _logits(self, contexts: list[list[int]]) -> torch.Tensor:
        self.forward_calls += 1
        if len(self.features) != len(self.context) - 1:
            raise RuntimeError(f"the draft has {len(self.features)} features for {len(self.context)} committed tokens")
        feature = self.features[-1]
        return torch.stack([self.model.probs(feature, c) for c in contexts]).log()

    def score(self, blocks: torch.Tensor, rows: list[list[int]] | None = None) -> torch.Tensor:
        raise NotImplementedError("a feature-reading draft only drafts")
