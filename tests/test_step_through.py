"""The explorer's step-through (components.render.step_through) and its handlers, on real records:
Toy-world runs of every verifier. Each stage shows the record's own numbers: one stage per test
with its coin and h, the first failed test as the failure, the record's tau and final token.
Hand-made records pin the words each rule needs: a block rule's failed prefix, AS-BV+H's
hand-off, the residual per rule, a cut iteration's count."""

from __future__ import annotations

import re

import gradio as gr
import pytest

from components.render.step_through import (STAGE_KINDS, first_failure, shown_number, stage_count, stages,
                                            step_through_html)
from components.render.text import visible_token
from components.tabs import explorer_inside, generate
from spectr_gbv.methods.base import SubBlockTest
from spectr_gbv.records import IterationRecord, TopToken
from spectr_gbv.toy import decode

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
                                        "tau": str(it.num_accepted), "emitted": str(len(it.emitted))}
            assert f"<b>{visible_token(text)}</b>, a <b>{it.final_kind}</b>" in final.body
            assert f"emitted <b>{len(it.emitted)}</b> token(s) into the output" in final.body
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


# ------------------------------------------------------------------ what each rule's words say


def record(tests, tau, winner, kind, drafts=((1, 2, 3, 4), (1, 5, 6, 7)), emitted=None):
    """A hand-made iteration (token ids index the Toy vocabulary), L = 4; the final token is 0 ("the")."""
    made = [*(drafts[winner][:tau] if winner is not None else []), 0]
    return IterationRecord(
        index=0, draft_tokens=[list(r) for r in drafts], draft_token_probs=[[0.5] * 4 for _ in drafts],
        target_token_probs=[[0.609] * 4 for _ in drafts], num_accepted=tau, winning_draft=winner,
        accepted_tokens=made[:-1], final_token=0, final_kind=kind, emitted=made if emitted is None else emitted,
        tests=tests, final_top=[TopToken(0, 0.6, 0.3, None if kind == "bonus" else 0.1)])


def test_a_block_rules_failed_prefix_says_a_longer_prefix_can_still_pass_and_kept_it():
    """GBV: prefix 1..2 fails (eta 0.718 >= h 0.606) but 1..3 passes, so token 2 is kept; 1..4 fails with no longer
    prefix left. SD's failed test has none of these words: a token rule's failure rejects the token."""
    tests = [SubBlockTest(0, 0, 1, 0.9, True, 0.1), SubBlockTest(0, 0, 2, 0.606, False, 0.718),
             SubBlockTest(0, 0, 3, 0.8, True, 0.2), SubBlockTest(0, 0, 4, 0.3, False, 0.9)]
    it = record(tests, 3, 0, "correction", drafts=((1, 2, 3, 4),))
    test_stages = [s for s in stages(it, decode, "gbv") if s.kind == "test"]
    second, fourth = test_stages[1].body, test_stages[3].body
    assert "the test <b>fails</b>" in second and "does not reject this token" in second
    assert "a longer prefix (up to token 4) can still pass" in second
    assert "test 3 (tokens 1..3) passes, so token 2 is <b>kept</b> because a longer prefix passed" in second
    assert "does not reject this token" in fourth and "no longer prefix of draft 1 is tested after" in fourth
    assert "kept" not in fourth.split("step-aside")[0]  # token 4 was not kept
    assert "does not reject" not in test_stages[0].body  # a passed test needs no such words
    sd = [s for s in stages(it, decode, "sd") if s.kind == "test"]
    assert not any("does not reject" in s.body for s in sd)


def test_real_block_runs_explain_every_failed_prefix(runs):
    """On real GBV, SpecTr-GBV and AS-BV runs every failed prefix test says it rejects no token by itself."""
    seen = 0
    for (method, _), state in runs.items():
        if method not in ("gbv", "spectr_gbv", "as_bv"):
            continue
        for it in state.record.iterations:
            for stage in stages(it, state.token_text, method):
                if stage.kind == "test" and not stage.test.accepted:
                    assert "does not reject this token" in stage.body
                    seen += 1
    assert seen > 0


def handoff_record(taken: bool):
    """AS-BV+H at K = 2, L = 4: the check on draft 1 passes prefix 1..1 and 1..3 (so token 2 is kept although 1..2
    failed), fails 1..4, and hands off at position 4 to draft 2 (rejected); or (taken) it keeps 1 token, draft 2's
    offer at position 2 is accepted, and GBV goes on along draft 2 for one more token."""
    if not taken:
        tests = [SubBlockTest(0, 0, 1, 0.9, True, 0.1), SubBlockTest(0, 0, 2, 0.606, False, 0.718),
                 SubBlockTest(0, 0, 3, 0.8, True, 0.2), SubBlockTest(0, 0, 4, 0.3, False, 0.9),
                 SubBlockTest(1, 3, 1, 0.4, False, 0.5)]
        return record(tests, 3, 0, "correction", drafts=((1, 2, 3, 4), (1, 2, 3, 5)))
    tests = [SubBlockTest(0, 0, 1, 0.9, True, 0.1), *(SubBlockTest(0, 0, n, 0.2, False, 0.7) for n in (2, 3, 4)),
             SubBlockTest(1, 1, 1, 0.7, True, 0.3), SubBlockTest(1, 2, 1, 0.8, True, 0.1),
             SubBlockTest(1, 2, 2, 0.1, False, 0.6)]
    return record(tests, 3, 1, "correction")


def test_as_bv_handoff_names_its_handoff_and_its_failed_prefixes():
    it = handoff_record(taken=False)
    every = stages(it, decode, "as_bv_handoff")
    test_stages = [s for s in every if s.kind == "test"]
    assert "token 2 is <b>kept</b> because a longer prefix passed" in test_stages[1].body
    offer = test_stages[4]
    assert offer.title == "Test 5 of 5, hand-off: draft 2 offers “" + visible_token(decode([5])[0]) + "”"
    assert dict(offer.data)["handoff"] == "true" and "<b>Hand-off</b>" in offer.body
    assert "The offer is <b>rejected</b>" in offer.body and "does not reject" not in offer.body
    assert all("hand-off" not in s.title for s in test_stages[:4])
    (decision,) = [s for s in every if s.kind == "decision"]
    assert "Hand-off: AS-BV chose draft 1" in decision.body
    taken = [s for s in stages(handoff_record(taken=True), decode, "as_bv_handoff") if s.kind == "test"]
    assert "hand-off: draft 2 offers" in taken[4].title and "The offer is <b>accepted</b>" in taken[4].body
    assert "hand-off" not in taken[5].title and "hand-off" not in taken[6].title  # GBV on the rest of draft 2


def test_a_real_handoff_is_named_where_it_happens():
    """A seeded AS-BV+H run on the Toy world (the app's K = 2, L = 4) whose iteration hands off: the offer's stage."""
    from components.render.handoff_story import read_handoff
    from spectr_gbv import generate as generate_run
    from spectr_gbv.toy import encode, toy_pair

    target, draft = toy_pair()
    for seed in range(60):
        run_ = generate_run(target, draft, encode("the cat"), method="as_bv_handoff", num_drafts=2, draft_length=4,
                            temperature=1.0, max_new_tokens=12, seed=seed)
        found = [(it, h) for it in run_.iterations if (h := read_handoff(it)) is not None and h.offers]
        if found:
            break
    it, handoff = found[0]
    offers = [s for s in stages(it, decode, "as_bv_handoff") if s.kind == "test" and "hand-off" in s.title]
    assert len(offers) == len(handoff.offers)
    for stage, test in zip(offers, handoff.offers):
        assert stage.test is test and f"hand-off: draft {test.draft + 1} offers" in stage.title
    assert not any("hand-off" in s.title for s in stages(it, decode, "as_bv") if s.kind == "test")


def residual_stage(it, method: str, token_text=decode):
    (stage,) = [s for s in stages(it, token_text, method) if s.kind == "distribution"]
    return stage


def test_the_residual_stage_is_titled_for_the_rule_shown(runs):
    """SD subtracts p: "q − p becomes the residual". GBV and AS-BV+H subtract what their law subtracts: never titled
    q − p, said in words first, the formula after them."""
    it = record([SubBlockTest(0, 0, 1, 0.3, False, 0.9)], 0, None, "correction", drafts=((1, 2, 3, 4),))
    sd = residual_stage(it, "sd")
    assert sd.title == "q − p becomes the residual" and dict(sd.data)["subtracts"] == "p"
    gbv = residual_stage(it, "gbv")
    assert gbv.title == "GBV's leftover becomes the residual" and "q − p" not in gbv.title
    assert gbv.body.index("GBV kept τ = 0") < gbv.body.index("In symbols:")  # words, then the formula
    assert "the q − p column is only to compare" in gbv.body and "max(q − p, 0), to compare" in gbv.body
    assert residual_stage(handoff_record(False), "as_bv_handoff").title == (
        "The leftover after the hand-off becomes the residual")
    taken = residual_stage(handoff_record(True), "as_bv_handoff")
    assert taken.title == "GBV's leftover on draft 2 becomes the residual"
    alone = record([SubBlockTest(0, 0, n, 0.2, False, 0.7) for n in (1, 2, 3, 4)], 0, None, "correction")
    assert residual_stage(alone, "as_bv_handoff").title == "AS-BV's leftover becomes the residual"
    for (method, _), state in runs.items():  # real runs: only SD (and RRS) are titled q − p
        for real in state.record.iterations:
            if real.final_kind == "correction":
                title = residual_stage(real, method, state.token_text).title
                assert ("q − p" in title) == (method in ("sd", "rrs")), (method, title)


def test_a_cut_iteration_counts_what_reached_the_output():
    """tau = 1 makes 2 tokens; Max new tokens let 1 through: the iteration emitted 1, as the output has."""
    it = record([SubBlockTest(0, 0, 1, 0.9, True, 0.1), SubBlockTest(0, 0, 2, 0.2, False, 0.7)], 1, 0, "correction",
                drafts=((1, 2, 3, 4),), emitted=[1])
    final = stages(it, decode, "as_bv_handoff", "Max new tokens")[-1]
    assert dict(final.data)["emitted"] == "1"
    assert "emitted <b>1</b> token(s) into the output" in final.body and "2 token(s)" not in final.body.split("Cut")[0]
    assert "Cut by Max new tokens: the rule made 2 token(s)" in final.body
    assert "only the first 1 of these 2 token(s) are in the output" in final.body
    whole = stages(record(it.tests, 1, 0, "correction", drafts=((1, 2, 3, 4),)), decode, "as_bv_handoff")[-1]
    assert "emitted <b>2</b> token(s) into the output" in whole.body and "Cut" not in whole.body


def test_predicting_folds_each_tests_coin_and_verdict_under_a_question_and_changes_nothing_else(runs):
    """Predict, then reveal: a test stage shows the tokens, q and p, asks "kept or not?", and only
    inside the folded part says the coin, h and whether the test passed; every other stage is as it was."""
    from components.render.step_through import PREDICT_QUESTION, REVEAL

    folded = 0
    for (method, _), state in runs.items():
        for it in state.record.iterations:
            told = stages(it, state.token_text, method)
            asked = stages(it, state.token_text, method, predict=True)
            for plain, pause in zip(told, asked):
                if plain.kind != "test":
                    assert pause == plain
                    continue
                assert dict(pause.data)["predict"] == "true" and "predict" not in dict(plain.data)
                before, after = pause.body.split(f"<summary>{REVEAL}</summary>")
                assert PREDICT_QUESTION in before and "q = " in before and "p = " in before
                verdict = re.search(r"the test <b>(passes|fails)</b>|so the test (passes|fails)|the record says it",
                                    plain.body)
                assert verdict and verdict.group(0) in after and verdict.group(0) not in before
                assert "η" not in before  # the coin is part of the answer
                folded += 1
    assert folded > 50


def test_the_predict_box_reaches_the_handlers(runs):
    state = runs[("sd", 3)]
    it = state.record.iterations[0]
    assert it.tests
    asked = explorer_inside.step(state, 1, 0, 1, True)  # the first test
    told = explorer_inside.step(state, 1, 0, 1, False)
    assert attribute(asked.steps, "kind") == "test" and 'class="step-reveal"' in asked.steps
    assert 'class="step-reveal"' not in told.steps and asked.stage == told.stage == 1
    again = explorer_inside.step(state, 1, 1, 0, True)  # the box ticked: the same stage, now asked
    assert again.stage == 1 and again.steps == asked.steps
    assert 'data-predict="true"' not in explorer_inside.follow(state, 1, True).steps  # the drafts: nothing to ask
