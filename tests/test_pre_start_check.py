"""Checked before it starts: a run whose estimate does not fit the budget is refused before any model call.

Every view (Generate, the race, Compare, Sweep, Fidelity) estimates its run (components.wiring.admission.cost)
and refuses one over the budget's margin with a message naming what would fit, each fix the
largest value of one setting that fits with the others as given; the page shows the same fixes
as buttons. Budget stops say what the view's visitor can change, not another view's settings.
"""

from __future__ import annotations

import dataclasses
import re

import gradio as gr
import pytest

from components.serving.limits import Budget, BudgetSpent
from components.tabs import compare, fidelity, generate, race, sweep
from components.wiring import inputs
from components.wiring.admission import cost, fix_buttons, pre_start
from components.wiring.admission.budget_stops import budget_stop
from components.wiring.inputs import DEFAULT_METHOD, DEFAULT_SETTINGS, default_compare
from helpers import last

pytestmark = pytest.mark.unit

ENVIRONMENT_VARIABLE = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")  # SPECTR_GBV_MAX_SECONDS and the like
DEFAULT_METHODS = tuple(default_compare())
# The case: Compare at K = 8, L = 8, 256 tokens on the default pair (about 13 min at one repeat).
TOO_BIG_COMPARE = pre_start.Plan("compare", "default", DEFAULT_METHODS, 8, 8, 256, repeats=1, coupled=True)


@pytest.fixture
def no_model_calls(monkeypatch):
    """Fail the test if a handler reaches for a model (every handler gets its pair through inputs.get_pair)."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model pair was loaded: the run started")

    monkeypatch.setattr(inputs, "get_pair", refuse)


def over_budget(plans) -> list[pre_start.Plan]:
    return [plan for plan in plans if not plan.fits()]


# ------------------------------------------------------------------ the check and its fixes


def test_compare_at_k8_l8_256_tokens_is_refused_with_what_would_fit():
    assert TOO_BIG_COMPARE.seconds() > cost.budget_seconds()  # far over: minutes against 180 s
    with pytest.raises(pre_start.OverBudget) as refused:
        pre_start.check(TOO_BIG_COMPARE)
    message = str(refused.value)
    assert "Compare at these settings is estimated to take about" in message and "so it was not started" in message
    assert refused.value.fixes and all(fix.text in message for fix in refused.value.fixes)
    assert not ENVIRONMENT_VARIABLE.search(message), message


CASES = [
    TOO_BIG_COMPARE,
    pre_start.Plan("compare", "default", DEFAULT_METHODS, 2, 4, 256, repeats=6, coupled=True),
    pre_start.Plan("compare", "qwen2.5-1.5b", ("sd", "spectr_gbv"), 4, 8, 200, repeats=3, coupled=False),
    pre_start.Plan("sweep", "default", DEFAULT_METHODS[:3], 2, 4, 200, repeats=3, axis="K", values=(1, 2, 4, 8)),
    pre_start.Plan("sweep", "default", ("spectr_gbv",), 4, 4, 256, repeats=10, axis="T", values=(0.0, 0.5, 1.0)),
    pre_start.Plan("fidelity", "default", ("spectr_gbv",), 8, 8, 0, num_runs=300, num_tokens=3),
    pre_start.Plan("generate", "qwen2.5-1.5b", ("spectr_gbv",), 8, 8, 256),
    pre_start.Plan("race", "qwen2.5-1.5b", ("spectr_gbv",), 8, 8, 256),
]


@pytest.mark.parametrize("plan", CASES, ids=lambda p: f"{p.view}-{p.pair_key}")
def test_every_fix_fits_and_is_the_largest_that_does(plan):
    assert not plan.fits()
    fixes = pre_start.fixes(plan)
    assert fixes, "some single setting can be lowered to fit here"
    for fix in fixes:
        if fix.setting == "values":
            count = len(fix.value.split(","))
            assert dataclasses.replace(plan, values=plan.values[:count]).fits()
            assert not dataclasses.replace(plan, values=plan.values[:count + 1]).fits()
            continue
        fixed = dataclasses.replace(plan, **{fix.setting: fix.value})
        assert fixed.fits() and fix.value < getattr(plan, fix.setting), fix
        assert not dataclasses.replace(plan, **{fix.setting: fix.value + 1}).fits(), fix  # the largest


def test_a_fix_is_offered_only_for_a_setting_the_run_reads():
    single_draft = pre_start.Plan("generate", "qwen2.5-1.5b", ("sd",), 8, 8, 256)
    assert "num_drafts" not in {f.setting for f in pre_start.fixes(single_draft)}  # SD ignores K
    swept = pre_start.Plan("sweep", "default", ("spectr_gbv",), 2, 8, 256, repeats=10, axis="L", values=(2, 4, 8))
    assert "draft_length" not in {f.setting for f in pre_start.fixes(swept)}  # L is the sweep's own


def test_the_views_defaults_fit_and_are_not_refused():
    k, length, tokens = DEFAULT_SETTINGS
    for key in ("default", "toy", "two-token"):
        repeats = compare.default_repeats(key)
        values = tuple(float(v) for v in sweep.default_values(key, "K", len(DEFAULT_METHODS)).split(", "))
        for plan in (pre_start.Plan("generate", key, (DEFAULT_METHOD,), k, length, tokens),
                     pre_start.Plan("race", key, (DEFAULT_METHOD,), k, length, tokens),
                     pre_start.Plan("compare", key, DEFAULT_METHODS, k, length, tokens, repeats=repeats, coupled=True),
                     pre_start.Plan("sweep", key, DEFAULT_METHODS, k, length, tokens, axis="K", values=values,
                                    repeats=sweep.default_repeats(key, "K", len(DEFAULT_METHODS))),
                     pre_start.Plan("fidelity", key, (DEFAULT_METHOD,), k, length, 0,
                                    num_runs=fidelity.default_runs(key), num_tokens=3)):
            pre_start.check(plan)  # no refusal


# ------------------------------------------------------------------ the handlers refuse before any model call


def test_compare_over_budget_is_refused_before_any_model_call(no_model_calls):
    with pytest.raises(gr.Error) as refused:
        last(compare.compare("default", "Name a fruit.", list(DEFAULT_METHODS), 8, 8, 0.7, 256, 0, True, 1))
    assert "not started" in refused.value.message and "tokens per run" in refused.value.message
    assert not ENVIRONMENT_VARIABLE.search(refused.value.message)


@pytest.mark.parametrize("call", [
    lambda: sweep.run_sweep("default", "Name a fruit.", list(DEFAULT_METHODS[:3]), "K", "1, 2, 4, 8", 2, 4, 0.7, 200,
                            0, 3),
    lambda: fidelity.run_fidelity("default", "Name a fruit.", "spectr_gbv", 8, 8, 1.0, 300, 3),
    lambda: generate.generate_stream("qwen2.5-1.5b", "Name a fruit.", "spectr_gbv", 8, 8, 0.7, 256, 0),
    lambda: race.race_stream("qwen2.5-1.5b", "Name a fruit.", "spectr_gbv", 8, 8, 0.7, 256, 0),
], ids=["sweep", "fidelity", "generate", "race"])
def test_every_view_over_budget_is_refused_before_any_model_call(no_model_calls, call):
    with pytest.raises(gr.Error, match="so it was not started; each of these alone would fit") as refused:
        last(call())
    assert not ENVIRONMENT_VARIABLE.search(refused.value.message)


# ------------------------------------------------------------------ the page's note and buttons


def test_the_note_and_buttons_offer_the_fixes_and_a_button_sets_its_value():
    raw = dict(pair_key="default", methods=list(DEFAULT_METHODS), num_drafts=8, draft_length=8, max_new_tokens=256,
               repeats=1, coupled=True)
    note, *buttons = fix_buttons.updates("compare", raw)
    assert "Would not start" in note and "about 13 min" in note
    by_setting = dict(zip(fix_buttons.FIXABLE["compare"], buttons))
    tokens = next(f for f in pre_start.fixes(TOO_BIG_COMPARE) if f.setting == "max_new_tokens")
    assert by_setting["max_new_tokens"]["visible"] and by_setting["max_new_tokens"]["value"] == tokens.text
    assert not by_setting["repeats"]["visible"]  # one repeat already: nothing to lower
    apply = fix_buttons._applier("compare", list(raw), "max_new_tokens", None)
    assert apply(*raw.values()) == tokens.value
    fixed = raw | {"max_new_tokens": tokens.value}
    note, *buttons = fix_buttons.updates("compare", fixed)
    assert note == "" and not any(b["visible"] for b in buttons)  # fixed: the note goes


def test_the_note_stays_quiet_on_inputs_the_run_would_refuse_for_another_reason():
    note, *_ = fix_buttons.updates("sweep", dict(pair_key="default", methods=["sd"], num_drafts=2, draft_length=4,
                                                  max_new_tokens=40, repeats=1, axis="K", values="one, two"),
                                   sweep.parse_values)
    assert note == ""


# ------------------------------------------------------------------ budget stops in each view's words


def spent() -> BudgetSpent:
    budget = Budget(dataclasses.replace(Budget().limits, iterations=1))
    budget.tick()
    with pytest.raises(BudgetSpent) as error:
        budget.tick()
    return error.value


@pytest.mark.parametrize("view, says, never", [
    ("compare", "fewer tokens, methods or repeats", "sweep values"),
    ("generate", "fewer tokens", "sweep"),
    ("fidelity", "fewer runs or tokens compared", "sweep"),
    ("sweep", "fewer tokens, methods, values or repeats", "runs"),
])
def test_a_budget_stop_advises_what_the_view_can_change(view, says, never):
    text = budget_stop(view, 1, 4, "runs", spent()).reason
    assert says in text and never not in text and not ENVIRONMENT_VARIABLE.search(text)


def test_the_up_front_iteration_refusal_advises_what_compare_can_change(limits):
    limits(iterations=100)  # AR 42 and two methods and the coupled run at L = 1: at least 105 iterations
    with pytest.raises(gr.Error, match="needs at least 105 decoding iterations") as refused:
        last(compare.compare("toy", "the cat", ["sd", "gbv"], 2, 1, 0.7, 42, 0, True))
    assert refused.value.message.endswith("fewer tokens, methods or repeats, or a longer L")
    assert "values" not in refused.value.message
