"""Coupled comparison: every verifier judges the SAME drafts with the SAME random draws.

Independent runs of two methods differ by the rule and by sampling noise (different drafts,
different coins, and after the first iteration different contexts). Here one iteration is:

1. the draft proposes K blocks once; the target scores them once (one `VerifyInput`);
2. every method verifies that input with a fresh generator seeded identically, so the
   uniforms they draw are the same stream (single-draft methods, SD and GBV, see draft 0,
   which is what they would have drafted themselves);
3. the context advances by the *leader* method's tokens (an exact method by default), so all
   methods keep judging one shared trajectory.

Per method the result is the paired sequence of accepted lengths tau and the conditional
expectations E[tau | drafts]; differences between methods are then the rules' alone.
Block efficiency here is 1 + mean tau (one target call per iteration, every iteration
emitting tau + 1 tokens before the output cap).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator, Sequence

import torch

from .config import DecodeConfig
from .engine import DecodeRun, laws_kept_by
from .methods import METHODS
from .methods.base import VerifyInput
from .models.base import LanguageModel
from .randomness import TorchRandomness


@dataclass(frozen=True)
class MethodStep:
    """One method's verdict on one shared iteration."""

    num_accepted: int
    winning_draft: int | None
    final_token: int
    final_kind: str
    expected_accepted: float | None


@dataclass(frozen=True)
class CoupledStep:
    index: int
    draft_tokens: list[list[int]]  # [K][L], shared by every method
    verdicts: dict[str, MethodStep]
    emitted: list[int]  # the leader's tokens, which advanced the context


@dataclass
class CoupledRun:
    config: DecodeConfig  # the leader's settings (K, L, T, seed, ...)
    methods: list[str]
    prompt_ids: list[int]
    steps: list[CoupledStep] = field(default_factory=list)

    @property
    def tokens(self) -> list[int]:
        return [t for step in self.steps for t in step.emitted]

    def accepted(self, method: str) -> list[int]:
        return [step.verdicts[method].num_accepted for step in self.steps]

    def expected(self, method: str) -> list[float] | None:
        values = [step.verdicts[method].expected_accepted for step in self.steps]
        return None if any(v is None for v in values) else values

    def summary(self, method: str) -> dict[str, object]:
        """The same keys as `RunRecord.summary()` where they apply (hardware-free ones only)."""
        taus = self.accepted(method)
        n = max(len(taus), 1)
        L = self.config.draft_length
        expected = self.expected(method)
        return {
            "method": method,
            "num_drafts": self.config.num_drafts if METHODS[method].multi_draft else 1,
            "draft_length": L,
            "temperature": self.config.temperature,
            "target_calls": len(taus),
            "mean_accepted": sum(taus) / n,
            "mean_expected_accepted": None if expected is None else sum(expected) / n,
            "mean_acceptance_length": 1 + sum(taus) / n,
            "block_efficiency": 1 + sum(taus) / n,
            "acceptance_rate": sum(taus) / (n * L),
            "per_position_acceptance": [sum(t >= i for t in taus) / n for i in range(1, L + 1)],
            "accepted_length_histogram": [taus.count(t) for t in range(L + 1)],
        }


def _single_draft(inp: VerifyInput) -> VerifyInput:
    # Draft 0 alone: already validated and canonical, so no rebuild is needed.
    return VerifyInput(inp.draft_tokens[:1], inp.draft_probs[:1], inp.target_probs[:1])


def coupled_steps(
    target: LanguageModel,
    draft: LanguageModel,
    prompt_ids: Sequence[int],
    methods: Sequence[str],
    config: DecodeConfig,
) -> Iterator[CoupledStep]:
    """Yield one `CoupledStep` per shared iteration; `config.method` is the leader.

    The engine's own `DecodeRun` drafts, scores and commits; only the verification differs:
    every method judges the same proposal with the same coin stream."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"coupled mode compares verifiers; unknown or missing: {unknown or 'no methods'}")
    if config.method not in METHODS:
        raise ValueError(f"the leader must be a verifier, got {config.method!r}")
    run = DecodeRun(target, draft, prompt_ids, config, speculative=True)
    while run.remaining > 0:
        proposal = run.propose(config.num_drafts)
        inp = VerifyInput.build(proposal.draft_tokens, proposal.draft_probs, proposal.target_probs)
        coin_seed = 2 * config.seed + 1 + 7919 * run.index  # one stream per iteration, shared by all
        with laws_kept_by(target):
            verdicts, leader = _judge_all(inp, methods, config, target.device, coin_seed)
        index = run.index
        emitted = run.commit(leader.winning_draft or 0, leader.tokens)
        yield CoupledStep(index, inp.draft_tokens.tolist(), {m: verdicts[m] for m in methods}, emitted)


def _judge_all(inp: VerifyInput, methods: Sequence[str], config: DecodeConfig, device, coin_seed: int):
    """Every method's verdict on one proposal, each with the same coin stream; and the leader's result."""
    verdicts, leader = {}, None
    for name in dict.fromkeys([*methods, config.method]):
        spec = METHODS[name]
        own = inp if spec.multi_draft else _single_draft(inp)
        result = spec.verify(own, TorchRandomness(torch.Generator(device=device).manual_seed(coin_seed)))
        expected = spec.expected_accepted(own) if (config.with_theory and spec.expected_accepted) else None
        verdicts[name] = MethodStep(result.num_accepted, result.winning_draft, result.final_token,
                                    result.final_kind, expected)
        if name == config.method:
            leader = result
    return verdicts, leader


def coupled_run(target, draft, prompt_ids, methods, config: DecodeConfig) -> CoupledRun:
    run = CoupledRun(config, list(methods), list(prompt_ids))
    run.steps.extend(coupled_steps(target, draft, prompt_ids, methods, config))
    return run
