"""The explorer's draft grid, read back from its HTML: the final token at column tau + 1 over
the token it replaced, accepted cells never marked rejected, skipped tests shown as skipped."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest
from hypothesis import given, settings, strategies as st

from components.render.grid import cell_states, draft_grid_html
from spectr_gbv import METHODS, generate
from spectr_gbv.methods.base import SubBlockTest
from spectr_gbv.records import IterationRecord, TopToken
from spectr_gbv.toy import decode, encode, toy_pair

pytestmark = pytest.mark.unit


class Grid(HTMLParser):
    """header: the position numbers; rows: (tr class, label, [cell dicts with class, column, text, struck])."""

    def __init__(self, markup: str):
        super().__init__()
        self.header, self.rows, self._where, self._cell = [], [], None, None
        self.feed(markup)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "tr" and attrs.get("class") in ("grid-row", "grid-final-row"):
            self.rows.append({"class": attrs["class"], "label": "", "cells": []})
        elif tag == "th" and "grid-pos" in attrs.get("class", ""):
            self._where = "pos"
        elif tag == "th" and self.rows and "grid-label" in attrs.get("class", ""):
            self._where = "label"
        elif tag == "td" and self.rows:
            self._cell = {"class": attrs.get("class", "").split(), "column": int(attrs.get("data-column", 0)),
                          "text": "", "struck": None, "detail": attrs.get("data-detail", "")}
            self.rows[-1]["cells"].append(self._cell)
        elif tag == "s" and self._cell is not None:
            self._where = "struck"
        elif tag == "span" and self._cell is not None:
            self._where = "glyph"

    def handle_endtag(self, tag):
        if tag in ("th", "s", "span"):
            self._where = None
        if tag == "td":
            self._cell = None

    def handle_data(self, data):
        if self._where == "pos":
            self.header.append(int(data))
        elif self._where == "label":
            self.rows[-1]["label"] += data
        elif self._where == "struck":
            self._cell["struck"] = data
        elif self._cell is not None and self._where is None:
            self._cell["text"] += data

    def cells(self, kind: str):
        return [(r, i, c) for r, row in enumerate(self.rows) for i, c in enumerate(row["cells"]) if f"cell-{kind}" in c["class"]]


def check_grid(it: IterationRecord, method: str) -> Grid:
    """Every property the explorer promises, on one iteration."""
    grid = Grid(draft_grid_html(it, decode, method))
    length, tau = len(it.draft_tokens[0]), it.num_accepted
    assert grid.header == list(range(1, length + 2))
    finals = [(r, i, c) for r, row in enumerate(grid.rows) for i, c in enumerate(row["cells"]) if "grid-final" in c["class"]]
    assert len(finals) == 1
    row, _, final = finals[0]
    assert final["column"] == tau + 1 and f"cell-{it.final_kind}" in final["class"]
    assert final["text"].strip() == decode([it.final_token])[0]
    if tau == 0:  # its own row, after the K draft rows
        assert grid.rows[row]["class"] == "grid-final-row" and row == len(it.draft_tokens)
    else:
        assert row == it.winning_draft and grid.rows[row]["class"] == "grid-row"
    if 0 < tau < length:  # over the draft token it replaced, the rest of the row greyed
        assert final["struck"] == decode([it.draft_tokens[it.winning_draft][tau]])[0]
        assert all("cell-after" in c["class"] for c in grid.rows[row]["cells"][tau + 1:length])
    else:
        assert final["struck"] is None
    accepted = grid.cells("accepted")
    assert sorted((r, c["column"]) for r, _, c in accepted) == [(it.winning_draft, i) for i in range(1, tau + 1)]
    assert all("cell-rejected" not in c["class"] and "cell-skipped" not in c["class"] for *_, c in accepted)
    ending = {(t.draft, t.start + t.length): t for t in it.tests}  # the last test ending at each (draft, column)
    for r, _, c in grid.cells("skipped"):
        test = ending.get((r, c["column"]))
        assert test is None or (test.accept_prob is None and not test.accepted)
    for r, _, c in grid.cells("rejected"):
        test = ending.get((r, c["column"]))
        assert test is None or (test.accept_prob is not None and not test.accepted)
    return grid


METHOD_NAMES = sorted(METHODS)


@settings(max_examples=40, deadline=None)
@given(method=st.sampled_from(METHOD_NAMES), seed=st.integers(0, 10_000), num_drafts=st.integers(1, 3),
       draft_length=st.integers(1, 4))
def test_every_iteration_of_every_method_draws_the_final_token_at_tau_plus_one(method, seed, num_drafts, draft_length):
    target, draft = toy_pair()
    run = generate(target, draft, encode("the cat"), method=method, num_drafts=num_drafts, draft_length=draft_length,
                   temperature=1.0, max_new_tokens=12, seed=seed)
    for it in run.iterations:
        check_grid(it, method)


@pytest.fixture(scope="module")
def gbv_iterations():
    target, draft = toy_pair()
    return [it for seed in range(12) for it in generate(target, draft, encode("the cat"), method="gbv", num_drafts=1,
                                                        draft_length=4, temperature=1.0, max_new_tokens=24, seed=seed).iterations]


@pytest.mark.parametrize("case", ["tau = 0", "mid", "tau = L"])
def test_the_final_column_at_tau_zero_mid_and_l(gbv_iterations, case):
    pick = {"tau = 0": lambda it: it.num_accepted == 0, "mid": lambda it: 0 < it.num_accepted < 4,
            "tau = L": lambda it: it.num_accepted == 4}[case]
    it = next(it for it in gbv_iterations if pick(it))
    grid = check_grid(it, "gbv")
    final = next(c for row in grid.rows for c in row["cells"] if "grid-final" in c["class"])
    assert final["column"] == {"tau = 0": 1, "mid": it.num_accepted + 1, "tau = L": 5}[case]
    assert ("cell-bonus" in final["class"]) == (case == "tau = L")


def test_lazily_skipped_tests_are_skipped_not_rejected(gbv_iterations):
    it = next(it for it in gbv_iterations if any(t.accept_prob is None for t in it.tests)
              and any(t.accept_prob is not None and not t.accepted and t.start + t.length > it.num_accepted + 1
                      for t in it.tests))
    grid = check_grid(it, "gbv")
    skipped = {c["column"] for *_, c in grid.cells("skipped")}
    rejected = {c["column"] for *_, c in grid.cells("rejected")}
    for t in it.tests:
        column = t.start + t.length
        if column > it.num_accepted + 1:  # past the final token
            assert column in (skipped if t.accept_prob is None else rejected)
    assert skipped and rejected and "not computed" in grid.cells("skipped")[0][2]["detail"]


def record(tests, tau, winner, kind, draft_tokens=((1, 2, 3), (4, 5, 6))):
    """A hand-made iteration (token ids index the toy vocabulary)."""
    return IterationRecord(
        index=0, draft_tokens=[list(r) for r in draft_tokens], draft_token_probs=[[0.5] * 3 for _ in draft_tokens],
        target_token_probs=[[0.25] * 3 for _ in draft_tokens], num_accepted=tau, winning_draft=winner,
        accepted_tokens=list(draft_tokens[winner][:tau]) if winner is not None else [], final_token=7, final_kind=kind,
        emitted=[*(draft_tokens[winner][:tau] if winner is not None else []), 7], tests=tests,
        final_top=[TopToken(7, 0.6, 0.3, 0.1)])


def test_a_failed_shorter_test_inside_the_accepted_prefix_is_not_marked():
    # GBV keeps the longest success: the coin for tokens 1..1 failed, tokens 1..2 passed.
    tests = [SubBlockTest(0, 0, 1, 0.2, False, 0.5), SubBlockTest(0, 0, 2, 0.9, True, 0.1),
             SubBlockTest(0, 0, 3, 0.1, False, 0.7), SubBlockTest(1, 0, 1, None, False, 0.95)]
    it = record(tests, 2, 0, "correction")
    states = cell_states(it)
    assert [s.kind for s in states[0]] == ["accepted", "accepted", "rejected"]
    assert [s.kind for s in states[1]] == ["skipped", "unreached", "unreached"]
    grid = check_grid(it, "spectr_gbv")
    assert grid.rows[0]["cells"][2]["struck"] == decode([3])[0]  # the third draft token, replaced


def test_the_detail_panel_says_what_the_residual_subtracted_for_this_method():
    it = record([SubBlockTest(0, 0, 1, 0.1, False, 0.9)], 0, None, "correction")
    for method in ("sd", "spectr", "as_bv", "spectr_gbv_released"):
        markup = draft_grid_html(it, decode, method)
        panel = markup[markup.index('class="grid-detail-body"'):]
        assert METHODS[method].residual.split(":")[0].replace("'", "&#x27;") in panel
    assert "LOSSY" in draft_grid_html(it, decode, "spectr_gbv_released")
    assert "nothing is subtracted" in draft_grid_html(record([], 3, 1, "bonus"), decode, "spectr")


def test_an_iteration_where_a_loser_takes_over_draws_a_consistent_grid():
    """AS-BV+H: GBV stops on the selected draft, another draft alive there is accepted and
    continues. The final token still sits at tau + 1 in the row of the draft that won."""
    target, draft = toy_pair()
    handed = []
    for seed in range(60):
        run = generate(target, draft, encode("the cat"), method="as_bv_handoff", num_drafts=3, draft_length=3,
                       temperature=1.0, max_new_tokens=12, seed=seed)
        for it in run.iterations:
            selected = it.tests[0].draft  # phase 2 tests the selected draft first
            if it.winning_draft is not None and it.winning_draft != selected and any(
                    t.draft == it.winning_draft and t.length == 1 and t.accepted for t in it.tests):
                handed.append(it)
        if len(handed) >= 3:
            break
    assert handed, "no hand-off in 60 toy runs"
    for it in handed:
        check_grid(it, "as_bv_handoff")


# ------------------------------------------------------------------ AS-BV+H in plain words (issue 24)


def panel_text(markup: str) -> str:
    """The final token's detail panel as a reader sees it: tags stripped, entities decoded."""
    import html
    import re

    body = markup[markup.index('class="grid-detail-body"'):]
    return html.unescape(re.sub(r"<[^>]+>", " ", body))


HANDOFF_DRAFTS = ((1, 2, 3), (1, 5, 6), (1, 4, 0))  # K = 3, L = 3: all three agree on the first token
CHOSEN_STOPS_AT_2 = [SubBlockTest(0, 0, 1, 0.9, True, 0.1), SubBlockTest(0, 0, 2, 0.2, False, 0.8),
                     SubBlockTest(0, 0, 3, 0.1, False, 0.9)]  # draft 1 chosen: its check keeps 1 token


def test_the_handoff_panel_says_what_happened_in_plain_words_before_the_symbols():
    offers = [SubBlockTest(1, 1, 1, 0.3, False, 0.6), SubBlockTest(2, 1, 1, 0.2, False, 0.7)]
    text = panel_text(draft_grid_html(record(CHOSEN_STOPS_AT_2 + offers, 1, 0, "correction", HANDOFF_DRAFTS), decode,
                                      "as_bv_handoff"))
    story = text[text.index("what happened"):text.index("  position  ")]  # the next row's label
    assert "AS-BV chose draft 1; its check kept 1 token and stopped at position 2." in story
    assert f"draft 2 offered “{decode([5])[0]}” (rejected), draft 3 offered “{decode([4])[0]}” (rejected)" in story
    assert "No offer was accepted" in story
    assert not any(symbol in story for symbol in ("ω", "norm(", "R ←", "G(", "τ"))  # the words carry no symbols
    symbols = text.index("drawn from, in symbols")  # and the registry's exact rule follows them
    assert text.index("what happened") < symbols and METHODS["as_bv_handoff"].residual[:40] in text[symbols:]


def test_the_handoff_panel_tells_an_accepted_offer_and_a_lone_draft():
    taken = [SubBlockTest(1, 1, 1, 0.8, True, 0.2), SubBlockTest(1, 2, 1, 0.1, False, 0.9)]  # then GBV on draft 2
    story = panel_text(draft_grid_html(record(CHOSEN_STOPS_AT_2 + taken, 2, 1, "correction", HANDOFF_DRAFTS), decode,
                                       "as_bv_handoff"))
    assert f"draft 2 offered “{decode([5])[0]}” (accepted)" in story and "draft 3 offered" not in story
    assert "went on along draft 2 and kept nothing more; the final token at position 3" in story
    alone = [SubBlockTest(0, 0, 1, 0.2, False, 0.8), SubBlockTest(0, 0, 2, 0.1, False, 0.9),
             SubBlockTest(0, 0, 3, 0.1, False, 0.9)]
    story = panel_text(draft_grid_html(record(alone, 0, None, "correction", ((1, 2, 3),)), decode, "as_bv_handoff"))
    assert "stopped at position 1, keeping no token" in story and "With one draft, nobody could take over" in story
    assert "what happened" not in panel_text(draft_grid_html(record(alone, 0, None, "correction", ((1, 2, 3),)),
                                                             decode, "as_bv"))  # only AS-BV+H tells this story


def test_the_handoff_story_reads_every_real_iteration():
    """On real AS-BV+H runs the story's reading of the tests agrees with the record: an accepted offer
    is the winning draft, else the chosen draft keeps what its check kept."""
    from components.render.handoff_story import handoff_story, read_handoff

    target, draft = toy_pair()
    kinds = set()
    # Offers are rare in the Toy world (about one iteration in 20 at K = 3, L = 3) and taken in about
    # half of those: read seeded runs until both stories have been read, on 12 runs at least.
    for seed in range(400):
        if kinds >= {"taken", "alone"} and seed >= 12:
            break
        run = generate(target, draft, encode("the cat"), method="as_bv_handoff", num_drafts=3, draft_length=3,
                       temperature=1.0, max_new_tokens=12, seed=seed)
        for it in run.iterations:
            found = read_handoff(it)
            assert found is not None and handoff_story(it, decode)
            if found.taken is not None:
                assert it.winning_draft == found.taken.draft and it.num_accepted > found.kept
            else:
                assert it.num_accepted == found.kept and it.winning_draft in (found.chosen, None)
            kinds.add("taken" if found.taken else "offered" if found.offers else "alone")
    assert kinds >= {"taken", "alone"}


def test_an_iteration_cut_by_max_new_tokens_shows_only_its_emitted_tokens_as_emitted():
    it = record([SubBlockTest(0, 0, 2, 0.9, True, 0.1), SubBlockTest(0, 0, 3, 0.1, False, 0.7)], 2, 0, "correction")
    cut = IterationRecord(**{**it.__dict__, "emitted": [1]})  # Max new tokens left room for one token
    markup = draft_grid_html(cut, decode, "gbv")
    grid = Grid(markup)
    row = grid.rows[0]["cells"]
    assert "cell-cut" not in row[0]["class"] and "cell-cut" in row[1]["class"]
    assert "cell-cut" in row[2]["class"] and "grid-final" in row[2]["class"]  # the correction is not in the output
    assert "cut by Max new tokens: not in the output" in row[1]["detail"]
    assert "Cut by Max new tokens: only the first 1 of these 3 token(s) are in the output" in markup
    assert "cell-cut" not in draft_grid_html(it, decode, "gbv") and "Cut by" not in draft_grid_html(it, decode, "gbv")


def test_a_real_run_greys_exactly_the_tokens_max_new_tokens_cut():
    target, draft = toy_pair()
    for seed in range(20):
        run = generate(target, draft, encode("the cat"), method="gbv", num_drafts=2, draft_length=4, temperature=1.0,
                       max_new_tokens=3, seed=seed)
        last = run.iterations[-1]
        if len(last.emitted) < last.num_accepted + 1:
            break
    else:
        pytest.fail("no seed cut its last iteration")
    grid = Grid(draft_grid_html(last, decode, "gbv"))
    shown = [c for row in grid.rows for c in row["cells"]
             if {"cell-accepted", "grid-final"} & set(c["class"]) and "cell-cut" not in c["class"]]
    assert [c["text"] for c in shown] == decode(last.emitted)


def test_whitespace_tokens_are_visible_in_the_grid_cells():
    it = record([SubBlockTest(0, 0, 1, 0.1, False, 0.9)], 0, None, "correction")
    texts = {1: " ", 2: "\n", 3: "c", 4: "d", 5: "e", 6: "f", 7: " "}
    grid = Grid(draft_grid_html(it, lambda ids: [texts[i] for i in ids], "sd"))
    assert [c["text"] for c in grid.rows[0]["cells"][:3]] == ["␣", "⏎", "c"]
    assert grid.rows[-1]["cells"][0]["text"] == "␣"  # the correction token


def test_the_grid_table_scrolls_sideways_in_its_own_box():
    it = record([SubBlockTest(0, 0, 1, 0.1, False, 0.9)], 0, None, "correction")
    markup = draft_grid_html(it, decode, "sd")
    box = markup.index('class="grid-scroll"')
    assert "overflow-x:auto" in markup[box:markup.index(">", box)] and markup.index("<table") > box


def drawn_from_row(text: str) -> str:
    """The panel's "drawn from" row in words: between its label and the symbols' row."""
    start = text.index("  drawn from  ") + len("  drawn from  ")
    return text[start:text.index("drawn from, in symbols")]


def test_the_handoff_panel_says_what_the_final_token_was_drawn_from_in_words():
    symbols = ("ω", "norm(", "R ←", "G(", "τ", "(q", "D)")
    offers = [SubBlockTest(1, 1, 1, 0.3, False, 0.6), SubBlockTest(2, 1, 1, 0.2, False, 0.7)]
    text = panel_text(draft_grid_html(record(CHOSEN_STOPS_AT_2 + offers, 1, 0, "correction", HANDOFF_DRAFTS), decode,
                                      "as_bv_handoff"))
    words = drawn_from_row(text)
    assert "the chosen draft's leftover at position 2" in words and "each rejected offer in turn" in words
    assert not any(symbol in words for symbol in symbols)

    taken = [SubBlockTest(1, 1, 1, 0.8, True, 0.2), SubBlockTest(1, 2, 1, 0.1, False, 0.9)]
    words = drawn_from_row(panel_text(draft_grid_html(record(CHOSEN_STOPS_AT_2 + taken, 2, 1, "correction",
                                                             HANDOFF_DRAFTS), decode, "as_bv_handoff")))
    assert "GBV's leftover on draft 2 at position 3" in words and "p bars of draft 2" in words
    assert not any(symbol in words for symbol in symbols)

    alone = [SubBlockTest(0, 0, 1, 0.2, False, 0.8), SubBlockTest(0, 0, 2, 0.1, False, 0.9),
             SubBlockTest(0, 0, 3, 0.1, False, 0.9)]
    words = drawn_from_row(panel_text(draft_grid_html(record(alone, 0, None, "correction", ((1, 2, 3),)), decode,
                                                      "as_bv_handoff")))
    assert "leftover at position 1" in words and "rejected offer" not in words
