"""The app builds without launching, and its handler runs the Toy world for every method."""

from __future__ import annotations

import gradio as gr
import pytest

import app
from spectr_gbv import METHODS
from spectr_gbv.toy import WORDS, toy_pair


def test_demo_builds():
    assert isinstance(app.build_demo(), gr.Blocks)


@pytest.mark.parametrize("method", ["ar", *METHODS])
def test_handler_colours_every_token_and_reports_metrics(method):
    html, metrics = app.run_toy("the cat", method, 3, 4, 0.8, 25, 1)
    assert html.count('class="tok ') == 25 == metrics["new_tokens"]
    assert metrics["method"] == method and metrics["block_efficiency"] >= 1.0


@pytest.mark.parametrize(
    "prompt, kwargs, message",
    [("", {}, "prompt_ids"), ("the zebra", {}, "zebra"), ("the", {"num_drafts": 0}, "num_drafts")],
)
def test_bad_input_becomes_a_clear_ui_error(prompt, kwargs, message):
    values = {"method": "spectr_gbv", "num_drafts": 2, "draft_length": 3, "temperature": 1.0, "max_new_tokens": 5, "seed": 0}
    values.update(kwargs)
    with pytest.raises(gr.Error, match=message):
        app.run_toy(prompt, **values)


def test_toy_world_distributions_are_proper():
    target, draft = toy_pair()
    for previous in range(len(WORDS)):
        for model in (target, draft):
            probs = model.next_token_probs([previous])
            assert probs.min() > 0 and abs(probs.sum().item() - 1) < 1e-12
