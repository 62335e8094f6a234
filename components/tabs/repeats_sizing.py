"""Compare's and Sweep's Repeats (seeds), re-sized as the settings change, so the next click's estimate fits.

The repeats a view opens with fit its defaults (components.wiring.admission.cost); a larger K or L, more
tokens or methods, or a prompt set multiply what each repeat costs. When one of those changes
the box keeps its value if the estimate still fits cost.CAP_FRACTION of the budget (seconds and
expected iterations, as the prompt sets are sized: components.wiring.prompt_set_choice.set_fits),
else it drops to the most that does (at least one: the handlers' own checks then speak). Fidelity's
N is capped the same way by components.wiring.admission.caps.cap_fidelity_runs.
"""

from __future__ import annotations

import gradio as gr

from ..wiring import private

from ..wiring.admission import cost
from ..wiring.prompt_set_choice import SINGLE, check_set_name, set_fits, set_size
from ..wiring.runs import MAX_REPEATS
from ..wiring.settings import (MAX_DRAFT_LENGTH, MAX_DRAFTS, MAX_NEW_TOKENS, check_flag, check_methods, check_pair_key,
                               number)
from .compare_set import set_estimate


def most_compare_repeats(pair_key, num_methods: int, K: int, L: int, tokens: int, coupled: bool, prompt_set: str,
                         limits=None) -> int:
    """The most repeats (up to MAX_REPEATS; 0: not even one) whose Compare fits, on the prompt or over the set."""
    size = set_size(prompt_set, pair_key)

    def fits(repeats: int) -> bool:
        if prompt_set == SINGLE:
            ar = cost.compare_ar_runs(pair_key, num_methods)
            plan = [(ar, 0), ((num_methods + coupled) * repeats, L)]
            seconds = cost.compare_seconds(pair_key, num_methods, K, L, tokens, repeats, coupled)
            return set_fits(pair_key, 1, lambda n: seconds, lambda n: plan, tokens, limits)
        return set_fits(pair_key, size, *set_estimate(pair_key, num_methods, K, L, tokens, repeats, coupled), tokens,
                        limits)

    return cost.largest_fitting(fits, MAX_REPEATS)


def most_sweep_repeats(pair_key, num_methods: int, axis: str, values: list[float], K: int, L: int, tokens: int,
                       prompt_set: str, limits=None) -> int:
    """The most repeats (up to MAX_REPEATS; 0: not even one) whose Sweep fits, on the prompt or over the set."""
    size = set_size(prompt_set, pair_key)
    lengths = values if axis == "L" else [L] * len(values)

    def fits(repeats: int) -> bool:
        ar = cost.sweep_ar_runs(axis, values, num_methods, cost.sweep_interleaves_ar(pair_key, repeats))
        plan = [(ar * size, 0)] + [(num_methods * repeats * size, int(v)) for v in lengths]
        seconds = size * cost.sweep_seconds(pair_key, num_methods, axis, values, K, L, tokens, repeats)
        return set_fits(pair_key, size, lambda n: seconds, lambda n: plan, tokens, limits)

    return cost.largest_fitting(fits, MAX_REPEATS)


def _repeats_update(current, most: int):
    """The box kept within `most` (at least 1), and its note saying why."""
    value = max(1, min(number("repeats", current, 1, MAX_REPEATS) if current not in (None, "") else most, most))
    info = (f"at most {most} at these settings (the estimate must fit the budget)" if most else
            "even one is over the budget at these settings: fewer methods or tokens, a smaller K, L or prompt set")
    if value == 1 and most:  # said before the run: one seed draws no band, so nothing it shows ranks the rules
        info += "; one seed: no 95 % band and no speed chart, so the result will not rank the rules"
    return gr.update(value=value, info=info)


def resize_compare_repeats(pair_key, methods, num_drafts, draft_length, max_new_tokens, coupled, prompt_set, repeats):
    """Compare's Repeats box after a change of its settings: kept if it fits, else the most that does."""
    key = check_pair_key(pair_key)
    most = most_compare_repeats(key, max(len(check_methods(methods, at_least_one=False)), 1),
                                number("K (drafts)", num_drafts, 1, MAX_DRAFTS),
                                number("L (draft length)", draft_length, 1, MAX_DRAFT_LENGTH),
                                number("max new tokens", max_new_tokens, 1, MAX_NEW_TOKENS),
                                bool(check_flag("coupled", coupled)), check_set_name(prompt_set))
    return _repeats_update(repeats, most)


def resize_sweep_repeats(pair_key, methods, axis, values, num_drafts, draft_length, max_new_tokens, prompt_set,
                         repeats):
    """Sweep's Repeats box after a change of its settings (values that do not parse: left as they are, the click
    says what is wrong with them)."""
    from .sweep import parse_values  # the tab's own parser; it imports this module's caller

    try:
        swept = parse_values(axis, values)
    except ValueError:
        return gr.update()
    key = check_pair_key(pair_key)
    most = most_sweep_repeats(key, max(len(check_methods(methods, at_least_one=False)), 1), axis, swept,
                              number("K (drafts)", num_drafts, 1, MAX_DRAFTS),
                              number("L (draft length)", draft_length, 1, MAX_DRAFT_LENGTH),
                              number("max new tokens", max_new_tokens, 1, MAX_NEW_TOKENS), check_set_name(prompt_set))
    return _repeats_update(repeats, most)


def wire_events(page) -> None:
    """Re-size both views' Repeats when the visitor changes what they cost (the pair's own change sets Compare's
    default first). On `input`, not `change`: with several quick handlers on one slider's change, Gradio's
    slider re-sent its change after their updates and the page looped on the server."""
    s, compare, sweep = page.sidebar, page.tab_handles.compare, page.tab_handles.sweep
    hidden = dict(queue=False, show_progress="hidden")
    for control in (s.methods, s.num_drafts, s.draft_length, s.max_new_tokens, compare.coupled, compare.prompt_set):
        private.on(control.input, resize_compare_repeats,
                   [s.pair, s.methods, s.num_drafts, s.draft_length, s.max_new_tokens, compare.coupled,
                    compare.prompt_set, compare.repeats], compare.repeats, **hidden)
    for control in (s.pair, s.methods, s.num_drafts, s.draft_length, s.max_new_tokens, sweep.values,
                    sweep.prompt_set):
        private.on(control.input, resize_sweep_repeats,
                   [s.pair, s.methods, sweep.axis, sweep.values, s.num_drafts, s.draft_length, s.max_new_tokens,
                    sweep.prompt_set, sweep.repeats], sweep.repeats, **hidden)
