"""Where an iteration's time goes (`spectr_gbv.bench.phases`), on the Toy world: the phases are
the detailed loop's own timings, the rest is the wall time they leave, the counts are the runs'."""

from __future__ import annotations

import pytest

from spectr_gbv import generate
from spectr_gbv.bench.phases import Phases, markdown, measure
from spectr_gbv.pairs import TOY_KEY, get_pair

pytestmark = pytest.mark.unit


def test_the_phases_are_the_detailed_loops_timings_and_the_rest_what_they_leave():
    pair = get_pair(TOY_KEY)
    prompts = [pair.encode("the cat"), pair.encode("the dog")]
    phases = measure(pair.target, pair.draft, prompts, "spectr_gbv", 2, 3, 0.9, 12, rounds=1)
    runs = [generate(pair.target, pair.draft, ids, method="spectr_gbv", num_drafts=2, draft_length=3, temperature=0.9,
                     max_new_tokens=12, seed=seed, with_theory=False) for seed, ids in enumerate(prompts)]
    assert phases.iterations == sum(len(r.iterations) for r in runs)
    assert phases.tokens == sum(len(r.tokens) for r in runs)
    assert min(phases.draft_ms, phases.score_ms, phases.verify_ms) >= 0 and phases.draft_ms > 0 and phases.verify_ms > 0
    assert phases.rest_ms > 0  # the session's start and the commits are timed by no phase
    plain = measure(pair.target, None, prompts, "ar", 0, 0, 0.9, 12, rounds=1)
    assert plain.draft_ms == plain.verify_ms == 0 and plain.score_ms > 0 and plain.iterations == plain.tokens


def test_the_table_gives_each_run_in_plain_decoding_steps():
    rows = [Phases("ar", 0, 0, 10, 10, 0.0, 30.0, 0.0, 2.0), Phases("sd", 1, 4, 5, 11, 8.0, 40.0, 1.0, 15.0)]
    text = markdown(rows, "header")
    assert text.startswith("header\n")
    assert "| ar | 0 | 0 | 1.00 | 0.0 | 30.0 | 0.0 | 2.0 | 32.0 | 1.00 |" in text
    assert "| sd | 1 | 4 | 2.20 | 8.0 | 40.0 | 1.0 | 15.0 | 64.0 | 2.00 |" in text
