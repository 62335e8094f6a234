"""The Grid's saved results (components/tabs/grid_saved.py): the frontier.json files under assets/results drawn
without a run. Their cells are grid_cells' cells from the same file, number for number (what the printed
grid_cells command gives); a name that is not a listed file, a path outside the listing among them, is refused
with the names there are; a rule the file has no rows for is named."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import pytest

from components.render.kl_heatmap import kl_heatmap
from components.tabs import grid_saved
from spectr_gbv.bench.grid_cells import grid_cells, read_rows
from spectr_gbv.bench.grid_cells import main as grid_cells_command

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[1]
T07 = "frontier_grid/T0.7/frontier.json"  # the first feature draft's frontier at T = 0.7, 60 prompts
V2_T07 = "frontier_grid_v2/frontier.json@0.7"  # the README's frontier: the shipped draft at T = 0.7, 120 prompts


def same(a, b) -> bool:
    """Rows equal, a NaN equal to a NaN (a rule with no E[tau | drafts])."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def test_every_frontier_file_under_assets_results_is_listed_with_a_readable_label():
    files = sorted(grid_saved.RESULTS.rglob("frontier.json"))
    where = [p.relative_to(grid_saved.RESULTS).as_posix() for p in files]
    assert T07 in where and "cpu_frontier_default/frontier.json" in where
    # A file with one T is named by its path; a file with several, once per T as path@T.
    expected = []
    for path, key in zip(files, where):
        temperatures = sorted({float(row["T"]) for row in read_rows(path)})
        expected += [key] if len(temperatures) == 1 else [f"{key}@{t:g}" for t in temperatures]
    assert sorted(grid_saved.saved_results()) == sorted(expected)
    for key in expected:
        saved = grid_saved.saved_results()[key]
        assert saved.several == ("@" in key)
        assert not saved.several or key.endswith(f"@{saved.temperature:g}") and f"T {saved.temperature:g}" in saved.label
    labels = dict((key, label) for label, key in grid_saved.saved_choices())
    assert labels[T07] == "frontier_grid / T0.7 (60 prompts x 16 tokens)"
    assert labels["cpu_frontier_default/frontier.json"].startswith("cpu_frontier_default at T 0.7 (")
    assert labels[V2_T07] == "frontier_grid_v2 at T 0.7 (120 prompts x 16 tokens)"
    assert grid_saved.default_saved() == V2_T07


@pytest.mark.parametrize("key, value, rule, baseline", [
    (T07, "expected", "best", "spectr"),
    (T07, "gain", "best", "spectr"),
    ("frontier_grid/T1.0_L4_8/frontier.json", "gain", "as_bv", "spectr_gbv"),
    ("frontier_handoff/frontier.json", "gain", "as_bv_handoff", "as_bv"),
    (V2_T07, "gain", "best", "spectr"),  # a file holding several T: one of them
])
def test_the_cells_drawn_are_grid_cells_of_the_same_file_and_its_command_prints_them(key, value, rule, baseline,
                                                                                     capsys, monkeypatch):
    shown = grid_saved.show_saved(key, value, rule, baseline)
    path, _, at = key.partition("@")  # a file holding several T is named once per T, as path@T
    path = grid_saved.RESULTS / path
    temperature = ["--temperature", at] if at else []
    cells = grid_cells(read_rows(path), value, rule, baseline, float(at) if at else None)
    by_grid_cells = grid_cells_command([str(path), "--value", value, "--rule", rule, "--baseline", baseline,
                                        *temperature])
    table = shown.data["table"]
    assert len(table) == len(cells) == len(by_grid_cells) > 0
    for row, printed, c in zip(table, by_grid_cells, cells):
        assert same({k: row[k] for k in printed}, printed)  # every column grid_cells prints, the same number
        assert same({m: row[f"expected_accepted_{m}"] for m in c.values}, c.values)
    # The heatmap is the Grid's own drawing of those cells.
    assert shown.heatmap.to_dict() == kl_heatmap(cells, value, rule, baseline).to_dict()
    # The command under it: the frontier run recorded beside the file, then grid_cells on the file, whose output,
    # run from the repository's root, is the table.
    recorded, cells_line = shown.data["command"].splitlines()
    notes = path.with_name("frontier.md").read_text()
    assert recorded.startswith("python -m spectr_gbv.bench.frontier ") and f"`{recorded}`" in notes
    assert f"--out assets/results/{path.parent.relative_to(grid_saved.RESULTS).as_posix()}" in recorded
    words = shlex.split(cells_line)
    assert words[:3] == ["python", "-m", "spectr_gbv.bench.grid_cells"]
    monkeypatch.chdir(ROOT)
    capsys.readouterr()
    again = grid_cells_command(words[3:])
    assert same(again, by_grid_cells)
    assert [row["value"] for row in json.loads(capsys.readouterr().out)] == [row["value"] for row in table]


@pytest.mark.parametrize("name", ["../../etc/passwd", "/etc/passwd", "assets/results/" + T07,
                                  "frontier_grid/T0.7", "frontier_grid/../frontier_grid/T0.7/frontier.json",
                                  "", None, 3])
def test_a_name_that_is_not_a_listed_file_is_refused_naming_the_files_there_are(name):
    with pytest.raises(Exception, match="no saved result named") as refused:
        grid_saved.show_saved(name)
    assert T07 in str(refused.value) and "passwd" not in str(refused.value).split(":", 1)[1]


def test_bad_choices_are_named_and_a_rule_absent_from_the_file_is_refused():
    with pytest.raises(Exception, match="no rows for SD"):
        grid_saved.show_saved("frontier_handoff/frontier.json", "gain", "sd", "spectr")
    with pytest.raises(Exception, match="has no E\\[tau \\| drafts\\]"):
        grid_saved.show_saved(T07, "gain", "best", "spectr_gbv_released")
    with pytest.raises(Exception, match="cell value must be one of"):
        grid_saved.show_saved(T07, "median")
    with pytest.raises(Exception, match="both SpecTr"):
        grid_saved.show_saved(T07, "gain", "spectr", "spectr")


def test_a_file_that_is_not_a_frontier_result_is_left_out_and_the_others_listed(tmp_path, monkeypatch):
    good = tmp_path / "good" / "frontier.json"
    good.parent.mkdir()
    good.write_text((grid_saved.RESULTS / T07).read_text())
    for name, text in (("broken", "{not json"), ("other", '{"rows": [{"no": "T"}]}')):
        (tmp_path / name).mkdir()
        (tmp_path / name / "frontier.json").write_text(text)
    monkeypatch.setattr(grid_saved, "RESULTS", tmp_path)
    grid_saved.saved_results.cache_clear()
    try:
        assert list(grid_saved.saved_results()) == ["good/frontier.json"]
        assert grid_saved.show_saved("good/frontier.json").data["table"]
    finally:
        grid_saved.saved_results.cache_clear()
