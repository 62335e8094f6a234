"""The one cost model of a decoding run, in seconds: a `PairCost`'s numbers and how they add up.

Two sets of numbers read it: each pair's measured CPU costs (`components.wiring.cost.PAIR_COSTS`,
with expected iterations, for the views' defaults and caps) and the ZeroGPU worst case
(`components.serving.gpu.GPU_COST`, every iteration emitting one token, for the duration a
request asks for).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PairCost:
    """One pair's costs on one machine (seconds)."""

    alpha: float  # per-token acceptance of the pair's draft (held out where measured); 0: one token an iteration
    step_s: float  # one plain AR step of the target
    iteration_s: float  # one speculative iteration's fixed part: the scoring forward and the rule
    position_s: float  # each scored position (K x (L + 1) per iteration)
    draft_step_s: float  # one draft step (all K rows at once)
    prefill_s: float  # the prompt through the target (and the draft), once per run or scoring call

    def iteration_seconds(self, num_drafts: int, draft_length: int) -> float:
        """One speculative iteration: the fixed part, every scored position, and L draft steps."""
        return (self.iteration_s + self.position_s * max(int(num_drafts), 1) * (int(draft_length) + 1)
                + self.draft_step_s * int(draft_length))

    def ar_seconds(self, tokens: int) -> float:
        """One plain AR run of `tokens` tokens."""
        return self.prefill_s + int(tokens) * self.step_s

    def drafted_seconds(self, iterations: float, num_drafts: int, draft_length: int) -> float:
        """One speculative run of `iterations` iterations."""
        return self.prefill_s + iterations * self.iteration_seconds(num_drafts, draft_length)
