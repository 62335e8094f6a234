"""The one cost model of a decoding run, in seconds: a `PairCost`'s numbers and how they add up.

Two sets of numbers read it: each pair's measured CPU costs (`components.wiring.admission.cost.PAIR_COSTS`,
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

    def worst_case_seconds(self, tokens: int, num_drafts: int = 0, draft_length: int = 0) -> float:
        """One run of `tokens` tokens when every iteration emits one token (alpha 0): `tokens` iterations.
        L = 0 is plain AR. The ZeroGPU duration a request asks for (components.serving.gpu.GPU_COST).

        The same terms as `iteration_seconds`, added in the order the durations have always used
        (the draft steps, the scoring forward, then the positions): ZeroGPU's duration is the ceil
        of a sum that is often a whole number, and another order moves it by 1 s in ~0.6 % of
        requests. The CPU estimates keep their own order (`iteration_seconds`) for the same reason:
        each side's numbers stay bit for bit what they were (tests/test_gpu.py checks both)."""
        if draft_length == 0:
            return self.ar_seconds(tokens)
        positions = max(num_drafts, 1) * (draft_length + 1)
        per_iteration = draft_length * self.draft_step_s + self.iteration_s + positions * self.position_s
        return self.prefill_s + tokens * per_iteration
