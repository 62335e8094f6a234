"""The coupled frontier command (`python -m spectr_gbv.bench.frontier`), on the Toy world with tiny settings.

Methodology: run the command end to end (two prompts, K = 2, L = 2, 6 tokens) and check the
files it writes against a coupled run done here by hand: the per-prompt numbers must be those of
`spectr_gbv.coupled` for the same seeds, a rule's paired difference against itself is exactly 0,
and the paired interval is the t-interval scipy computes.
"""

from __future__ import annotations

import json
import math

import pytest
from scipy import stats

from spectr_gbv.bench import frontier
from spectr_gbv.config import DecodeConfig
from spectr_gbv.coupled import coupled_run
from spectr_gbv.pairs import get_pair


def test_paired_interval_is_the_t_interval_of_the_differences():
    a, b = [1.0, 2.5, 2.0, 3.5], [0.5, 2.0, 2.5, 2.0]
    mean, lo, hi = frontier.paired_interval(a, b)
    diffs = [x - y for x, y in zip(a, b)]
    expected = stats.t.interval(0.95, len(diffs) - 1, loc=sum(diffs) / 4, scale=stats.sem(diffs))
    assert mean == pytest.approx(sum(diffs) / 4) and (lo, hi) == pytest.approx(expected)
    assert math.isnan(frontier.paired_interval([1.0], [0.0])[1])


def test_frontier_command_on_the_toy_world(tmp_path):
    methods = ["spectr", "spectr_gbv", "as_bv", "traversal", "spectr_gbv_released"]
    rows = frontier.main(["--pair", "toy", "--prompts", "2", "--drafts", "2", "--lengths", "2", "--temperatures", "0.7",
                          "--max-new-tokens", "6", "--methods", *methods, "--out", str(tmp_path)])
    saved = json.loads((tmp_path / "frontier.json").read_text())
    assert [r["method"] for r in saved["rows"]] == methods and saved["rows"][0]["prompts"] == 2
    md = (tmp_path / "frontier.md").read_text()
    assert "| SpecTr-GBV as released (lossy) |" in md and "Best exact rule" in md

    pair = get_pair("toy")
    for seed, text in enumerate(frontier.prompt_texts("toy", 2)):
        run = coupled_run(pair.target, pair.draft, pair.encode(text), methods,
                          DecodeConfig(method="spectr_gbv", num_drafts=2, draft_length=2, temperature=0.7,
                                       max_new_tokens=6, seed=seed))
        for row in rows:
            summary = run.summary(row["method"])
            assert row["per_prompt"]["block_efficiency"][seed] == pytest.approx(summary["block_efficiency"])
            if row["exact"]:
                assert row["per_prompt"]["expected_accepted"][seed] == pytest.approx(summary["mean_expected_accepted"])
    by_method = {r["method"]: r for r in rows}
    assert by_method["spectr"]["vs_spectr"]["expected_accepted"] == (0.0, 0.0, 0.0)
    assert by_method["as_bv"]["vs_spectr_gbv"]["block_efficiency"][0] == pytest.approx(
        by_method["as_bv"]["block_efficiency"] - by_method["spectr_gbv"]["block_efficiency"])
    assert saved["rows"][-1]["expected_accepted"] is None  # the released rule has no theory line


def test_unknown_methods_are_refused(tmp_path):
    with pytest.raises(SystemExit):
        frontier.main(["--pair", "toy", "--methods", "nope", "--out", str(tmp_path)])
