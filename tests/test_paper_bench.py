"""The paper-suite benchmark's prompt set and its pure reporting functions (the runs are a command)."""

from __future__ import annotations

import json
import math

import pytest

from spectr_gbv.bench import paper
from spectr_gbv.training.distill import HELD_OUT_TEXTS, ROUNDS, SEQUENCES, make_prompts

pytestmark = pytest.mark.unit


def test_prompt_suite_has_five_families_of_two_dozen_unseen_prompts():
    suite = json.loads(paper.SUITE.read_text())
    families = suite["families"]
    assert list(families) == ["humaneval", "gsm8k", "mgsm", "lm1b", "alpaca"]
    assert all(len(p) == 24 and len(set(p)) == 24 for p in families.values())
    # every round the draft's recipe samples (round r seeded with r), and the prompts it measures on
    training = {text for r in range(ROUNDS) for _, text in make_prompts(SEQUENCES, seed=r)} | HELD_OUT_TEXTS
    assert not training & {p for prompts in families.values() for p in prompts}
    assert "Licence" in suite["about"]


def test_mean_ci_is_the_t_interval():
    mean, half = paper.mean_ci([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.302653 * 1 / math.sqrt(3), rel=1e-5)
    assert math.isnan(paper.mean_ci([5.0])[1])


def cell(method, family, be, sr=1.0, expected=True):
    taus = [int(b - 1) for b in be]
    return {"method": method, "family": family, "be": be, "sr": [sr] * len(be), "taus": taus,
            "expected": [t + 0.01 for t in taus] if expected else None}


def test_tables_follow_the_numbers():
    bases = dict(zip(paper.METHODS, (1.5, 1.8, 1.6, 2.0, 2.2, 1.9, 2.1)))
    cells = [cell(m, f, [bases[m] + i * 0.1, bases[m] + i * 0.1 + 0.2], expected=m != "spectr_gbv_released")
             for f in ("a", "b") for i, m in enumerate(paper.METHODS)]
    table = paper.main_markdown(cells, ["a", "b"])
    assert table.count("\n") == len(paper.METHODS) + 1 and "| spectr_gbv | 2.40 ± " in table
    assert {"as_bv", "traversal"} <= set(paper.METHODS)
    theory = paper.theory_markdown(cells)
    assert "no theory: lossy rule" in theory and "| sd |" in theory and "| as_bv |" in theory


def test_trend_settings_are_the_main_setting_and_the_three_ablation_axes():
    assert paper.TREND_SETTINGS[0] == paper.MAIN_SETTING == (paper.DEFAULT_K, paper.DEFAULT_L, paper.DEFAULT_T)
    assert [s[0] for s in paper.TREND_AXES["K"]] == paper.ABLATIONS["K"]
    assert [s[1] for s in paper.TREND_AXES["L"]] == paper.ABLATIONS["L"]
    assert [s[2] for s in paper.TREND_AXES["T"]] == paper.ABLATIONS["T"]
    assert len(set(paper.TREND_SETTINGS)) == len(paper.TREND_SETTINGS) and set(paper.TREND_RULES) == set(paper.TREND_SETTINGS)
    assert {"as_bv", "traversal", "sd", "gbv"} <= set(paper.TREND_RULES[paper.MAIN_SETTING])
    assert "spectr_gbv_released" not in paper.TREND_RULES[paper.MAIN_SETTING]


def test_speedup_trend_reads_the_timed_L_ablation():
    abl = {"L": [{"method": "spectr_gbv", "value": L, "sr": [sr + 0.01 * j for j in range(4)]}
                 for L, sr in zip(paper.ABLATIONS["L"], (1.0, 1.4, 1.2, 0.8))]}
    trend = paper.speedup_trend(abl)
    assert trend.verdict == "holds" and "L = 16" in trend.difference
