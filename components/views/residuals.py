"""Where each method draws its final token from, in words a student can check against the chart.

The explorer's chart plots q and p at the final position (of the winning draft). Only SD's
residual is norm((q - p)+) of those two bars; every other rule subtracts something else,
and this says what (ALGORITHMS.md sections 1-4.9).
"""

from __future__ import annotations

# Correction tokens: the residual r the token Y was drawn from, per method.
CORRECTION = {
    "sd": "r = norm((q − p)+) at position τ+1: the draft's p is subtracted once, so r is the plotted q minus the "
          "plotted p, clipped at 0.",
    "gbv": "r = norm((ω_τ·q − p)+) at position τ+1, where ω_τ ≤ 1 is the block weight of the accepted prefix "
           "(ω_0 = 1 gives SD's residual): q is scaled down by ω_τ before p is subtracted.",
    "spectr": "K-SEQ residual at the node: r(x) ∝ q(x) − min(p(x), q(x)/ρ*)·(1 − (1 − β)^n)/β, with n the drafts "
              "proposing there and ρ*, β from the K-SEQ search: what is subtracted is the mass the n candidates' acceptances "
              "already emit, not the plotted p.",
    "rrs": "after each rejected candidate the target becomes f ← norm((f − p)+): p is subtracted once per rejected "
           "candidate at the node (n times for n drafts), then Y ~ the last f.",
    "spectr_gbv": "a draft that stops early hands on f = norm((ω·q − p)+) (GBV's residual) to the drafts still "
                  "consistent at that node; when every one of them fails there, Y comes from the K-SEQ residual of f: "
                  "f(x) − min(p(x), f(x)/ρ*)·(1 − (1 − β)^n)/β, normalised, n the drafts tried at that node.",
    "as_bv": "phase 2 is GBV on the selected block with D, the selected block's exact law, in place of p: "
             "r = norm((ω_τ·q − D)+). D mixes the K drafts' proposals, so it is not the plotted p.",
    "as_bv_handoff": "AS-BV's r = norm((ω_τ·q − D)+) at the stop node, handed to the other drafts alive there: each "
                     "proposes its token z to the current residual R with its own law G given the selection (accepted "
                     "with min(1, R(z)/G(z)), else R ← norm((R − G)+)); an accepted draft continues by GBV with p.",
    "traversal": "each rejected leaf updates its parent: M_b ← norm((w·M_b − M_s)+) and M_s loses the rejected token "
                 "(without replacement); Y is drawn from M_b at the node where the walk stopped.",
    "spectr_gbv_released": "the released Eq. 4: r(x) ∝ Q*·q(x)·(1 − min(P*·p(x)/(Q*·q(x)), 1)^K), with P*, Q* the "
                           "accepted prefix's joint draft and target probabilities. This residual is LOSSY: the "
                           "output law is not the target's.",
}
BONUS = "bonus: all L drafted tokens were accepted, so Y ~ q at position L+1 of the winning draft; nothing is subtracted."
TARGET = "plain autoregressive step: Y ~ q, the target's distribution; no draft, nothing subtracted."


def final_token_rule(method: str, kind: str) -> str:
    """One sentence: the distribution this final token was drawn from, and what was subtracted."""
    if kind == "bonus":
        return BONUS
    if kind == "target":
        return TARGET
    return CORRECTION.get(method, "a correction token from this method's residual.")
