"""What a K x L grid costs before it starts, its defaults, and the refusal of one that cannot fit (pure).

A grid is one coupled run (`spectr_gbv.bench.frontier.measure`) per prompt at every (K, L): the
per-pair estimates of `components.wiring.admission.cost` (expected iterations and seconds, COUPLED_OVERHEAD)
add up its seconds and iterations, plus each rule's verdict and E[tau | drafts] at every iteration
(RULE_POSITION_S per scored position): the grid computes every rule's E[tau | drafts], and AS-BV's
solves a small linear programme per node, which on the teaching pairs costs more than their
lookup-table "models". The defaults are the most prompts whose estimate fits
cost.DEFAULT_FRACTION of the budget (TEACHING_SECONDS on a teaching pair: a Toy-world grid in
seconds) at the default K, L and tokens; a grid whose
estimate is over cost.CAP_FRACTION of the budget, or over the iterations allowed, is refused before
it starts, and the message says how many prompts would fit.
"""

from __future__ import annotations

import math
from typing import Sequence

from spectr_gbv.pairs import is_teaching, pair_key_of

from ...serving import limits as limits_module
from . import cost

DEFAULT_DRAFTS = (1, 2, 4)
DEFAULT_LENGTHS = (2, 4, 6)
# New tokens per prompt (a model pair, a teaching pair): E[tau | drafts] has the coins integrated out, so a few
# iterations per prompt suffice, and more prompts narrow the paired interval more than longer runs do.
DEFAULT_TOKENS, TEACHING_TOKENS = 16, 8
TEACHING_SECONDS = 12.0  # a teaching pair's default grid is estimated to take at most this (the goal: 15 s)
# One rule's verdict and E[tau | drafts] per scored position (K x (L + 1)) of a coupled iteration: CPU (process)
# time of the six exact rules Compare ticks on a Toy-world grid, on the loaded 2-core development machine, so
# it errs long.
RULE_POSITION_S = 0.0012
MOST_PROMPTS = 120  # the paper suite's size
MOST_VALUES = 8  # K values, and L values


def _limits(limits):
    return limits or limits_module.LIMITS


def default_tokens(pair_key) -> int:
    return TEACHING_TOKENS if is_teaching(pair_key_of(pair_key)) else DEFAULT_TOKENS


def grid_seconds(pair_key, drafts: Sequence[int], lengths: Sequence[int], tokens: int, prompts: int,
                 rules: int) -> float:
    """Expected seconds of a grid of `rules` rules: one coupled run of `tokens` tokens per prompt at every (K, L)."""
    per_prompt = 0.0
    for k in drafts:
        for length in lengths:
            iterations = cost.expected_iterations(pair_key, "drafted", length, tokens)
            per_prompt += (cost.run_seconds(pair_key, "drafted", k, length, tokens) * cost.COUPLED_OVERHEAD
                           + iterations * rules * RULE_POSITION_S * k * (length + 1))
    return prompts * per_prompt


def grid_runs(drafts: Sequence[int], lengths: Sequence[int], prompts: int) -> list[tuple[int, int]]:
    """The grid's runs as (how many, L), for `cost.fits_iterations` and the server's up-front check."""
    return [(prompts * len(drafts), int(length)) for length in lengths]


def fits(pair_key, drafts, lengths, tokens: int, prompts: int, rules: int, seconds: float, limits=None) -> bool:
    """Whether the grid's estimate fits `seconds` and its iterations (+ cost.SIGMAS sd) the server's limit."""
    limits = _limits(limits)
    return (grid_seconds(pair_key, drafts, lengths, tokens, prompts, rules) <= seconds
            and cost.fits_iterations(grid_runs(drafts, lengths, prompts), tokens, pair_key, limits.iterations))


def prompts_that_fit(pair_key, drafts, lengths, tokens: int, rules: int, seconds: float, most: int = MOST_PROMPTS,
                     limits=None) -> int:
    """The most prompts (up to `most`) whose grid fits `seconds`; 0 when not even one does."""
    return cost.largest_fitting(lambda n: fits(pair_key, drafts, lengths, tokens, n, rules, seconds, limits), most)


def default_prompts(pair_key, rules: int, limits=None) -> int:
    """The Grid's prompts when the page opens or the pair changes: the most whose grid at the default K, L and
    tokens fits half the budget (TEACHING_SECONDS on a teaching pair), and at least 2: a paired interval needs two."""
    key = pair_key_of(pair_key)
    seconds = cost.DEFAULT_FRACTION * cost.budget_seconds(limits)
    if is_teaching(key):
        seconds = min(seconds, TEACHING_SECONDS)
    return max(2, prompts_that_fit(key, DEFAULT_DRAFTS, DEFAULT_LENGTHS, default_tokens(key), max(rules, 1), seconds,
                                   MOST_PROMPTS, limits))


def check_grid_fits(pair_key, drafts, lengths, tokens: int, prompts: int, rules: int, limits=None) -> float:
    """The grid's estimate in seconds; a grid over cost.CAP_FRACTION of the budget (or the iterations) is refused
    here, before any run, with how many prompts would fit at these settings."""
    limits = _limits(limits)
    seconds = grid_seconds(pair_key, drafts, lengths, tokens, prompts, rules)
    allowed = cost.CAP_FRACTION * cost.budget_seconds(limits)
    if fits(pair_key, drafts, lengths, tokens, prompts, rules, allowed, limits):
        return seconds
    size = f"{len(drafts)} K x {len(lengths)} L values x {prompts} prompts of {tokens} tokens, {rules} rules"
    would = prompts_that_fit(pair_key, drafts, lengths, tokens, rules, allowed, prompts - 1, limits)
    fix = (f"at most {would} prompts fit at these K, L and tokens (Fit the prompts to the budget sets them)"
           if would >= 2 else
           "not even 2 prompts fit at these K, L and tokens: fewer K or L values, or fewer tokens per prompt")
    most = math.floor(allowed)
    raise ValueError(f"this grid ({size}) is estimated at {cost.about(seconds)}, over this server's {most} s for one "
                     f"request, so it was not started: {fix}")
