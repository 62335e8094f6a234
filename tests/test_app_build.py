"""The app builds without launching, and its handler decodes on both model pairs."""

from __future__ import annotations

import gradio as gr
import pytest

import app
from spectr_gbv import METHODS
from spectr_gbv.toy import WORDS, toy_pair


def test_demo_builds():
    assert isinstance(app.build_demo(), gr.Blocks)


@pytest.mark.parametrize("method", ["ar", *METHODS])
def test_toy_world_colours_every_token_and_reports_metrics(method):
    html, metrics = app.run(app.TOY_WORLD, "the cat", method, 3, 4, 0.8, 25, 1)
    assert html.count('class="tok ') == 25 == metrics["new_tokens"]
    assert metrics["method"] == method and metrics["block_efficiency"] >= 1.0


def test_offline_default_pair_generates_text():
    html, metrics = app.run(app.DEFAULT_PAIR, "Name a fruit.", "spectr_gbv", 2, 3, 0.7, 6, 0)
    assert 1 <= metrics["new_tokens"] <= 6 and html.count('class="tok ') == metrics["new_tokens"]


@pytest.mark.parametrize(
    "pair, prompt, kwargs, message",
    [
        (app.TOY_WORLD, "", {}, "empty"),
        (app.DEFAULT_PAIR, "   ", {}, "empty"),
        (app.TOY_WORLD, "the zebra", {}, "zebra"),
        (app.TOY_WORLD, "the", {"num_drafts": 0}, "num_drafts"),
        (app.TOY_WORLD, "the", {"temperature": -1}, "temperature"),
        ("no such pair", "hello", {}, "unknown model pair"),
    ],
)
def test_bad_input_becomes_a_clear_ui_error(pair, prompt, kwargs, message):
    values = {"method": "spectr_gbv", "num_drafts": 2, "draft_length": 3, "temperature": 1.0, "max_new_tokens": 5, "seed": 0}
    values.update(kwargs)
    with pytest.raises(gr.Error, match=message):
        app.run(pair, prompt, **values)


def test_toy_world_distributions_are_proper():
    target, draft = toy_pair()
    for previous in range(len(WORDS)):
        for model in (target, draft):
            probs = model.next_token_probs([previous])
            assert probs.min() > 0 and abs(probs.sum().item() - 1) < 1e-12
