"""SpecTr-GBV as released by its authors. LOSSY: it does NOT preserve the target distribution.

Kept only to measure and show its bias (docs/algorithms.md §5.2, §5.3): on the GBV paper's own
two-token example (q = (1/3, 2/3), p = (2/3, 1/3), L = 2, K = 1) its output law is at
total-variation distance about 0.11 from the target's. The project's SpecTr-GBV is the
exact rule in `spectr_gbv.py`.

This is a port of the verification in the authors' `src/engine.py` (restated from the
reconstruction in docs/algorithms.md §5.1). All probabilities are joint along the draft being
examined (P = prod p, Q = prod q over its first i tokens), with m(x) = min(P(x)/Q(x), 1):

    Eq. 2, sub-block of length i (i = tau+1 .. L-1, the range fixed when draft k starts):
        h = [sum_x Q(x)(1-m(x))^K - Q(1-m_0)^K] / [1 - (1-P)^K - sum_x Q(x)(1-(1-m(x))^K)]
    full block:  h_L = Q_L (1 - (1 - min(P_L/Q_L, 1))^K) / (1 - (1-P_L)^K)
    Eq. 4, correction:  r(x) ~ Q* q(x) (1 - min(P* p(x) / (Q* q(x)), 1)^K)

A rejected sub-block joins the set H and is skipped if met again; a later (longer)
acceptance overrides an earlier one; a full-block acceptance stops the scan.
"""

from __future__ import annotations

import torch

from ..probs import normalize, token_probs
from ..randomness import Randomness
from .base import SubBlockTest, VerifyInput, VerifyResult

# The released code adds this to denominators; kept so the port follows it.
RELEASED_EPS = 1e-20


def released_accept_probs(inp: VerifyInput) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(h, P, Q), each [K, L]: h[k, i] is Eq. 2 for the sub-block X^(k)_{1:i+1} (i < L-1)
    and the full-block rule at i = L-1; P, Q are the draft's joint probabilities."""
    K = inp.num_drafts
    joint_p = token_probs(inp.draft_probs, inp.draft_tokens).cumprod(-1)  # [K, L]
    joint_q = token_probs(inp.target_probs[:, :-1], inp.draft_tokens).cumprod(-1)
    P, Q = joint_p[:, :-1, None], joint_q[:, :-1, None]  # sub-blocks of length 1..L-1
    next_p, next_q = inp.draft_probs[:, 1:], inp.target_probs[:, 1:-1]  # [K, L-1, V]
    m = torch.clamp(P * next_p / (Q * next_q + RELEASED_EPS), max=1.0)
    m0 = torch.clamp(P / (Q + RELEASED_EPS), max=1.0).squeeze(-1)
    numerator = (Q * next_q * (1 - m) ** K).sum(-1) - Q.squeeze(-1) * (1 - m0) ** K
    denominator = 1 - (1 - P.squeeze(-1)) ** K - (Q * next_q * (1 - (1 - m) ** K)).sum(-1)
    h_sub = numerator / (denominator + RELEASED_EPS)
    P_L, Q_L = joint_p[:, -1], joint_q[:, -1]
    h_full = Q_L * (1 - (1 - torch.clamp(P_L / (Q_L + RELEASED_EPS), max=1.0)) ** K) / (1 - (1 - P_L) ** K + RELEASED_EPS)
    return torch.cat([h_sub, h_full[:, None]], dim=-1), joint_p, joint_q


def verify(inp: VerifyInput, rng: Randomness) -> VerifyResult:
    K, L = inp.num_drafts, inp.draft_length
    h, joint_p, joint_q = released_accept_probs(inp)
    # "eta < h" with h outside [0, 1] (Eq. 2 can leave it) succeeds with prob clamp(h, 0, 1).
    coin_probs = torch.nan_to_num(h, nan=0.0).clamp(0.0, 1.0)
    h_rows, tokens = h.tolist(), inp.draft_tokens.tolist()
    tau, selected, rejected_blocks = 0, 0, set()
    tests: list[SubBlockTest] = []
    for k in range(K):
        # Sub-blocks tau+1 .. L-1 not already in H, then the full block; the set of tests is
        # fixed when draft k starts, so its coins can be drawn together.
        lengths = [i for i in range(tau + 1, L) if tuple(tokens[k][:i]) not in rejected_blocks] + [L]
        outcomes, uniforms = rng.coins(coin_probs[k, [i - 1 for i in lengths]])
        for i, ok, eta in zip(lengths, outcomes, uniforms):
            tests.append(SubBlockTest(k, 0, i, h_rows[k][i - 1], ok, eta))
            if ok:
                tau, selected = i, k  # a later, longer acceptance overrides
            elif i < L:
                rejected_blocks.add(tuple(tokens[k][:i]))
        if tau == L:
            break
    accepted = tokens[selected][:tau]
    if tau == L:
        bonus = inp.target_probs[selected, L]
        return VerifyResult(accepted, rng.sample(bonus), "bonus", bonus, L, selected, tests)
    P_star = joint_p[selected, tau - 1] if tau > 0 else joint_p.new_ones(())
    Q_star = joint_q[selected, tau - 1] if tau > 0 else joint_p.new_ones(())
    q_next, p_next = inp.target_probs[selected, tau], inp.draft_probs[selected, tau]
    ratio = torch.clamp(P_star * p_next / (Q_star * q_next + RELEASED_EPS), max=1.0)
    final = normalize(Q_star * q_next * (1 - ratio**K), fallback=q_next)
    return VerifyResult(accepted, rng.sample(final), "correction", final, tau, selected if tau > 0 else None, tests)
