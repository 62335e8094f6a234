"""Standard speculative sampling (Leviathan et al. 2023; Chen et al. 2023).

docs/algorithms.md §2.1. Single draft: only draft 0 is read. Position i is accepted with
a_i = min(1, q_i(X_i) / p_i(X_i)); at the first rejection the correction token is drawn
from norm((q_i - p_i)_+); if all L are accepted the bonus token comes from q_{L+1}.
"""

from __future__ import annotations

import torch

from ..probs import residual, token_probs
from ..randomness import Randomness, torch_uniforms
from .base import SubBlockTest, VerifyInput, VerifyResult, decision, law_at, single_draft_result


def token_accept_probs(inp: VerifyInput) -> torch.Tensor:
    """a_i = min(1, q_i(X_i) / p_i(X_i)) for draft 0, i = 1..L.  [L] float64"""
    target = token_probs(inp.target_probs[0, :-1], inp.draft_tokens[0])
    draft = token_probs(inp.draft_probs[0], inp.draft_tokens[0])
    return torch.clamp(target / draft, max=1.0)


def verify(inp: VerifyInput, rng: Randomness) -> VerifyResult:
    accept_probs = token_accept_probs(inp)
    # deviation from paper: all L coins are drawn at once (one host synchronisation) and
    # the first failure is found afterwards; coins after it are never looked at, so the
    # law is the same as drawing them one by one.
    outcomes, uniforms = rng.coins(accept_probs)
    a = accept_probs.tolist()
    tau = outcomes.index(False) if False in outcomes else inp.draft_length
    tests = [
        SubBlockTest(0, 0, i + 1, a[i], outcomes[i], uniforms[i]) for i in range(min(tau + 1, inp.draft_length))
    ]
    return single_draft_result(inp, rng, tau, tests)  # residual norm((q - p)_+)


def decide(inp: VerifyInput, generator: torch.Generator) -> torch.Tensor:
    """`verify` on tensors: the same L coins, tau = the first failure (L if none), then Y."""
    L = inp.draft_length
    accept_probs = token_accept_probs(inp)
    uniforms = torch_uniforms(generator, L, accept_probs.device)
    tau = (uniforms < accept_probs).long().cumprod(0).sum()  # coins before the first failure
    target, draft = inp.target_probs[0], inp.draft_probs[0]
    at_stop = law_at(tau.clamp(max=L - 1), draft)
    correction = residual(law_at(tau, target), at_stop)  # norm((q - p)_+) at tau + 1 (unused when tau = L)
    final = torch.where(tau == L, target[L], correction)
    return decision(inp, 0, tau, final, torch_uniforms(generator, 1, accept_probs.device)[0])


def expected_accepted(inp: VerifyInput) -> float:
    """E[tau | draft] = sum_i prod_{j<=i} a_j."""
    return token_accept_probs(inp).cumprod(0).sum().item()
