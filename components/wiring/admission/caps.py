"""The most each control may ask for, from the same rules the server refuses with (before the click).

The handlers refuse settings over a limit (`components.serving.limits`, `components.wiring.settings`, the
app's up-front `check_fits`); these functions compute, for the current other settings, the
largest value those rules accept, so the UI can cap its sliders there instead of letting a
click fail. Nothing here loads a model: what a run costs comes from the per-pair estimates of
`components.wiring.admission.cost` (expected iterations and seconds).
"""

from __future__ import annotations

import gradio as gr

from spectr_gbv.pairs import is_teaching

from ...serving import limits as limits_module
from .. import private
from ..runs import ignored_settings
from ..settings import MAX_DRAFT_LENGTH, MAX_DRAFTS, check_method, check_methods, check_pair_key, number
from . import cost

MAX_SWEEP_VALUES = 8
FIDELITY_MIN_RUNS = 10
FIDELITY_MAX_TOKENS = 3  # Fidelity compares the law of at most this many first tokens


def _limits(limits):
    return limits or limits_module.LIMITS  # looked up when called: tests swap the server's limits


def max_draft_length(num_drafts, limits=None) -> int:
    """L's maximum for this K: K x L drafted tokens per iteration must fit SPECTR_GBV_MAX_BLOCK_TOKENS."""
    k = max(int(num_drafts or 1), 1)
    return max(1, min(MAX_DRAFT_LENGTH, _limits(limits).block_tokens // k))


def max_fidelity_runs(pair_key, method, draft_length, num_tokens, limits=None, num_drafts=2) -> int:
    """Fidelity's largest N for this pair: its limit on runs, N runs of `num_tokens` tokens (their
    expected iterations, components.wiring.admission.cost) plus the exact law's scoring calls within the
    iteration budget, and their estimated time within cost.CAP_FRACTION of the time budget."""
    limits = _limits(limits)
    most = limits.fidelity_runs if is_teaching(pair_key) else limits.fidelity_runs_llm
    length = max(int(draft_length or 1), 1)
    tokens = max(int(num_tokens or 1), 1)
    k = max(int(num_drafts or 1), 1)
    return max(FIDELITY_MIN_RUNS, cost.fidelity_runs(pair_key, method, k, length, tokens, cost.CAP_FRACTION, most, limits))


def max_sweep_values(num_methods, limits=None) -> int:
    """How many values a sweep may have with this many methods (SPECTR_GBV_MAX_SWEEP_RUNS = methods x values)."""
    return max(1, min(MAX_SWEEP_VALUES, _limits(limits).sweep_runs // max(int(num_methods or 1), 1)))


# ------------------------------------------------------------------ the controls' notes and caps


def ignored_info(method, setting: str) -> str | None:
    """The K or L slider's note when the Generate/Fidelity method ignores it."""
    by = ignored_settings([method]).get(setting)
    return f"ignored by {', '.join(by)} (Generate, Fidelity)" if by else None


def draft_length_info(num_drafts, method) -> str:
    cap = max_draft_length(num_drafts)
    # Short, no long names: the note sits beside the number box in a 320 px sidebar (the server's
    # refusal names the limit).
    note = f"at most {cap} at K = {int(num_drafts or 1)}: K x L <= {_limits(None).block_tokens}"
    ignored = ignored_info(method, "L")
    return f"{note}; {ignored}" if ignored else note


def sweep_values_label(num_methods) -> str:
    return f"Values (at most {max_sweep_values(num_methods)} with {int(num_methods or 1)} method(s))"


def fidelity_runs_info(most: int) -> str:
    return f"at most {most} for this pair and these settings"


def cap_draft_length(num_drafts, method, draft_length):
    """L's slider for this K: its maximum, its value within it, and its note."""
    k, method = number("K (drafts)", num_drafts, 1, MAX_DRAFTS), check_method(method)
    cap = max_draft_length(k)
    length = number("L (draft length)", draft_length, 1, MAX_DRAFT_LENGTH)
    return gr.update(maximum=cap, value=min(length, cap), info=draft_length_info(k, method))


def note_ignored_drafts(method):
    """K's slider note for this method."""
    # "" rather than None: an update's None leaves the old note ("ignored by SD") in place
    return gr.update(info=ignored_info(check_method(method), "K") or "")


def cap_fidelity_runs(pair_key, method, draft_length, num_tokens, num_runs, num_drafts):
    """Fidelity's N slider for this pair and these settings: its maximum, its value within it, and its note."""
    most = max_fidelity_runs(check_pair_key(pair_key), check_method(method),
                             number("L (draft length)", draft_length, 1, MAX_DRAFT_LENGTH),
                             number("tokens per run", num_tokens, 1, FIDELITY_MAX_TOKENS),
                             num_drafts=number("K (drafts)", num_drafts, 1, MAX_DRAFTS))
    runs = most if num_runs is None else number("number of runs N", num_runs, 0, 10**9)
    return gr.update(maximum=most, value=min(runs or most, most), info=fidelity_runs_info(most))


def label_sweep_values(methods):
    """Sweep's values box: its label says how many values these methods allow."""
    return gr.update(label=sweep_values_label(len(check_methods(methods, at_least_one=False)) or 1))


def cap_controls(pair, method, num_drafts, draft_length, methods, values, num_runs, num_tokens) -> None:
    """Cap the controls where the server would refuse (components.caps), as the other settings change."""
    hidden = dict(queue=False, show_progress="hidden")
    for control in (num_drafts, method):
        private.on(control.change, cap_draft_length, [num_drafts, method, draft_length], draft_length, **hidden)
    private.on(method.change, note_ignored_drafts, method, num_drafts, **hidden)
    # The pair's own change sets N to that pair's default (components.tabs.fidelity.runs_for_pair).
    for control in (method, num_drafts, draft_length, num_tokens):
        private.on(control.change, cap_fidelity_runs, [pair, method, draft_length, num_tokens, num_runs, num_drafts],
                   num_runs, **hidden)
    private.on(methods.change, label_sweep_values, methods, values, **hidden)
