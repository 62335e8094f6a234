"""What a decoding run leaves behind: one `IterationRecord` per target call, and a `RunRecord`.

Summary metrics are derived from the iteration records (never accumulated on the side),
with the field's usual names:

* block efficiency: emitted tokens per target call (capped at max_new_tokens);
* mean accepted: mean tau, draft tokens accepted per iteration; its theory counterpart
  is the mean of E[tau | drafts] (`mean_expected_accepted`);
* mean acceptance length: 1 + mean tau (vLLM's definition: the bonus/correction included);
* acceptance rate: sum tau / (L * iterations), the per-block rate E[tau]/L, which rises
  with K (the rate sum tau / (K L iterations) of the released code falls with K instead);
* per-position acceptance: the fraction of iterations with tau >= i, for i = 1..L.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from .config import DecodeConfig
from .methods.base import SubBlockTest

TokenKind = Literal["accepted", "correction", "bonus", "target"]  # "target": plain AR sampling


@dataclass(frozen=True)
class TopToken:
    token: int
    final_prob: float  # in the distribution the final token was drawn from
    target_prob: float  # q at that position
    draft_prob: float | None  # p at that position (None for a bonus position or AR)


@dataclass(frozen=True)
class IterationTimings:
    draft_s: float = 0.0
    target_s: float = 0.0
    verify_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.draft_s + self.target_s + self.verify_s


@dataclass(frozen=True)
class IterationRecord:
    index: int
    draft_tokens: list[list[int]]  # [K][L]; empty for AR
    draft_token_probs: list[list[float]]  # p of each drafted token   [K][L]
    target_token_probs: list[list[float]]  # q of each drafted token  [K][L]
    num_accepted: int  # tau
    winning_draft: int | None
    accepted_tokens: list[int]
    final_token: int
    final_kind: Literal["correction", "bonus", "target"]
    emitted: list[int]  # the tokens this iteration added to the output (after the cap / EOS)
    tests: list[SubBlockTest] = field(default_factory=list)
    final_top: list[TopToken] = field(default_factory=list)
    expected_accepted: float | None = None  # E[tau | drafts], the theory line
    timings: IterationTimings = field(default_factory=IterationTimings)

    @property
    def token_kinds(self) -> list[TokenKind]:
        """Provenance of each emitted token: accepted draft tokens, then the final token."""
        kinds: list[TokenKind] = ["accepted"] * self.num_accepted + [self.final_kind]
        return kinds[: len(self.emitted)]


@dataclass(frozen=True)
class RunRecord:
    config: DecodeConfig
    prompt_ids: list[int]
    tokens: list[int]  # the new token ids
    iterations: list[IterationRecord]
    stopped_at_eos: bool

    @property
    def target_calls(self) -> int:
        return len(self.iterations)

    @property
    def block_efficiency(self) -> float:
        return len(self.tokens) / max(self.target_calls, 1)

    @property
    def mean_accepted(self) -> float:
        return sum(it.num_accepted for it in self.iterations) / max(self.target_calls, 1)

    @property
    def mean_acceptance_length(self) -> float:
        return 1.0 + self.mean_accepted

    @property
    def acceptance_rate(self) -> float | None:
        if self.config.is_autoregressive:
            return None
        return self.mean_accepted / self.config.draft_length

    @property
    def per_position_acceptance(self) -> list[float]:
        if self.config.is_autoregressive:
            return []
        n = max(self.target_calls, 1)
        return [sum(it.num_accepted >= i for it in self.iterations) / n for i in range(1, self.config.draft_length + 1)]

    @property
    def accepted_length_histogram(self) -> list[int]:
        """counts[t] = iterations with tau = t, t = 0..L."""
        length = 0 if self.config.is_autoregressive else self.config.draft_length
        counts = [0] * (length + 1)
        for it in self.iterations:
            counts[it.num_accepted] += 1
        return counts

    @property
    def mean_expected_accepted(self) -> float | None:
        values = [it.expected_accepted for it in self.iterations]
        if not values or any(v is None for v in values):
            return None
        return sum(values) / len(values)

    @property
    def wall_time_s(self) -> float:
        """Decoding time (draft + target + verification), theory excluded."""
        return sum(it.timings.total_s for it in self.iterations)

    @property
    def tokens_per_second(self) -> float:
        return len(self.tokens) / self.wall_time_s if self.wall_time_s > 0 else float("nan")

    @property
    def phase_ms_per_token(self) -> dict[str, float]:
        """Milliseconds per emitted token spent drafting, in the target and verifying: why a
        speedup is what it is (AR spends everything in the target)."""
        n = max(len(self.tokens), 1)
        return {phase: 1e3 * sum(getattr(it.timings, f"{phase}_s") for it in self.iterations) / n
                for phase in ("draft", "target", "verify")}

    def summary(self) -> dict[str, object]:
        return {
            "method": self.config.method,
            "num_drafts": self.config.effective_num_drafts,
            "draft_length": self.config.draft_length,
            "temperature": self.config.temperature,
            "new_tokens": len(self.tokens),
            "target_calls": self.target_calls,
            "block_efficiency": self.block_efficiency,
            "mean_accepted": self.mean_accepted,
            "mean_expected_accepted": self.mean_expected_accepted,
            "mean_acceptance_length": self.mean_acceptance_length,
            "acceptance_rate": self.acceptance_rate,
            "per_position_acceptance": self.per_position_acceptance,
            "wall_time_s": self.wall_time_s,
            "tokens_per_second": self.tokens_per_second,
        }
