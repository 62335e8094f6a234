"""Choosing another pair in the sidebar: the prompt box gets a prompt that pair can read, and
Fidelity's N that pair's own default, so the next click runs and shows what the pair is for."""

from __future__ import annotations

import gradio as gr
import pytest

import app
from components.tabs import fidelity
from components.tabs.about import lossy_rows
from components.wiring.inputs import DEFAULT_K, DEFAULT_L, DEFAULT_T, EXAMPLES, prepare
from spectr_gbv.pairs import DEFAULT_KEY, TOY_KEY, TWO_TOKEN_KEY

RELEASED = "spectr_gbv_released"
DEFAULT_PROMPT = EXAMPLES[0][1]


@pytest.fixture(scope="module")
def page():
    demo = app.build_demo()

    def find(kind, **attrs):
        (block,) = [b for b in demo.blocks.values() if isinstance(b, kind)
                    and all(getattr(b, k, None) == v for k, v in attrs.items())]
        return block

    controls = dict(pair=find(gr.Dropdown, label="Model pair"), method=find(gr.Dropdown, label="Method (Generate, Fidelity, Race)"),
                    K=find(gr.Slider, elem_id="num-drafts"), L=find(gr.Slider, elem_id="draft-length"),
                    N=find(gr.Slider, elem_id="fidelity-runs"), tokens=find(gr.Slider, label="First tokens compared"),
                    prompt=find(gr.Textbox, label="Prompt"))
    return demo, controls


def after(page, event: str, output: str, **values):
    """What every handler of the pair's `event` leaves in `output`, with the page holding `values`."""
    demo, controls = page
    by_block = {block._id: name for name, block in controls.items()}
    handlers = [f for f in demo.fns.values()
                if (controls["pair"]._id, event) in f.targets and controls[output] in f.outputs]
    results = []
    for handler in handlers:
        answer = handler.fn(*(values[by_block[block._id]] for block in handler.inputs))
        answer = answer[handler.outputs.index(controls[output])] if len(handler.outputs) > 1 else answer
        results.append(answer.get("value") if isinstance(answer, dict) else answer)
    return results


SETTINGS = dict(method=RELEASED, K=DEFAULT_K, L=DEFAULT_L, tokens=3, prompt=DEFAULT_PROMPT)


@pytest.mark.unit
def test_choosing_the_two_token_example_sets_fidelity_n_to_its_own_default(page):
    left_from_default_pair = fidelity.default_runs(DEFAULT_KEY)
    values = after(page, "change", "N", pair=TWO_TOKEN_KEY, N=left_from_default_pair, **SETTINGS)
    own = fidelity.default_runs(TWO_TOKEN_KEY, RELEASED, DEFAULT_K, DEFAULT_L, 3)
    assert values and set(values) == {own} and own > left_from_default_pair


@pytest.mark.statistical
def test_the_released_rule_leaves_the_band_on_the_two_token_example_at_fidelitys_own_settings(page):
    (runs,) = set(after(page, "change", "N", pair=TWO_TOKEN_KEY, N=fidelity.default_runs(DEFAULT_KEY), **SETTINGS))
    *_, (header, _figure, data) = fidelity.run_fidelity(TWO_TOKEN_KEY, "A", RELEASED, DEFAULT_K, DEFAULT_L, DEFAULT_T,
                                                         runs, 3)
    assert data["within_noise"] is False and "is wider than" not in header
    assert "The bias being tested: this rule's exact TV here is" in header


@pytest.mark.statistical
def test_the_header_says_when_the_band_is_wider_than_the_bias_being_tested():
    *_, (header, _figure, data) = fidelity.run_fidelity(TWO_TOKEN_KEY, "A", RELEASED, DEFAULT_K, DEFAULT_L, DEFAULT_T,
                                                         129, 3)
    bias = fidelity.known_bias(TWO_TOKEN_KEY, RELEASED, fidelity.settings(DEFAULT_K, DEFAULT_L, DEFAULT_T, 1, 0), 3)
    assert data["noise_tv_95"] > bias > 0.05
    assert f"At N = 129 the noise band ({data['noise_tv_95']:.3f}) is wider than the bias being tested" in header
    assert f"exact TV here: {bias:.3f}" in header
    # an exact rule has no bias to miss: its measured TV is named sampling noise, beside its band
    *_, (exact_header, _f, _d) = fidelity.run_fidelity(TWO_TOKEN_KEY, "A", "spectr_gbv", DEFAULT_K, DEFAULT_L, DEFAULT_T,
                                                       20, 3)
    assert "bias being tested" not in exact_header and "An exact rule's true TV is 0" in exact_header


@pytest.mark.unit
def test_the_bias_under_test_is_the_released_rules_exact_one():
    base = fidelity.settings(1, 2, 1.0, 1, 0)
    k1 = next(row for row in lossy_rows() if row[0] == 1)  # the About table's K = 1, L = 2: 3 tokens
    assert fidelity.known_bias(TWO_TOKEN_KEY, RELEASED, base, 3) == pytest.approx(k1[4]) == pytest.approx(1 / 9)
    assert fidelity.known_bias(TWO_TOKEN_KEY, "spectr_gbv", base, 3) == 0.0  # an exact rule's
    assert fidelity.known_bias(TOY_KEY, RELEASED, fidelity.settings(2, 4, 1.0, 1, 0), 3) is None  # 8^8 draft pairs


@pytest.mark.unit
@pytest.mark.parametrize("pair, prompt, expected", [
    (TWO_TOKEN_KEY, DEFAULT_PROMPT, "A"),  # a prompt the pair cannot read: its own example
    (TOY_KEY, DEFAULT_PROMPT, "the cat"),
    (TOY_KEY, "A", "the cat"),
    (TOY_KEY, "The dog sat.", "The dog sat."),  # one it reads stays
    (DEFAULT_KEY, "the cat", DEFAULT_PROMPT),  # back from a teaching pair: the default prompt
    (DEFAULT_KEY, "A B", DEFAULT_PROMPT),
    (DEFAULT_KEY, "Tell me about cats.", "Tell me about cats."),  # a model pair keeps the user's text
    (TOY_KEY, "", "the cat"),
])
def test_choosing_a_pair_gives_the_prompt_box_a_prompt_it_can_read(page, pair, prompt, expected):
    values = after(page, "input", "prompt", pair=pair, prompt=prompt, **{k: v for k, v in SETTINGS.items() if k != "prompt"})
    assert values == [expected]
    if pair != DEFAULT_KEY:
        prepare(pair, expected)  # the next Generate reads it
