"""Back-of-the-envelope speculative decoding: expected tokens per iteration and speedup from a
per-token acceptance rate, no model needed (the theory playground).

The i.i.d. model: every drafted token is accepted with the same probability alpha,
independently of everything else. One draft of length L then accepts tau tokens with
P(tau >= j) = alpha^j, and an iteration emits tau + 1 tokens (the accepted ones, then one
correction or bonus token), so E[tokens] = (1 - alpha^(L+1)) / (1 - alpha) (Leviathan et al.
2023, arXiv 2211.17192).

K drafts: each draft is accepted like the single draft above, independently of the other
drafts, and the verifier keeps the longest accepted one: tau = max_k tau_k, so
P(tau >= j) = 1 - (1 - alpha^j)^K. At K = 1 this is the formula above. Drafts sampled from one
model are correlated and an exact verifier cannot accept each of them at the full rate, so for
K > 1 this is an optimistic estimate (a ceiling for the idea, not a prediction for a rule).

Cost, in one-token target steps: one iteration is one target call plus the draft calls, each
costing c steps. K drafts made one after another cost K * L * c; made as one batch (K rows per
draft call) they cost L * c. The target call scores the K * L drafted positions besides the
next one, and each extra position costs g steps: 1 + g * K * L (the drafts sharing no prefix,
the most it scores). g = 0 is a memory-bound call that costs the same whatever it verifies (a
GPU, a CPU with native bf16 at a few positions); on a CPU whose matrix kernels are compute-bound
at a few rows, g is what the kernel probe measures (`spectr_gbv.models.cpu_kernel.position_cost`).
"""

from __future__ import annotations

import math

MAX_DRAFTS, MAX_DRAFT_LENGTH = 64, 64


def _check(alpha, num_drafts, draft_length) -> tuple[float, int, int]:
    if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or math.isnan(alpha) or not 0 <= alpha <= 1:
        raise ValueError(f"alpha (per-token acceptance) must be a number in [0, 1], got {alpha!r}")
    for name, value, most in (("K (drafts)", num_drafts, MAX_DRAFTS), ("L (draft length)", draft_length, MAX_DRAFT_LENGTH)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value) or not 1 <= value <= most:
            raise ValueError(f"{name} must be a whole number in [1, {most}], got {value!r}")
    return float(alpha), int(num_drafts), int(draft_length)


def survival(alpha: float, num_drafts: int, draft_length: int) -> list[float]:
    """P(tau >= j) for j = 1..L: at least one of the K independent drafts accepted its first j tokens."""
    alpha, num_drafts, draft_length = _check(alpha, num_drafts, draft_length)
    return [1.0 - (1.0 - alpha**j) ** num_drafts for j in range(1, draft_length + 1)]


def expected_tokens(alpha: float, num_drafts: int, draft_length: int) -> float:
    """E[tau + 1]: tokens emitted per iteration (per target call)."""
    return 1.0 + sum(survival(alpha, num_drafts, draft_length))


def single_draft_tokens(alpha: float, draft_length: int) -> float:
    """The closed form for one draft, (1 - alpha^(L+1)) / (1 - alpha); L + 1 at alpha = 1."""
    alpha, _, draft_length = _check(alpha, 1, draft_length)
    return float(draft_length + 1) if alpha == 1 else (1 - alpha ** (draft_length + 1)) / (1 - alpha)


def _check_cost(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not 0 <= value <= 10:
        raise ValueError(f"{name} must be a number in [0, 10], got {value!r}")
    return float(value)


def iteration_cost(num_drafts: int, draft_length: int, cost_ratio: float, batched: bool,
                   position_cost: float = 0.0) -> float:
    """Cost of one iteration in one-token target steps: the target call 1 + g K L, plus L c (batched
    drafts) or K L c (one after another)."""
    _, num_drafts, draft_length = _check(0.5, num_drafts, draft_length)
    c = _check_cost("c (draft call cost / target call cost)", cost_ratio)
    g = _check_cost("g (cost of each extra scored position, in one-token steps)", position_cost)
    return 1.0 + g * num_drafts * draft_length + (1 if batched else num_drafts) * draft_length * c


def speedup(alpha: float, num_drafts: int, draft_length: int, cost_ratio: float, batched: bool = True,
            position_cost: float = 0.0) -> float:
    """Expected speedup over plain target sampling (one token per one-token step)."""
    return (expected_tokens(alpha, num_drafts, draft_length)
            / iteration_cost(num_drafts, draft_length, cost_ratio, batched, position_cost))
