"""The Lesson's step on K drafts: every number in its text is one its "try it" shows.

The try-it runs SpecTr with K = 3, L = 1 on the Toy world in Generate and opens the explorer
on iteration 1; the text quotes that iteration's drafted words, draft 1's p and q (the grid's
cell), the chance SpecTr with one draft keeps it (min(1, q/p), the grid's q/p), and
E[tau | drafts] for the three drafts (the grid's caption)."""

from __future__ import annotations

import re

import pytest

from components.tabs import generate, lesson, lesson_drafts, lesson_try
from spectr_gbv.pairs import TOY_KEY

pytestmark = pytest.mark.unit


@pytest.fixture(scope="module")
def shown():
    """What the step's try-it shows: (its plan, the run's first iteration, the explorer's grid, the step's text)."""
    plan = lesson_try.try_its()[lesson_drafts.STEP]
    v = plan.values
    final = list(generate.generate_stream(v["pair"], v["prompt"], v["method"], v["K"], v["L"], v["T"], v["tokens"],
                                          v["seed"]))[-1]
    title, text = lesson.step_texts()[lesson_drafts.STEP]
    assert title == lesson_drafts.TITLE
    return plan, final.state.record.iterations[0], final.grid, " ".join(text.split())  # the text, one line


def test_the_try_it_runs_spectr_with_three_drafts_in_the_explorer(shown):
    plan, *_ = shown
    assert plan.tab == "explorer" and plan.press == "generate-button"
    assert {k: plan.values[k] for k in ("pair", "method", "K", "L")} == {"pair": TOY_KEY, "method": "spectr", "K": 3,
                                                                        "L": 1}
    assert plan.values["seed"] == lesson_drafts.second_draft_seed()


def test_the_iteration_is_the_one_the_text_describes(shown):
    plan, it, grid, text = shown
    words = [generate_word(row[0]) for row in it.draft_tokens]
    assert it.num_accepted == 1 and it.winning_draft >= 1 and words[it.winning_draft] != words[0]
    assert f"tau = 1 of 1 accepted from draft {it.winning_draft + 1}" in grid
    assert f"the drafts are *{words[0]}*, *{words[1]}* and *{words[2]}*" in text
    assert f"Here draft 1 was rejected and draft {it.winning_draft + 1}'s *{words[it.winning_draft]}* was kept" in text


def generate_word(token: int) -> str:
    from spectr_gbv.pairs import get_pair

    return get_pair(TOY_KEY).token_text([token])[0]


def test_every_number_in_the_text_is_shown_by_the_try_it(shown):
    plan, it, grid, text = shown
    p, q = it.draft_token_probs[0][0], it.target_token_probs[0][0]
    # the grid's cell of draft 1 shows p, q and q/p; its caption E[tau | drafts]
    assert f"p = {p:.4f}, q = {q:.4f}, q/p = {q / p:.3f}" in grid
    assert f"Theory E[tau | drafts] = {it.expected_accepted:.3f}" in grid
    # the chance one draft is kept, from SpecTr's own expected_accepted on draft 1 alone, is min(1, q/p)
    alone = lesson_drafts.alone(it.draft_tokens[0][0])
    assert alone == pytest.approx(min(1.0, q / p), abs=1e-12)
    assert f"p = {p:.4f} and q = {q:.4f}" in text
    assert f"min(1, q/p) = **{min(1.0, q / p):.3f}**" in text
    assert f"E[tau | drafts] = {it.expected_accepted:.3f}" in text
    assert it.expected_accepted >= alone + lesson_drafts.MARGIN  # the point: three chances beat one
    v = plan.values
    allowed = {f"{p:.4f}", f"{q:.4f}", f"{min(1.0, q / p):.3f}", f"{it.expected_accepted:.3f}", str(v["K"]),
               str(v["L"]), f"{v['T']:g}", str(v["seed"]), "1", str(it.winning_draft + 1)}  # "1": K = 1, draft 1
    numbers = re.findall(r"\d+(?:\.\d+)?", text)
    assert numbers and set(numbers) <= allowed, set(numbers) - allowed
    assert f"K = {v['K']}" in text and f"L = {v['L']}" in text and f"seed {v['seed']}" in text


def test_the_step_follows_the_others_with_its_own_try_it():
    texts, plans = lesson.step_texts(), lesson_try.try_its()
    assert list(texts) == list(plans) == [1, 2, 3, 4, 5, lesson_drafts.STEP]
    assert "K = 3" in plans[lesson_drafts.STEP].label


def test_a_click_on_a_later_steps_number_selects_that_step_and_junk_is_refused():
    import gradio as gr

    class Event:  # what gr.EventData keeps of the page's {index}
        def __init__(self, data):
            self._data = data

    assert lesson.go_to_step(Event({"index": 4})).selected == 4
    for junk in (None, {}, {"index": 0}, {"index": 7}, {"index": "3"}, {"index": True}, [3]):
        with pytest.raises(ValueError, match="a step of the lesson is a number from 1 to 6"):
            lesson.go_to_step(Event(junk))
    assert isinstance(lesson.go_to_step(Event({"index": 1})), gr.Walkthrough)
