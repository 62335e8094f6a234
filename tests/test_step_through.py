"""The explorer's step-through (components.render.step_through) and its handlers, on real records:
Toy-world runs of every verifier. Each stage shows the record's own numbers: one stage per test
with its coin and h, the first failed test as the failure, the record's tau and final token."""

from __future__ import annotations

import re

import gradio as gr
import pytest

from components.render.step_through import (STAGE_KINDS, first_failure, shown_number, stage_count, stages,
                                            step_through_html)
from components.render.text import visible_token
from components.tabs import explorer_inside, generate

pytestmark = pytest.mark.unit

METHODS = ("sd", "rrs", "spectr", "gbv", "spectr_gbv", "as_bv", "traversal", "spectr_gbv_released")


def run(method: str, num_drafts: int = 3, draft_length: int = 3, seed: int = 1, tokens: int = 30):
    *_, final = generate.generate_stream("toy", "the cat", method, num_drafts, draft_length, 1.0, tokens, seed)
    return final[3]  # the session's RunState


@pytest.fixture(scope="module")
def runs():
    return {(m, k): run(m, k) for m in METHODS for k in (1, 3)}


def attribute(html: str, name: str) -> str:
    return re.search(rf'data-{name}="([^"]*)"', html).group(1)


def test_every_iteration_has_drafts_tests_decision_distribution_and_final_in_order(runs):
    for state in runs.values():
        for it in state.record.iterations:
            every = stages(it, state.token_text, state.record.config.method)
            assert len(every) == stage_count(it) == len(it.tests) + 4
            assert [s.kind for s in every] == ["drafts", *["test"] * len(it.tests), "decision", "distribution", "final"]
            assert set(s.kind for s in every) <= set(STAGE_KINDS)


def test_each_test_stage_shows_the_records_coin_and_h_and_its_verdict(runs):
    seen = {"passes": 0, "fails": 0, "skipped": 0}
    for state in runs.values():
        for it in state.record.iterations:
            test_stages = [s for s in stages(it, state.token_text) if s.kind == "test"]
            for j, (stage, test) in enumerate(zip(test_stages, it.tests)):
                assert stage.test is test and stage.title == f"Test {j + 1} of {len(it.tests)}"
                data = dict(stage.data)
                assert data["draft"] == str(test.draft + 1) and data["end"] == str(test.start + test.length)
                assert data["eta"] == shown_number(test.uniform) and data["accepted"] == str(test.accepted).lower()
                if test.accept_prob is None:  # a block rule's bound decided it: no h to show
                    assert data["h"] == "" and "not computed" in stage.body and not test.accepted
                    seen["skipped"] += 1
                    continue
                assert data["h"] == shown_number(test.accept_prob)
                sign = "<" if test.uniform < test.accept_prob else "≥"
                # The coin decides the test as the record says: passes exactly when eta < h.
                assert f"η = <b>{data['eta']}</b> {sign} h = <b>{data['h']}</b>" in stage.body
                verdict = "passes" if test.accepted else "fails"
                assert f"the test <b>{verdict}</b>" in stage.body and (sign == "<") == test.accepted
                seen[verdict] += 1
    assert min(seen.values()) > 0, seen  # the sample has passed, failed and skipped tests


def test_the_failure_stage_names_the_first_failed_test_and_the_records_tau(runs):
    failures = longest_success = 0
    for state in runs.values():
        for it in state.record.iterations:
            (decision,) = [s for s in stages(it, state.token_text) if s.kind == "decision"]
            data = dict(decision.data)
            assert data["tau"] == str(it.num_accepted) and f"τ = <b>{it.num_accepted}</b>" in decision.body
            failed = [j for j, t in enumerate(it.tests) if not t.accepted]
            if not failed:
                assert first_failure(it) is None and decision.test is None and "No test failed" in decision.body
                assert it.final_kind == "bonus"
                continue
            failures += 1
            j = failed[0]
            assert decision.test is it.tests[j] and data["failed-test"] == str(j + 1)
            assert f"The first failure: test {j + 1}, draft {it.tests[j].draft + 1}" in decision.body
            if any(t.accepted for t in it.tests[j + 1:]):
                longest_success += 1
                assert "longest success" in decision.body
    assert failures > 0 and longest_success > 0


def test_the_distribution_stage_turns_q_minus_p_into_the_residual_shown(runs):
    corrections = 0
    for state in runs.values():
        for it in state.record.iterations:
            (stage,) = [s for s in stages(it, state.token_text, state.record.config.method) if s.kind == "distribution"]
            rows = re.findall(r"<tr>(.*?)</tr>", stage.body.split("<tbody>")[1])
            cells = [re.findall(r"<td>(.*?)</td>", row) for row in rows]
            tops = state.token_text([t.token for t in it.final_top])
            assert [c[0] for c in cells] == [visible_token(t) for t in tops]
            if it.final_kind == "bonus":
                assert [c[1] for c in cells] == [shown_number(t.target_prob) for t in it.final_top]
                continue
            corrections += 1
            for c, top in zip(cells, it.final_top):
                q, p = top.target_prob, top.draft_prob
                assert c[1] == shown_number(q) and c[4] == shown_number(top.final_prob)
                if p is not None:
                    assert c[2] == shown_number(p) and c[3] == shown_number(max(q - p, 0.0))
            if state.record.config.method == "sd":  # SD's residual is norm((q - p)+): zero where p >= q
                assert all(c[4] == shown_number(0.0) for c, t in zip(cells, it.final_top)
                           if t.draft_prob is not None and t.draft_prob >= t.target_prob)
    assert corrections > 0


def test_the_final_stage_shows_the_records_final_token_and_what_was_emitted(runs):
    for state in runs.values():
        for it in state.record.iterations:
            final = stages(it, state.token_text)[-1]
            (text,) = state.token_text([it.final_token])
            assert dict(final.data) == {"final-token": visible_token(text), "final-kind": it.final_kind,
                                        "tau": str(it.num_accepted)}
            assert f"<b>{visible_token(text)}</b>, a <b>{it.final_kind}</b>" in final.body
            assert f"position {it.num_accepted + 1}" in final.body


def test_the_html_says_which_stage_of_how_many_and_clamps(runs):
    state = runs[("gbv", 1)]
    it = state.record.iterations[0]
    n = stage_count(it)
    for index, shown in ((0, 1), (2, 3), (n - 1, n), (n + 5, n), (-3, 1)):
        page = step_through_html(it, state.token_text, "gbv", index)
        assert attribute(page, "stage") == str(shown) and attribute(page, "stages") == str(n)
        assert f"Step {shown} of {n}" in page and page.count("step-dot-now") == 1


def test_a_plain_ar_step_has_no_drafts_and_its_sample(runs):
    state = run("ar", 1, 1, tokens=4)
    it = state.record.iterations[0]
    every = stages(it, state.token_text, "ar")
    assert [s.kind for s in every] == ["drafts", "final"] == [s.kind for s in every][: stage_count(it)]
    assert dict(every[-1].data)["final-kind"] == "target"


def test_a_cut_last_iteration_says_so():
    """Max new tokens 2 with L = 4: the first iteration is cut whenever it emits more than 2 tokens."""
    state = next(s for s in (run("sd", 1, 4, seed, tokens=2) for seed in range(1, 20))
                 if len(s.record.iterations[-1].emitted) < s.record.iterations[-1].num_accepted + 1)
    n, it = len(state.record.iterations), state.record.iterations[-1]
    final = stages(it, state.token_text, "sd", "Max new tokens")[-1]
    assert f"only the first {len(it.emitted)} of these {it.num_accepted + 1} token(s)" in final.body
    # The handlers pass the cut on: the last stage of the run's last iteration says it.
    assert "Cut by Max new tokens" in explorer_inside.step(state, n, stage_count(it) - 2, 1).steps
    assert "Cut by" not in stages(it, state.token_text, "sd")[-1].body  # not the last iteration: nothing cut


def test_the_handlers_follow_the_iteration_and_step_within_it(runs):
    state = runs[("spectr_gbv", 3)]
    n_iterations = len(state.record.iterations)
    for index in (1, 2, n_iterations):
        it = state.record.iterations[index - 1]
        shown = explorer_inside.follow(state, index)
        assert shown.stage == 0 and attribute(shown.steps, "stage") == "1"
        assert attribute(shown.tree, "iteration") == str(index)
        stage, visited = 0, []
        for _ in range(stage_count(it) + 2):  # past the last stage: it stays there
            stepped = explorer_inside.step(state, index, stage, 1)
            stage = stepped.stage
            visited.append(attribute(stepped.steps, "kind"))
        assert stage == stage_count(it) - 1 and visited[-1] == visited[-2] == "final"
        assert explorer_inside.step(state, index, stage, -1).stage == stage - 1
        assert explorer_inside.step(state, index, stage, None).stage == 0
    assert explorer_inside.follow(None, 1).steps == explorer_inside.EMPTY_STEPS


@pytest.mark.parametrize("stage", ["x", 1.5, [3], -2])
def test_a_bad_stage_gets_words_not_a_crash(runs, stage):
    with pytest.raises(gr.Error, match="the step"):
        explorer_inside.step(runs[("sd", 1)], 1, stage, 1)


def test_sds_h_is_read_as_the_ratio_of_the_tested_token(runs):
    """SD's tests are ratio tests: h = min(1, q/p) of the sub-block's last token, and the stage says so."""
    shown = 0
    for it in runs[("sd", 1)].record.iterations:
        for stage in stages(it, runs[("sd", 1)].token_text, "sd"):
            if stage.kind == "test" and stage.test.accept_prob is not None:
                assert "h = min(1, q/p): the ratio test of this token" in stage.body
                shown += 1
    assert shown > 0
