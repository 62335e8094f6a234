"""Where each method draws its final token from, in words a student can check against the chart.

The explorer's chart plots q and p at the final position (of the winning draft). Only SD's
residual is norm((q - p)+) of those two bars; every other rule subtracts something else,
and this says what (the rules of docs/algorithms.md §2 to §8).
"""

from __future__ import annotations

from spectr_gbv import METHODS

BONUS = "bonus: all L drafted tokens were accepted, so Y ~ q at position L+1 of the winning draft; nothing is subtracted."
TARGET = "plain autoregressive step: Y ~ q, the target's distribution; no draft, nothing subtracted."


def final_token_rule(method: str, kind: str) -> str:
    """One sentence: the distribution this final token was drawn from, and what was subtracted."""
    if kind == "bonus":
        return BONUS
    if kind == "target":
        return TARGET
    if method in METHODS:
        return METHODS[method].residual
    return "a correction token from this method's residual."
