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

pytestmark = pytest.mark.unit


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


def test_the_summary_reads_a_grid_split_over_files(tmp_path):
    """Two frontier runs (one per T) make one compact table; its best rule and tallies come from the rows."""
    from spectr_gbv.bench import frontier_summary

    methods = ["spectr", "spectr_gbv", "as_bv", "as_bv_handoff", "traversal"]
    paths = []
    for T in ("0.7", "1.0"):
        out = tmp_path / f"T{T}"
        frontier.main(["--pair", "toy", "--prompts", "3", "--drafts", "2", "--lengths", "2", "4", "--temperatures", T,
                       "--max-new-tokens", "6", "--methods", *methods, "--out", str(out)])
        paths.append(out / "frontier.json")
    md = frontier_summary.main([*map(str, paths), "--out", str(tmp_path / "summary.md")])
    assert (tmp_path / "summary.md").read_text().strip() == md.strip()

    rows, _ = frontier_summary.load_rows(paths)
    summary = frontier_summary.summary_rows(rows)
    assert [(r["K"], r["L"], r["T"]) for r in summary] == [(2, 2, 0.7), (2, 2, 1.0), (2, 4, 0.7), (2, 4, 1.0)]
    for r in summary:
        saved = {row["method"]: row for row in rows if (row["K"], row["L"], row["T"]) == (r["K"], r["L"], r["T"])}
        assert r["best"] == max(methods, key=lambda m: saved[m]["expected_accepted"])
        assert r["as_bv_vs_spectr_gbv"] == pytest.approx(tuple(saved["as_bv"]["vs_spectr_gbv"]["expected_accepted"]))
        diffs = [a - b for a, b in zip(saved["as_bv_handoff"]["per_prompt"]["expected_accepted"],
                                       saved["as_bv"]["per_prompt"]["expected_accepted"])]
        assert r["handoff_vs_as_bv"][0] == pytest.approx(sum(diffs) / len(diffs), abs=1e-12)
    table = [line for line in md.splitlines() if line.startswith("| 2 |")]
    assert len(table) == 4
    shallow = [r for r in summary if r["L"] <= 3]
    ok = sum(r["as_bv_vs_spectr_gbv"][0] >= 0 for r in shallow)
    assert f"AS-BV ≥ SpecTr-GBV★ (mean paired difference ≥ 0) in {ok} of {len(shallow)}." in md
    assert f"of {len(summary)} configurations." in md
