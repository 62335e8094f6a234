"""Shareable links (components.share): a link's values are read with a message for each bad
one, never an exception, and the link the app writes restores what it was written from."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest
from hypothesis import given, settings, strategies as st

from components.wiring.inputs import example_prompt
from components.wiring.share import KEYS, TABS, link_query, note_markdown, read_link

pytestmark = pytest.mark.unit


def test_a_good_link_sets_every_value():
    values, problems = read_link({"pair": "toy", "prompt": "the cat", "method": "sd", "K": "3", "L": "5",
                                  "T": "0.3", "seed": "12", "tab": "compare"})
    assert problems == []
    assert values == {"pair": "toy", "prompt": "the cat", "method": "sd", "K": 3, "L": 5, "T": 0.3, "seed": 12,
                      "tab": "compare"}


def test_tabs_by_id_or_by_name_and_pairs_by_label():
    from spectr_gbv.pairs import PAIRS

    assert read_link({"tab": "Iteration explorer"})[0] == {"tab": "explorer"}
    assert read_link({"tab": "FIDELITY"})[0] == {"tab": "fidelity"}
    assert read_link({"pair": PAIRS["two-token"].label})[0] == {"pair": "two-token",
                                                                 "prompt": example_prompt("two-token")}


@pytest.mark.parametrize("params, named", [
    ({"K": "99"}, "K (drafts) must be in [1, 8]"),
    ({"K": "two"}, "K (drafts) must be a number"),
    ({"L": "2.5"}, "L (draft length) must be a whole number"),
    ({"T": "nan"}, "T (temperature) must be in"),
    ({"seed": "-1"}, "seed must be in"),
    ({"method": "magic"}, "unknown method 'magic'"),
    ({"pair": "gpt-9, gpt-1"}, "unknown pair"),
    ({"tab": "settings"}, "unknown tab 'settings'"),
    ({"prompt": "   "}, "the prompt is empty"),
    ({"colour": "red"}, "unknown link parameter 'colour' ignored"),
    ({"prompt": "x" * 5000}, "at most 4000 characters"),
    ({"present": "maybe"}, "presentation mode must be 1 or 0"),
    ({"step": "0"}, "the lesson step must be in [1, "),
    ({"step": "two"}, "the lesson step must be a number"),
])
def test_a_bad_value_is_named_and_dropped(params, named):
    values, problems = read_link(params)
    assert values == {}
    assert len(problems) == 1 and named in problems[0]
    assert named in note_markdown(problems)


def test_bad_values_do_not_spoil_the_good_ones():
    values, problems = read_link({"K": "0", "L": "3", "tab": "sweep"})
    assert values == {"L": 3, "tab": "sweep"} and len(problems) == 1 and problems[0].startswith("K:")


def test_a_block_over_the_server_limit_keeps_the_default_k_and_l():
    from components.serving.limits import LIMITS

    if 8 * 16 <= LIMITS.block_tokens:
        pytest.skip("this server allows every K x L of the sliders")
    values, problems = read_link({"K": "8", "L": "16"})
    assert "K" not in values and "L" not in values and "K and L keep their defaults" in problems[0]


def test_the_written_link_restores_the_settings():
    query = link_query("toy", "the cat sat", "spectr_gbv", 4.0, 3.0, 0.55, 7.0, tab_name="Compare")
    assert query.startswith("?")
    values, problems = read_link(dict(parse_qsl(query[1:])))
    assert problems == []
    assert values == {"pair": "toy", "prompt": "the cat sat", "method": "spectr_gbv", "K": 4, "L": 3, "T": 0.55,
                      "seed": 7, "tab": "compare"}


def test_the_written_link_leaves_out_what_it_cannot_read():
    query = link_query("toy", "", "sd", None, 3, 0.7, 0, tab_name="no such tab")
    assert dict(parse_qsl(query[1:])) == {"pair": "toy", "method": "sd", "L": "3", "T": "0.7", "seed": "0"}


PYTHON_PROMPT = "Write a Python function that checks whether a number is prime."


def test_a_links_pair_gets_a_prompt_it_reads():
    from components.wiring.share import restored

    order = ["pair", "prompt", "method", "K", "L", "T", "seed"]
    # no prompt in the link: the page's, if the pair reads it, else the pair's example
    pair, prompt, *_ = restored({"pair": "toy"}, order, PYTHON_PROMPT)[:2]
    assert pair["value"] == "toy" and prompt["value"] == example_prompt("toy")
    assert read_link({"pair": "toy"}, "the dog")[0] == {"pair": "toy"}  # the page's prompt stays
    # a model pair reads any prompt: a Python prompt stays; a teaching pair's prompt gives way to its example
    assert read_link({"pair": "default"}, PYTHON_PROMPT)[0] == {"pair": "default"}
    assert read_link({"pair": "default"}, "the cat")[0] == {"pair": "default", "prompt": example_prompt("default")}
    # the link's own prompt, if the pair cannot read it: said, and the pair's example instead
    values, problems = read_link({"pair": "toy", "prompt": PYTHON_PROMPT})
    assert values == {"pair": "toy", "prompt": example_prompt("toy")}
    assert problems == ["prompt: the pair toy cannot read it (not its words); its own prompt is used"]


def test_a_written_link_carries_no_prompt_its_pair_cannot_read():
    assert "prompt" not in dict(parse_qsl(link_query("toy", PYTHON_PROMPT, "sd", 1, 3, 0.7, 0)[1:]))
    assert dict(parse_qsl(link_query("default", PYTHON_PROMPT, "sd", 1, 3, 0.7, 0)[1:]))["prompt"] == PYTHON_PROMPT
    assert dict(parse_qsl(link_query("toy", "the dog", "sd", 1, 3, 0.7, 0)[1:]))["prompt"] == "the dog"


def test_every_tab_of_the_page_has_an_id():
    assert set(TABS.values()) == {"generate", "explorer", "compare", "race", "sweep", "grid", "fidelity", "lesson",
                                  "playground", "about"}


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(list(KEYS) + ["other"]), st.one_of(st.text(max_size=30), st.none(),
                                                                         st.integers(), st.lists(st.text()))))
def test_any_link_gets_values_or_messages_never_an_exception(params):
    values, problems = read_link(params)
    assert set(values) <= set(KEYS)
    assert len(values) + len(problems) >= len(params) - 1  # K and L may share one message


# ------------------------------------------------------------- a class: presentation mode, the Lesson step, the tab


@pytest.mark.parametrize("presentation, step, tab", [(True, 3, "Lesson"), (False, 1, "Race"), (True, None, "Generate")])
def test_the_link_round_trips_presentation_mode_the_lesson_step_and_the_tab(presentation, step, tab):
    query = link_query("toy", "the cat", "sd", 1, 3, 1.0, 0, presentation=presentation,
                       step="" if step is None else str(step), tab_name=tab)
    values, problems = read_link(dict(parse_qsl(query[1:])))
    assert problems == []
    assert values["present"] is presentation and values["tab"] == TABS[tab]
    assert values.get("step") == step


def test_a_link_names_presentation_mode_in_words_or_digits():
    assert read_link({"present": "on", "step": "2", "tab": "lesson"})[0] == {"present": True, "step": 2,
                                                                            "tab": "lesson"}
    assert read_link({"present": "0"})[0] == {"present": False}


def test_a_link_can_name_every_step_of_the_lesson_and_no_more():
    from components.tabs import lesson

    last_step = max(lesson.step_texts())
    assert read_link({"step": str(last_step)})[0] == {"step": last_step}
    assert read_link({"step": str(last_step + 1)})[0] == {}


def test_restoring_a_class_link_sets_the_checkbox_the_step_and_the_tab():
    from components.wiring.share import restored

    order = ["pair", "prompt", "method", "K", "L", "T", "seed"]
    link = {"pair": "toy", "present": "1", "step": "2", "tab": "lesson"}
    *controls, tabs, present, step, note = restored(link, order, "the cat")  # a prompt the Toy world reads
    assert controls[0]["value"] == "toy" and all(c == {"__type__": "update"} for c in controls[1:])
    assert present["value"] is True and step.selected == 2 and tabs.selected == "lesson"
    assert note["visible"] is False


def test_start_a_class_sets_the_toy_world_sd_k1_l3_presentation_and_opens_the_lesson():
    from components.tabs.lesson_try import TOY_PROMPT
    from components.wiring.classroom import start_class

    started = start_class()
    assert started.pair["value"] == "toy" and started.prompt["value"] == TOY_PROMPT
    assert started.method["value"] == "sd" and started.K["value"] == 1 and started.L["value"] == 3
    assert started.presentation["value"] is True
    assert started.tabs.selected == "lesson" and started.walkthrough.selected == 1


def test_the_class_button_is_on_the_page_and_sets_those_controls():
    import app
    import gradio as gr

    demo = app.build_demo(default_pair="toy", default_prompt="the cat")
    button = next(b for b in demo.blocks.values() if isinstance(b, gr.Button) and b.elem_id == "start-class")
    click = next(fn for fn in demo.fns.values() if any(t[0] is button for t in fn.targets) or
                 any(getattr(t[0], "_id", t[0]) == button._id for t in fn.targets))
    labels = [getattr(block, "label", None) for block in click.outputs]
    assert "Model pair" in labels and "Prompt" in labels and "K (drafts)" in labels and "L (draft length)" in labels
    assert any(isinstance(block, gr.Tabs) for block in click.outputs)
    assert any(isinstance(block, gr.Walkthrough) for block in click.outputs)
    assert any(isinstance(block, gr.Checkbox) and block.elem_id == "presentation-mode" for block in click.outputs)
