"""Speed over a prompt set on a real model pair (the shipped default pair): independent runs time every rule on
each prompt against AR on that prompt just before and after, and the set's speedup is the geometric mean of
the prompts' with the 95 % interval of their logs; a coupled run times no rule alone and says so."""

from __future__ import annotations

import math

import pytest

from components.tabs import compare
from helpers import last

pytestmark = pytest.mark.model

METHODS = ["sd", "spectr_gbv"]


def test_an_independent_set_on_a_model_pair_times_every_rule_on_every_prompt():
    outputs = last(compare.compare("default", "", METHODS, 2, 2, 0.7, 6, 0, False, 2, "suite-5", ""))
    data = outputs.data
    assert not data["stopped"] and "Speed: every rule timed on each prompt" in outputs.texts
    rows = {row["method"]: row for row in data["table"]}
    for method in METHODS:
        speed = data["set_speedups"][method]
        per_prompt = speed["per_prompt"]
        assert speed["prompts"] == 5 and len(per_prompt) == 5 and all(v > 0 for v in per_prompt)
        assert speed["geometric_mean"] == pytest.approx(math.exp(sum(map(math.log, per_prompt)) / 5))
        assert speed["low"] < speed["geometric_mean"] < speed["high"]
        assert rows[method]["speedup_per_prompt"] == per_prompt  # the download's row holds them too
    drawn = {(t.name, len(t.y)) for t in outputs.speedup.data}  # per rule: a dot per prompt, then the mean
    assert drawn == {("SD", 5), ("SD", 1), ("SpecTr-GBV", 5), ("SpecTr-GBV", 1)}
    assert outputs.speedup.layout.title.text == "Wall-clock speedup over the prompt set"


def test_a_coupled_set_on_a_model_pair_says_why_it_draws_no_speed():
    outputs = last(compare.compare("default", "", METHODS, 2, 2, 0.7, 4, 0, True, 1, "suite-5", ""))
    assert outputs.data["set_speedups"] is None and "untick Coupled to time each rule" in outputs.texts
