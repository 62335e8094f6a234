"""The paper-suite benchmark's prompt set and its pure reporting functions (the runs are a command)."""

from __future__ import annotations

import json
import math

import pytest

from spectr_gbv.bench import paper
from spectr_gbv.distill import HELD_OUT_TEXTS, ROUNDS, SEQUENCES, make_prompts


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


def test_tables_and_trend_checks_follow_the_numbers():
    cells = [cell(m, f, [base + i * 0.1, base + i * 0.1 + 0.2], expected=m != "spectr_gbv_released")
             for f in ("a", "b") for i, (m, base) in enumerate(zip(paper.METHODS, (1.5, 1.8, 1.6, 2.0, 2.1)))]
    table = paper.main_markdown(cells, ["a", "b"])
    assert table.count("\n") == len(paper.METHODS) + 1 and "| spectr_gbv | 2.40 ± " in table
    theory = paper.theory_markdown(cells)
    assert "no theory: lossy rule" in theory and "| sd |" in theory
    abl = {axis: [{"method": m, "value": v, "be": [1 + j + (0.3 if m == "spectr_gbv" else 0)], "sr": [1.0 + (j == 1) * 0.2]}
                  for j, v in enumerate(values) for m in paper.ABLATION_METHODS[axis]]
           for axis, values in paper.ABLATIONS.items()}
    checks = paper.trends(cells, abl)
    assert checks[0].startswith("SpecTr-GBV BE above sd: holds")
    assert any(c.startswith("BE rising with K") and "holds" in c for c in checks)
    assert any(c.startswith("SR peaking inside the L range: holds") for c in checks)
    assert any(c.startswith("BE stable in T") and "does not hold" in c for c in checks)  # 1.3 .. 3.3 is not stable
