"""The page's words (components.words, lesson, playground, screens): the glossary covers the
issue's terms, every view has its caption, the lesson's numbers are the exact ones, no
reference a user cannot open, and bad values get a message."""

from __future__ import annotations

import re
from fractions import Fraction

import gradio as gr
import pytest

import app
from spectr_gbv import METHODS
from components.tabs import lesson, lesson_try, playground
from components.wiring import screens
from components.render import words
from components.tabs.about import about_markdown
from components.tabs import explorer, fidelity, generate
from components.wiring import inputs, settings
from spectr_gbv import theory
from spectr_gbv.toy import TWO_TOKEN_DRAFT, TWO_TOKEN_TARGET

pytestmark = pytest.mark.unit

TERMS = ["tau", "h", "E[tau | drafts]", "Block efficiency", "Mean acceptance length", "TV", "Residual", "Correction",
         "Bonus", "RRS", "K-SEQ", "rho", "Coupled run", "lossy"]


def test_the_glossary_defines_every_term_in_bold():
    bold = set(re.findall(r"\*\*(.+?)\*\*", words.GLOSSARY))
    assert [t for t in TERMS if not any(b == t or (t == "rho" and b.startswith("rho")) for b in bold)] == []


def test_about_cites_only_pages_a_user_can_open():
    text = about_markdown()
    assert "ALGORITHMS" not in text and ".md" not in text
    links = re.findall(r"\]\((.+?)\)", text)
    assert links and all(link.startswith("https://arxiv.org/abs/") for link in links)
    assert "## Glossary" in text


def test_every_view_has_a_caption_in_the_page():
    demo = app.build_demo()
    ids = {b.elem_id for b in demo.blocks.values() if isinstance(b, gr.Markdown)}
    assert {f"how-to-read-{view}" for view in words.HOW_TO_READ} <= ids


def test_missing_numbers_are_said_in_words():
    assert words.shown_h(0.25) == 0.25 and "skipped" in words.shown_h(None)
    assert words.shown_expected(1.5) == 1.5 and isinstance(words.shown_expected(None), str)


def test_the_explorer_json_has_no_bare_null():
    *_, state, _slider, _grid, _figure, _details = list(generate.generate_stream("toy", "the cat", "gbv", 2, 8, 1.0, 60, 3))[-1]
    skipped = [i for i, it in enumerate(state.record.iterations) if any(t.accept_prob is None for t in it.tests)]
    assert skipped, "this run has a skipped test to show"
    *_, details = explorer.show_iteration(state, skipped[0] + 1)
    assert all(test["h"] is not None for test in details["tests"])
    assert any(test["h"] == words.shown_h(None) for test in details["tests"])


def test_the_lessons_numbers_are_the_exact_ones():
    texts = lesson.step_texts()
    assert list(texts) == [1, 2, 3, 4, 5, 6]
    q, p = (Fraction(1, 3), Fraction(2, 3)), (Fraction(2, 3), Fraction(1, 3))
    assert TWO_TOKEN_TARGET == tuple(map(float, q)) and TWO_TOKEN_DRAFT == tuple(map(float, p))
    assert f"{float(p[0] * min(1, q[0] / p[0])):.3f} = q(A)" in texts[3][1]  # exactness: p(A) h(A) = q(A)
    alpha = min(p[0], q[0]) + min(p[1], q[1])
    tokens = sum(alpha**j for j in range(3))  # 1 + alpha + alpha^2 for L = 2
    # quoted as the Playground shows it at the settings step 4's "try it" sets (alpha to the slider's 3 decimals)
    assert f"{float(tokens):.2f} tokens per target call" in texts[4][1]
    shown = lesson_try.playground_values()
    assert shown == {"alpha": round(float(alpha), 3), "playground K": 1, "playground L": 2}
    assert f"{playground.tokens_shown(shown['alpha'], 1, 2)} tokens per target call" in texts[4][1]
    assert f"{playground.tokens_shown(shown['alpha'], 1, 2)} tokens per iteration" in playground.summary_line(
        shown["alpha"], 1, 2, 0.05, True)
    assert f"{theory.single_draft_tokens(float(alpha), 2):.2f}" in texts[4][1]
    toy = lesson.acceptance_numbers()  # why the first guess is always kept and the second is not
    assert toy["q_kept"] > toy["p_kept"] and toy["q_rejected"] < toy["p_rejected"] and toy["tau"] == 1


def test_each_lesson_step_sets_a_run_that_shows_it():
    plans = lesson_try.try_its()
    assert list(plans) == [1, 2, 3, 4, 5, 6]
    for step, plan in plans.items():
        v = plan.values
        if "pair" in v:  # a model run: valid settings, and the view's own run button pressed
            settings.settings(v["K"], v["L"], v["T"], v.get("tokens", 1), v.get("seed", 0))
            inputs.get_pair(v["pair"]).encode(v["prompt"])
            assert v["method"] in METHODS and plan.press in {"generate-button", "fidelity-button"}
        assert plan.tab in {"generate", "explorer", "playground", "fidelity"}
    assert [plans[s].tab for s in (1, 2, 3, 4, 5, 6)] == ["generate", "explorer", "explorer", "playground", "fidelity",
                                                          "explorer"]
    assert plans[5].values["method"] == "spectr_gbv_released" and plans[4].press is None


def test_the_lessons_seeds_give_the_iterations_its_text_describes():
    """Step 2's first iteration keeps a draft token and then rejects one; step 3's ends in a correction."""
    for step, least_kept in ((2, 1), (3, 0)):
        v = lesson_try.try_its()[step].values
        *_, state, _slider, _grid, figure, details = list(generate.generate_stream(
            v["pair"], v["prompt"], v["method"], v["K"], v["L"], v["T"], v["tokens"], v["seed"]))[-1]
        first = state.record.iterations[0]
        assert first.final_kind == "correction" and least_kept <= first.num_accepted < v["L"]
        assert "correction" in figure.layout.title.text


def shown_by_try_it(step: int, plan) -> tuple[list[float], dict]:
    """The numbers a step's "try it" puts on screen, and the settings it shows them at."""
    v = plan.values
    if plan.tab == "playground":
        tokens = float(playground.tokens_shown(v["alpha"], v["playground K"], v["playground L"]))
        return [v["alpha"], tokens], {"K": v["playground K"], "L": v["playground L"]}
    if plan.tab == "fidelity":  # the header and the data of the run it presses
        *_, (header, _figure, data) = fidelity.run_fidelity(v["pair"], v["prompt"], v["method"], v["K"], v["L"], v["T"],
                                                             v["N"], v["first tokens"])
        numbers = [float(x) for x in re.findall(r"\d+\.\d+", header)]
        return numbers + [data["total_variation"]], {"K": v["K"], "L": v["L"], "first": v["first tokens"]}
    # Generate or the explorer: the first iteration's cells (p, q, q/p, h) and chart (q, p, the drawn-from law)
    *_, state, _slider, _grid, _figure, _details = list(generate.generate_stream(
        v["pair"], v["prompt"], v["method"], v["K"], v["L"], v["T"], v["tokens"], v["seed"]))[-1]
    first = state.record.iterations[0]
    numbers = [x for ps, qs in zip(first.draft_token_probs, first.target_token_probs) for p, q in zip(ps, qs)
               for x in (p, q, q / p)]
    numbers += [t.accept_prob for t in first.tests if t.accept_prob is not None]
    numbers += [first.expected_accepted] if first.expected_accepted is not None else []  # the grid's caption
    numbers += [x for t in first.final_top for x in (t.final_prob, t.target_prob, t.draft_prob) if x is not None]
    return numbers, {"K": v["K"], "L": v["L"]}


def test_every_number_in_the_lessons_texts_is_one_its_try_it_shows():
    """Each measured number of a step (a decimal or a percentage) is, at the precision the text gives it,
    one that the step's "try it" shows, and the K, L and tokens it runs at are the ones the text names:
    the text never quotes a context its example does not show. (Whole numbers in formulas are not
    measurements.)"""
    texts, plans = lesson.step_texts(), lesson_try.try_its()
    for step, (_title, body) in texts.items():
        numbers, named = shown_by_try_it(step, plans[step])
        for text, percent in re.findall(r"(?<![\w.])(\d+\.\d+|\d+)(%?)", body):
            if "." not in text and not percent:
                continue
            decimals = (len(text.split(".")[1]) if "." in text else 0) + (2 if percent else 0)
            value = float(text) / (100 if percent else 1)
            assert any(f"{n:.{decimals}f}" == f"{value:.{decimals}f}" for n in numbers), (step, text + percent, body)
        for name in ("K", "L"):  # the run's own setting is named (a text may contrast it with another, "alone (K = 1)")
            mentions = [int(n) for n in re.findall(rf"\b{name} = \**(\d+)", body)]
            assert not mentions or named[name] in mentions, (step, name, body)
        for number in re.findall(r"first\s+(\d+)\s+tokens", body):
            assert int(number) == named["first"], (step, body)


def test_the_playground_answers_at_once_and_refuses_bad_values():
    line, figure = playground.update(0.6, 2, 4, 0.1, playground.BATCHED)
    assert f"{theory.speedup(0.6, 2, 4, 0.1, True):.2f}x" in line
    assert len(figure.data) == 8  # K = 1 and K = 2: tokens and speedup lines, each with its marker
    one = playground.update(0.6, 1, 4, 0.1, playground.SEQUENTIAL)[1]
    assert len(one.data) == 4
    message, unchanged = playground.update(float("nan"), 2, 4, 0.1, playground.BATCHED)
    assert "Cannot compute" in message and "alpha" in message
    message, _ = playground.update(0.5, None, 4, 0.1, playground.BATCHED)
    assert "Cannot compute" in message and "K (drafts) is missing" in message


@pytest.mark.parametrize("width, open_", [(800, False), (1099, False), (1100, True), (1440, True), (None, True),
                                         ("wide", True), (0, True)])
def test_the_sidebar_starts_closed_on_a_narrow_window(width, open_):
    assert screens.sidebar_for_width(width).open is open_


def test_the_playground_starts_from_this_servers_measured_costs(monkeypatch):
    """The button reads g from the default target's kernel probe and alpha, c from the default draft's
    measurement, and says where each number comes from; the curves then charge each scored position."""
    from types import SimpleNamespace

    import spectr_gbv.pairs
    from spectr_gbv.models import cpu_kernel
    from spectr_gbv.models.cpu_kernel import KernelChoice, KernelCost

    probe = KernelChoice("fp16-weights", "AVX2", "some CPU", (KernelCost("fp16-weights", 30.0, 45.0, 60.0),))
    pair = SimpleNamespace(target=SimpleNamespace(loaded=SimpleNamespace(kernel=probe)))
    monkeypatch.setattr(spectr_gbv.pairs, "get_pair", lambda key: pair)
    alpha, c, g, note = playground.server_costs()
    assert (alpha, c) == (cpu_kernel.PREDICTION_ALPHA, cpu_kernel.PREDICTION_DRAFT_COST)
    assert g == round(probe.cost().position_cost, 3) and g > 0.1
    assert "AVX2, fp16 weights" in note and f"g = {g:g}" in note
    line, _ = playground.update(alpha, 2, 4, c, playground.BATCHED, g)
    assert f"{theory.speedup(alpha, 2, 4, c, True, g):.2f}x" in line and f"g = {g:g}" in line
    pair.target = SimpleNamespace()  # no CPU kernel (a GPU): g stays 0, and the note says why
    assert playground.server_costs()[2] == 0.0


def test_the_first_screen_says_what_generate_will_run():
    demo = app.build_demo()
    (plan,) = [b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "generate-plan"]
    assert plan.value.startswith(f"Generate runs **AS-BV+H**, K = {inputs.DEFAULT_K}, L = {inputs.DEFAULT_L}, "
                                 f"T = {inputs.DEFAULT_T:g}, {inputs.DEFAULT_TOKENS} new tokens")
    method = next(b for b in demo.blocks.values() if isinstance(b, gr.Dropdown) and b.label.startswith("Method"))
    (follows,) = [f for f in demo.fns.values() if (method._id, "change") in f.targets and plan in f.outputs]
    assert follows.fn("sd", 3, 5, 1.0, 20).startswith("Generate runs **SD**, L = 5, T = 1, 20 new tokens")  # K ignored


def test_a_teaching_pair_prints_no_speed():
    *_, last = generate.generate_stream("toy", "the cat", "sd", 1, 3, 1.0, 10, 0)
    _output, line, data, *_ = last
    assert "tokens/s" not in line and "ms per token" not in line and "toy model: speed not meaningful" in line
    assert data["tokens_per_second"] == "toy model: speed not meaningful"
