"""Out of the page: Compare, Sweep and Fidelity offer what they drew as CSV and JSON, and the command line
that reproduces it; on the teaching pairs the command's rows equal the downloaded ones, seed for seed."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import shlex

import pytest

from components.tabs import compare, fidelity, sweep
from components.wiring.downloads import NO_COMMAND, downloads
from helpers import last
from spectr_gbv.bench import view

pytestmark = pytest.mark.unit


def _command_rows(command: str) -> list[dict]:
    """The command run in-process (its main(argv)), its printed JSON read back."""
    words = shlex.split(command)
    assert words[:3] == ["python", "-m", "spectr_gbv.bench.view"], command
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        returned = view.main(words[3:])
    assert json.loads(printed.getvalue()) == returned
    return returned


def _downloaded(data: dict) -> tuple[list[dict], list[dict], str]:
    files, command = downloads(data)
    csv_path, json_path = sorted(files)
    assert csv_path.endswith(".csv") and json_path.endswith(".json")
    with open(csv_path, newline="", encoding="utf-8") as handle:
        csv_rows = list(csv.DictReader(handle))
    saved = json.loads(open(json_path, encoding="utf-8").read())
    assert saved["command"] == command
    return csv_rows, saved["rows"], command


def _same_numbers(csv_rows: list[dict], json_rows: list[dict]) -> None:
    """The CSV says what the JSON says (numbers at full precision, lists space-separated)."""
    assert len(csv_rows) == len(json_rows)
    for flat, row in zip(csv_rows, json_rows):
        for key, value in row.items():
            if isinstance(value, float):
                assert float(flat[key]) == value, key
            elif isinstance(value, list):
                assert [float(v) for v in flat[key].split()] == [float(v) for v in value], key
            elif value is None:
                assert flat[key] == "", key
            else:
                assert flat[key] == str(value), key


@pytest.mark.parametrize("coupled", [True, False])
def test_compare_downloads_what_it_drew_and_its_command_prints_the_same_rows(coupled):
    outputs = last(compare.compare("toy", "the cat", ["sd", "gbv", "spectr_gbv"], 2, 3, 0.8, 16, 4, coupled, 3))
    data = outputs.data
    csv_rows, json_rows, command = _downloaded(data)
    _same_numbers(csv_rows, json_rows)
    assert "--seeds 4 5 6" in command and ("--independent" in command) != coupled
    assert {(r["method"], r["seed"]) for r in json_rows} == {(m, s) for m in ("sd", "gbv", "spectr_gbv") for s in (4, 5, 6)}
    assert {r["drafts_used"] for r in json_rows if r["method"] in ("sd", "gbv")} == {1}  # they ignore K
    drawn = dict(zip(outputs.efficiency.data[0].x, outputs.efficiency.data[0].y))  # the bars: mean over the seeds
    for row in json_rows:
        assert row["mean_block_efficiency"] == pytest.approx(drawn[row["label"]])
    assert _command_rows(command) == json_rows


def test_sweep_downloads_what_it_drew_and_its_command_prints_the_same_rows():
    outputs = last(sweep.run_sweep("toy", "the cat", ["sd", "spectr_gbv"], "K", "1, 2, 4", 2, 3, 0.8, 12, 7, 2))
    csv_rows, json_rows, command = _downloaded(outputs.data)
    _same_numbers(csv_rows, json_rows)
    assert len(json_rows) == 2 * 3 * 2 and {r["seed"] for r in json_rows} == {7, 8}
    assert {r["K"] for r in json_rows} == {1, 2, 4} and {r["drafts_used"] for r in json_rows if r["method"] == "sd"} == {1}
    lines = {t.name: list(t.y) for t in outputs.efficiency.data if t.mode == "lines+markers"}
    assert [r["mean_block_efficiency"] for r in json_rows if r["method"] == "spectr_gbv"][::2] == \
        pytest.approx(lines["SpecTr-GBV"])
    assert _command_rows(command) == json_rows


@pytest.mark.parametrize("pair, prompt_set, coupled, baseline", [
    ("toy", "examples", True, "gbv"), ("two-token", "suite-5", True, ""), ("toy", "suite-5", False, "")])
def test_compare_over_a_set_prints_a_command_that_prints_its_rows(pair, prompt_set, coupled, baseline):
    """Sets and repeats included: the rows per rule (coupled: paired differences against the baseline;
    independent: each seed's mean) come back from the printed command, number for number."""
    methods = ["sd", "gbv", "spectr_gbv"]
    outputs = last(compare.compare(pair, "", methods, 2, 2, 0.8, 10, 3, coupled, 2, prompt_set, baseline))
    csv_rows, json_rows, command = _downloaded(outputs.data)
    _same_numbers([{k: v for k, v in r.items() if k != "seeds"} for r in csv_rows],
                  [{k: v for k, v in r.items() if k != "seeds"} for r in json_rows])
    assert f"--prompt-set {prompt_set}" in command and "--seeds 3 --repeats 2" in command
    assert ("--independent" in command) != coupled and ("--baseline" in command) == coupled
    assert [r["method"] for r in json_rows] == compare.run_order(methods)
    if coupled:
        assert {r["baseline"] for r in json_rows} == {baseline or "sd"}
        assert all(r["prompts"] == len(outputs.data["prompts"]) for r in json_rows)
    else:
        assert all(len(r["seeds"]) == 2 for r in json_rows)
    assert _command_rows(command) == json_rows


def test_sweep_over_a_set_prints_a_command_that_prints_its_rows():
    outputs = last(sweep.run_sweep("toy", "", ["sd", "spectr_gbv"], "L", "1, 3", 2, 3, 0.8, 8, 0, 2, "suite-5"))
    _, json_rows, command = _downloaded(outputs.data)
    assert "--prompt-set suite-5" in command and "--prompt " not in command
    assert {r["prompt"] for r in json_rows} == {"[prompt set suite-5, 5 prompts]"}
    assert len(json_rows) == 2 * 2 * 2 * 5  # methods x values x (prompt, seed)
    assert _command_rows(command) == json_rows


def test_fidelity_downloads_what_it_drew_and_its_command_prints_the_same_rows():
    outputs = last(fidelity.run_fidelity("two-token", "A", "spectr_gbv_released", 1, 2, 1.0, 60, 2))
    csv_rows, json_rows, command = _downloaded(outputs.data)
    _same_numbers(csv_rows, json_rows)
    assert sum(r["count"] for r in json_rows) == 60 and "--runs 60 --tokens 2" in command
    bars = outputs.figure.data[1]  # the empirical law, as drawn
    assert list(bars.y) == pytest.approx([r["empirical"] for r in json_rows])
    assert _command_rows(command) == json_rows


def test_no_table_no_files():
    assert downloads(None) == (None, NO_COMMAND) and downloads({"stopped": "x"}) == (None, NO_COMMAND)


def test_every_result_view_has_a_download_box_and_a_command_wired_after_its_run():
    import gradio as gr

    import app

    demo = app.build_demo(default_pair="toy", default_prompt="the cat")
    by_id = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    for name in ("compare", "sweep", "fidelity", "grid"):
        files, command = by_id[f"{name}-downloads"], by_id[f"{name}-command"]
        assert isinstance(files, gr.File) and isinstance(command, gr.Code)
        fed = [d for d in demo.fns.values() if d.fn is downloads]
        assert any(files._id in [o._id for o in d.outputs] for d in fed), name
