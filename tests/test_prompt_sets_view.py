"""Prompt sets in Compare and Sweep, called in-process on the Toy world (no server).

Methodology: the set names resolve to the prompts the frontier bench reads; an unknown name or a
set whose estimate is over the budget is refused before any run (a run would call `prepare_set`,
replaced here by one that fails the test), and the message lists exactly the sets whose estimate
fits. The coupled result over a set is recomputed by hand: one `coupled_run` per prompt with
seed i, the per-prompt means of `CoupledRun.summary`, and the paired interval the t-interval
scipy gives for the differences. Independent runs give a median and range over seeds, drawn as
dots below five seeds. Repeats are re-sized to the most whose estimate fits.
"""

from __future__ import annotations

import math

import pytest
from scipy import stats

from components.render import set_figures
from components.serving.request import COMPARE
from components.tabs import compare_set, repeats_sizing
from components.tabs.compare import compare
from components.tabs.sweep import run_sweep
from components.wiring import prompt_set_choice
from components.wiring.admission import cost
from components.wiring.prompt_set_choice import SET_NAMES, check_set_fits, check_set_name, set_prompts, set_size
from spectr_gbv.bench import frontier
from spectr_gbv.config import DecodeConfig
from spectr_gbv.coupled import coupled_run
from spectr_gbv.pairs import get_pair
from spectr_gbv.prompt_sets import TEACHING_PROMPTS, paper_suite
from spectr_gbv.sweep import iter_set_sweep, iter_sweep

pytestmark = pytest.mark.unit

METHODS = ["spectr", "spectr_gbv", "as_bv", "sd"]


def no_progress(*args, **kwargs):
    return None


def last(generator):
    out = None
    for out in generator:
        pass
    return out


def compare_over(prompt_set, coupled=True, repeats=1, baseline="spectr", methods=METHODS, tokens=12, K=2, L=3):
    return last(compare("toy", "the cat", methods, K, L, 0.7, tokens, 0, coupled, repeats, prompt_set, baseline,
                        progress=no_progress))


# ------------------------------------------------------------------ which prompts a name means


def test_suite_slices_take_the_paper_suites_families_in_turn():
    suite = paper_suite()
    five = set_prompts("suite-5", "default", "ignored")
    assert five == suite[:5] and len(suite) == 120
    families = frontier_families()
    assert sorted(next(name for name, texts in families.items() if text in texts) for text in five) == sorted(families)
    assert set_prompts("suite-20", "default", "x") == frontier.prompt_texts("default", 20)  # the bench's own prompts


def frontier_families() -> dict[str, list[str]]:
    import json

    from spectr_gbv.prompt_sets import PAPER_SUITE
    return json.loads(PAPER_SUITE.read_text())["families"]


def test_teaching_pairs_read_their_own_prompts_and_the_prompt_set_is_the_box():
    assert set_prompts("suite-10", "toy", "x") == TEACHING_PROMPTS["toy"] * 2
    examples = set_prompts("examples", "toy", "x")
    assert "the cat" in examples and set(TEACHING_PROMPTS["toy"]) <= set(examples) and len(set(examples)) == len(examples)
    assert all(get_pair("toy").encode(text) for text in examples)  # every one reads in the Toy world
    assert set_prompts("prompt", "toy", "the dog") == ["the dog"]
    assert set_size("suite-40", "toy") == 40 and set_size("examples", "default") == 4


@pytest.mark.parametrize("name", ["nope", "suite-7", 3, ["examples"]])
def test_an_unknown_set_name_is_refused_with_the_names(name):
    with pytest.raises(ValueError, match="unknown prompt set .*choose one of prompt, examples, suite-5"):
        check_set_name(name)
    assert check_set_name(None) == check_set_name("") == "prompt"  # a call that names no set: the prompt alone


# ------------------------------------------------------------------ refused before any run


@pytest.fixture
def no_runs(monkeypatch):
    """Any run would first encode the set's prompts: here that fails the test."""
    def fail(*args, **kwargs):
        raise AssertionError("a run started")

    monkeypatch.setattr(compare_set, "prepare_set", fail)
    import components.tabs.sweep as sweep_tab
    monkeypatch.setattr(sweep_tab, "prepare_set", fail)


def test_compare_refuses_an_unknown_set_before_any_run(no_runs):
    with pytest.raises(Exception, match="unknown prompt set 'suite-3'"):
        compare_over("suite-3")


def test_a_set_over_the_budget_is_refused_naming_the_sets_that_fit(no_runs, limits):
    limits(iterations=400)
    with pytest.raises(Exception) as refused:
        compare_over("suite-120", repeats=2, tokens=40)
    message = str(refused.value)
    assert "suite-120 (120 prompts)" in message and "nothing was started" in message
    listed = message.split("Sets that fit these settings: ")[1]

    def seconds(n):
        return compare_set.set_seconds("toy", len(METHODS), 2, 3, 40, 2, True, n)

    def plan(n):
        return compare_set.set_plan(len(METHODS), 3, 2, True, n)

    fitting = prompt_set_choice.fitting_sets("toy", seconds, plan, 40)
    assert listed.rstrip('"\'') == ", ".join(f"{n} ({s} prompt{'s' if s > 1 else ''})" for n, s in fitting)
    assert fitting and "suite-120" not in dict(fitting)
    for name, size in [(n, set_size(n, "toy")) for n in SET_NAMES]:  # the list is exactly the sets that fit
        assert (name in dict(fitting)) == prompt_set_choice.set_fits("toy", size, seconds, plan, 40)
    # The largest that fits is accepted by the same check.
    check_set_fits(fitting[-1][0], "toy", seconds, plan, 40)


def test_sweep_refuses_a_set_over_the_budget_before_any_run(no_runs, limits):
    limits(iterations=300)
    with pytest.raises(Exception, match="the prompt set suite-40 .*Sets that fit these settings: prompt"):
        last(run_sweep("toy", "the cat", ["sd", "spectr"], "K", "1, 2", 2, 3, 0.7, 20, 0, 2, "suite-40",
                       progress=no_progress))


def test_a_call_that_names_no_set_keeps_its_old_meaning():
    assert COMPARE.request(("toy", "the", ["sd"], 2, 3, 0.7, 8, 0, True)).prompt_set is None
    single = compare_over("prompt", repeats=1, tokens=8)[-1]
    old = last(compare("toy", "the cat", METHODS, 2, 3, 0.7, 8, 0, True, 1, progress=no_progress))[-1]
    assert single["table"] == old["table"] and "prompt_set" not in old


# ------------------------------------------------------------------ coupled: means and paired intervals


def test_coupled_set_means_and_paired_intervals_are_the_frontiers():
    data = compare_over("suite-5")[-1]
    rows = {r["method"]: r for r in data["set_rules"]}
    pair = get_pair("toy")
    by_hand = {m: {"expected_accepted": [], "block_efficiency": []} for m in METHODS}
    for i, text in enumerate(set_prompts("suite-5", "toy", "")):
        run = coupled_run(pair.target, pair.draft, pair.encode(text), METHODS,
                          DecodeConfig(method=data["drafts_from"], num_drafts=2, draft_length=3, temperature=0.7,
                                       max_new_tokens=12, seed=i))
        for m in METHODS:
            summary = run.summary(m)
            by_hand[m]["expected_accepted"].append(summary["mean_expected_accepted"])
            by_hand[m]["block_efficiency"].append(summary["block_efficiency"])
    for m in METHODS:
        for metric in ("expected_accepted", "block_efficiency"):
            assert rows[m]["per_prompt"][metric] == pytest.approx(by_hand[m][metric])
        assert rows[m]["block_efficiency"] == pytest.approx(sum(by_hand[m]["block_efficiency"]) / 5)
        diffs = [a - b for a, b in zip(by_hand[m]["expected_accepted"], by_hand["spectr"]["expected_accepted"])]
        mean, low, high = rows[m]["vs_spectr"]["expected_accepted"]
        assert mean == pytest.approx(sum(diffs) / 5)
        if m != "spectr" and len(set(diffs)) > 1:
            assert (low, high) == pytest.approx(stats.t.interval(0.95, 4, loc=sum(diffs) / 5, scale=stats.sem(diffs)))
    assert rows["spectr"]["vs_spectr"]["expected_accepted"] == [0.0, 0.0, 0.0]  # the baseline against itself
    table = {r["method"]: r for r in data["table"]}
    assert table["sd"]["expected_accepted_minus_baseline"] == pytest.approx(rows["sd"]["vs_spectr"]["expected_accepted"][0])


def test_a_suite_set_at_seed_0_makes_the_frontier_benchs_means():
    """Seed 0, one repeat: prompt i has seed i, as in the frontier bench, so its means are the bench's."""
    data = compare_over("suite-5", methods=["spectr", "spectr_gbv", "as_bv"])[-1]
    assert data["command"].startswith("python -m spectr_gbv.bench.view compare --pair toy --prompt-set suite-5 ")
    argv = ("--pair toy --prompts 5 --drafts 2 --lengths 3 --temperatures 0.7 --methods spectr spectr_gbv as_bv "
            "--max-new-tokens 12").split()
    rows = frontier.main(argv + ["--out", str(_tmp())])
    for mine, theirs in zip(data["set_rules"], rows):
        assert mine["method"] == theirs["method"]
        assert mine["block_efficiency"] == pytest.approx(theirs["block_efficiency"])
        assert mine["expected_accepted"] == pytest.approx(theirs["expected_accepted"])


def _tmp():
    import tempfile
    return tempfile.mkdtemp(prefix="frontier-")


def test_a_baseline_that_is_not_ticked_is_refused():
    with pytest.raises(Exception, match="baseline rule must be one of the ticked methods"):
        compare_over("suite-5", baseline="traversal")
    assert compare_over("suite-5", baseline="")[-1]["baseline"] == "spectr"  # empty: SpecTr when ticked


def test_the_difference_chart_names_ties_within_noise():
    rows = [{"method": "spectr", "vs_spectr": {"expected_accepted": (0.0, 0.0, 0.0)}},
            {"method": "as_bv", "vs_spectr": {"expected_accepted": (0.05, -0.01, 0.11)}},
            {"method": "spectr_gbv", "vs_spectr": {"expected_accepted": (0.05, 0.01, 0.09)}},
            {"method": "sd", "vs_spectr": {"expected_accepted": (0.2, math.nan, math.nan)}}]
    assert set_figures.tied_with_baseline(rows, "spectr") == ["as_bv"]
    fig = set_figures.paired_difference_figure(
        [r | {"vs_spectr": {**r["vs_spectr"], "block_efficiency": (0.0, 0.0, 0.0)}} for r in rows], "spectr")
    assert "tie within noise with SpecTr: AS-BV" in fig.layout.title.subtitle.text
    assert len(fig.data) == 3  # every rule but the baseline


# ------------------------------------------------------------------ independent: median and range over seeds


def test_independent_runs_give_median_and_range_over_seeds_as_dots_below_five():
    out = compare_over("examples", coupled=False, repeats=3, methods=["spectr", "sd"])
    data, figure = out[-1], out[1]
    for method in ("spectr", "sd"):
        summary = data["set_seeds"][method]
        values = summary["values"]
        assert len(values) == 3 and summary["median"] == sorted(values)[1]
        assert (summary["low"], summary["high"]) == (min(values), max(values))
    dots = [trace for trace in figure.data if trace.mode == "markers"]
    assert sorted(len(trace.y) for trace in dots) == [3, 3] and "each dot: one seed" in figure.layout.title.subtitle.text
    many = set_figures.seeds_figure({"sd": [2.0, 2.5, 3.0, 2.2, 2.8]}, "examples", 4)
    (trace,) = many.data
    assert list(trace.y) == [2.5] and list(trace.error_y.array) == [0.5] and list(trace.error_y.arrayminus) == [0.5]


# ------------------------------------------------------------------ sweep over a set


def test_a_set_sweep_point_joins_every_prompts_runs():
    pair = get_pair("toy")
    ids = [pair.encode(t) for t in ["the", "the cat", "on the mat"]]
    base = DecodeConfig(method="sd", num_drafts=2, draft_length=3, temperature=0.7, max_new_tokens=10, seed=0)
    rows = list(iter_set_sweep(pair.target, pair.draft, ids, ["sd", "spectr"], "K", [1, 2], base, repeats=2))
    assert [(r["method"], r["value"]) for r in rows] == [("sd", 1), ("spectr", 1), ("sd", 2), ("spectr", 2)]
    alone = [list(iter_sweep(pair.target, pair.draft, one, ["sd", "spectr"], "K", [2], base, repeats=2)) for one in ids]
    joined = rows[3]
    assert joined["prompts"] == 3 and joined["repeat_block_efficiency"] == [
        v for each in alone for v in each[1]["repeat_block_efficiency"]]
    data = last(run_sweep("toy", "the cat", ["sd"], "K", "1, 2", 2, 3, 0.7, 10, 0, 2, "examples",
                          progress=no_progress))[-1]
    assert [r["repeats"] for r in data["rows"]] == [2 * set_size("examples", "toy")] * 2


# ------------------------------------------------------------------ repeats re-sized with the settings


def test_repeats_shrink_to_the_most_that_fits_when_the_settings_grow():
    methods = ["sd", "spectr", "spectr_gbv"]
    small = repeats_sizing.resize_compare_repeats("default", methods, 2, 4, 40, True, "prompt", 3)
    assert small["value"] == 3
    big = repeats_sizing.resize_compare_repeats("default", methods, 4, 8, 128, True, "prompt", 3)
    most = repeats_sizing.most_compare_repeats("default", 3, 4, 8, 128, True, "prompt")
    assert big["value"] == max(most, 1) < 3
    assert cost.fits_seconds(cost.compare_seconds("default", 3, 4, 8, 128, most, True), cost.CAP_FRACTION) or most == 0
    if most < 10:
        assert not cost.fits_seconds(cost.compare_seconds("default", 3, 4, 8, 128, most + 1, True), cost.CAP_FRACTION) \
            or not cost.fits_iterations([(4, 0), (4 * (most + 1), 8)], 128, "default", 2000)
    over_set = repeats_sizing.resize_compare_repeats("default", methods, 2, 4, 40, True, "suite-40", 3)
    assert over_set["value"] < 3  # a set multiplies each repeat's cost
    sweep = repeats_sizing.resize_sweep_repeats("default", ["sd", "spectr"], "K", "1, 2, 4", 2, 4, 40, "examples", 5)
    assert sweep["value"] == max(1, repeats_sizing.most_sweep_repeats("default", 2, "K", [1, 2, 4], 2, 4, 40,
                                                                      "examples")) < 5
    assert repeats_sizing.resize_sweep_repeats("default", ["sd"], "K", "not numbers", 2, 4, 40, "prompt", 5) == \
        {"__type__": "update"}  # values that do not parse: the box is left alone


def test_one_seed_is_said_before_the_run_not_to_rank():
    """Repeats at 1 draw no band and no speed chart: the box says so before the click; 2 or more do not."""
    one = repeats_sizing.resize_sweep_repeats("toy", ["sd", "spectr"], "K", "1, 2", 2, 4, 40, "prompt", 1)
    assert one["value"] == 1 and "one seed: no 95 % band and no speed chart, so the result will not rank" in one["info"]
    two = repeats_sizing.resize_compare_repeats("toy", ["sd", "spectr"], 2, 4, 40, True, "prompt", 2)
    assert two["value"] == 2 and "will not rank" not in two["info"]
