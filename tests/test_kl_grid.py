"""The K x L grid (components/tabs/grid_view.py): its cells, heatmap, sizing and command, on the Toy world.

The cells' values and paired intervals are the frontier's (`spectr_gbv.bench.frontier`) computed per
(K, L); each cell names its rule, and each mark is read off one interval (the best ties the runner-up;
no gain over the baseline; too few prompts to rank); a grid whose estimate is over the
budget is refused before any run; Stop keeps the configurations that finished; and the command shown
under the grid makes rows from which the same cells follow, number for number.
"""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace

import gradio as gr
import pytest

from components.render.kl_heatmap import NO_GAIN_MARK, TIE_MARK, kl_heatmap
from components.render.palette import LOSSY_RED
from components.tabs import grid_view
from components.wiring.admission import cost, grid_size
from components.wiring.runs import STOPS
from spectr_gbv.bench import frontier
from spectr_gbv.bench.grid_cells import GAIN, cell, cell_row, covers_zero, grid_cells
from spectr_gbv.bench.grid_cells import main as grid_cells_command
from spectr_gbv.intervals import t_interval

pytestmark = pytest.mark.unit

SMALL = ("toy", ["sd", "spectr", "spectr_gbv"], "1 2", "2 3", 0.8, 3, 6, "expected", "best", "spectr")


def rows_of(K: int, L: int, per_rule: dict[str, list[float]], T: float = 0.7) -> list[dict]:
    """Frontier-shaped rows of one configuration: each rule's per-prompt E[tau | drafts]."""
    return [{"K": K, "L": L, "T": T, "method": m, "exact": m != "spectr_gbv_released",
             "per_prompt": {"expected_accepted": values}} for m, values in per_rule.items()]


def last(stream):
    *_, final = stream
    return final


# ------------------------------------------------------------------ cells (pure)


def test_the_best_exact_rule_its_paired_interval_and_the_rules_tied_or_coinciding_with_it():
    rows = rows_of(2, 4, {"spectr": [1.0, 1.2, 1.1, 1.3], "as_bv": [1.5, 1.6, 1.4, 1.7],
                          "as_bv_handoff": [1.5, 1.6, 1.4, 1.7], "spectr_gbv": [1.4, 1.7, 1.3, 1.7],
                          "spectr_gbv_released": [9.0, 9.0, 9.0, 9.0]})
    c = cell(rows)
    assert c.rule == "as_bv" and c.value == pytest.approx(1.55)  # the lossy rule is never the best
    assert c.interval == pytest.approx(t_interval([0.5, 0.4, 0.3, 0.4]))
    assert c.same == ("as_bv_handoff",)  # identical values: said to coincide, not called a tie
    assert c.tied == ("spectr_gbv",) and c.tie is True  # best minus SpecTr-GBV: [0.05, 0.0, 0.1, 0.0], covers 0
    assert "spectr" not in c.tied


def test_a_gain_is_the_mean_paired_difference_and_no_gain_where_its_interval_covers_zero():
    clear = cell(rows_of(1, 2, {"spectr": [1.0, 1.1, 1.2], "gbv": [1.3, 1.5, 1.6]}), GAIN, "gbv", "spectr")
    assert clear.value == pytest.approx(0.36666666) and clear.no_gain is False and clear.tie is False
    noisy = cell(rows_of(1, 2, {"spectr": [1.0, 1.1, 1.2], "gbv": [1.3, 0.9, 1.2]}), GAIN, "gbv", "spectr")
    assert covers_zero(noisy.interval) and noisy.no_gain is True
    assert noisy.best == "gbv" and noisy.runner_up == "spectr" and noisy.tie is True and noisy.unranked
    row = cell_row(noisy, GAIN)
    assert row["no_gain_over_baseline"] is True and row["best_ties_runner_up"] is True
    assert row["too_few_prompts_to_rank"] is True


def test_the_tie_mark_is_the_runner_ups_interval_alone_and_no_gain_the_baselines():
    # The v2 frontier's case: the best is clearly ahead of the baseline and of the runner-up, while a rule
    # further down has a noisy interval against it. No tie is marked; that rule is named in the hover.
    rows = rows_of(2, 4, {"spectr": [1.0, 1.1, 1.2, 1.0], "as_bv": [1.49, 1.59, 1.69, 1.49],
                          "as_bv_handoff": [1.5, 1.6, 1.7, 1.5], "spectr_gbv": [1.8, 1.3, 1.9, 1.28]})
    c = cell(rows)
    assert (c.best, c.runner_up) == ("as_bv_handoff", "spectr_gbv")
    assert c.tie is True and "spectr_gbv" in c.tied  # noisy: covers 0
    c = cell(rows_of(2, 4, {"spectr": [1.0, 1.1, 1.2, 1.0], "as_bv": [1.49, 1.59, 1.69, 1.49],
                            "as_bv_handoff": [1.5, 1.6, 1.7, 1.5], "spectr_gbv": [1.7, 1.1, 1.8, 1.0]}))
    assert (c.best, c.runner_up) == ("as_bv_handoff", "as_bv")
    assert c.tie is False and c.no_gain is False and not c.unranked and c.tied == ("spectr_gbv",)
    fig = kl_heatmap([c], "expected", "best", "spectr")
    (heat,) = fig.data
    assert heat.text[0][0] == "AS-BV+H<br>1.575"  # named, no mark: the runner-up's interval excludes 0
    assert "within noise of the best: SpecTr-GBV" in heat.customdata[0][0]
    assert TIE_MARK not in fig.layout.title.subtitle.text


def test_cells_cover_every_k_and_l_at_one_temperature_and_say_what_is_missing():
    rows = [r for K in (1, 2) for L in (2, 4) for T in (0.4, 0.7)
            for r in rows_of(K, L, {"spectr": [1.0, 1.0 + K], "gbv": [1.0 + L, 2.0]}, T)]
    with pytest.raises(ValueError, match="several temperatures"):
        grid_cells(rows)
    cells = grid_cells(rows, temperature=0.4)
    assert [(c.K, c.L, c.T) for c in cells] == [(1, 2, 0.4), (1, 4, 0.4), (2, 2, 0.4), (2, 4, 0.4)]
    with pytest.raises(ValueError, match="no rows for as_bv"):
        grid_cells(rows, temperature=0.4, baseline="as_bv")


# ------------------------------------------------------------------ the heatmap (pure)


def test_the_heatmap_has_k_rows_and_l_columns_names_rules_marks_and_shows_the_intervals_on_hover():
    rows = [r for K in (1, 4) for L in (2, 6) for r in
            rows_of(K, L, {"spectr": [1.0, 1.1, 1.2], "gbv": [1.3, 1.5, 1.6] if K == 1 else [1.3, 0.9, 1.2]})]
    cells = grid_cells(rows, GAIN, "best", "spectr")
    fig = kl_heatmap(cells, GAIN, "best", "spectr")
    (heat,) = fig.data
    assert list(heat.y) == ["1", "4"] and list(heat.x) == ["2", "6"]
    assert heat.z[0][0] == pytest.approx(cells[0].value) and heat.z[1][1] == pytest.approx(cells[3].value)
    assert heat.text[0][0] == f"GBV<br>{cells[0].value:+.3f}"  # K = 1: named, a clear gain, no mark
    # K = 4: the gain is noise, and GBV against SpecTr (its runner-up) too: too few prompts to rank
    assert heat.text[1][0] == f"GBV<br>{cells[2].value:+.3f} {TIE_MARK}{NO_GAIN_MARK}"
    written = {(a.x, a.y): a.text for a in fig.layout.annotations}  # what the reader sees on each cell
    assert written[0, 1] == heat.text[1][0] and written[1, 0] == heat.text[0][1] and len(written) == 4
    assert "GBV (ignores K)" in heat.customdata[0][0] and "[" in heat.customdata[0][0]
    assert "no gain over SpecTr" in heat.customdata[1][0] and "too few prompts to rank" in heat.customdata[1][0]
    subtitle = fig.layout.title.subtitle.text.replace("<br>", " ")
    assert f"{TIE_MARK} ties the runner-up" in subtitle and f"{NO_GAIN_MARK} no gain over SpecTr" in subtitle
    assert "grey: too few prompts to rank" in subtitle
    assert len(fig.layout.shapes) == 2  # the two K = 4 cells, veiled
    assert LOSSY_RED.lower() not in {colour.lower() for _, colour in heat.colorscale}  # red means lossy


def test_an_empty_grid_says_so_instead_of_drawing_nothing():
    fig = kl_heatmap([], "expected", "best", "spectr", note="stopped before the first configuration")
    assert "stopped before the first configuration" in fig.layout.annotations[0].text


# ------------------------------------------------------------------ sizing


def test_the_defaults_fit_their_budget_on_the_default_pair_and_seconds_on_the_teaching_pairs():
    rules = grid_view.default_rules(grid_view.default_compare())
    for key in ("default", "toy", "two-token"):
        update, tokens = grid_view.sizes_for_pair(key, grid_view.default_compare())
        prompts = update["value"]
        assert prompts >= 2 and update["info"] == grid_view.prompts_info(key)
        seconds = grid_size.grid_seconds(key, grid_size.DEFAULT_DRAFTS, grid_size.DEFAULT_LENGTHS, tokens, prompts,
                                         rules)
        limit = grid_size.TEACHING_SECONDS if key != "default" else cost.DEFAULT_FRACTION * cost.budget_seconds()
        assert seconds <= limit
    assert grid_size.grid_seconds("default", [2], [4], 16, 4, 6) > grid_size.grid_seconds("default", [2], [4], 16, 2, 6)


def test_a_grid_over_the_budget_is_refused_before_anything_runs_with_what_would_fit(monkeypatch):
    monkeypatch.setattr(frontier, "measure", lambda *a, **k: pytest.fail("a run started"))
    monkeypatch.setattr(grid_view, "get_pair", lambda *a, **k: pytest.fail("a model loaded"))
    with pytest.raises(gr.Error, match=r"not started: at most \d+ prompts fit"):
        list(grid_view.run_grid("default", ["sd", "spectr"], "2 4", "2 4", 0.7, 60, 16, "expected", "best", "spectr"))
    with pytest.raises(gr.Error, match="not even 2 prompts fit"):
        list(grid_view.run_grid("default", None, "2 4 8", "2 4 6 8", 0.7, 20, 200, "expected", "best", "spectr"))


def test_fit_to_the_budget_cuts_the_prompts_to_what_the_server_starts():
    args = ("default", ["sd", "spectr"], "2 4", "2 4", 60, 16, "best", "spectr")
    fitted = grid_view.fit_prompts(*args)
    assert 2 <= fitted < 60
    grid_size.check_grid_fits("default", [2, 4], [2, 4], 16, fitted, 2)  # accepted now
    with pytest.raises(ValueError, match="not started"):
        grid_size.check_grid_fits("default", [2, 4], [2, 4], 16, fitted + 1, 2)
    assert grid_view.fit_prompts("toy", ["sd"], "1 2", "2", 3, 8, "best", "spectr") == 3  # it fits already: kept
    with pytest.raises(ValueError, match="not even 2 prompts fit"):
        grid_view.fit_prompts("default", None, "2 4 8", "2 4 6 8", 20, 256, "best", "spectr")


@pytest.mark.parametrize("change, message", [
    ({2: "0 2"}, r"a K value must be in \[1, 8\], got '0'"),
    ({3: ["x"]}, r"a L value must be a number"),
    ({2: 5}, "the K values must be text such as '1 2 4'"),
    ({5: 1}, r"prompts must be in \[2, 120\]"),
    ({7: "median"}, "the cell value must be one of expected, gain"),
    ({8: "spectr_gbv_released"}, "must be an exact rule: SpecTr-GBV as released"),
    ({7: "gain", 8: "spectr"}, "both SpecTr: choose two different rules"),
    ({0: 7}, "the model pair must be the name of a pair"),
])
def test_bad_input_gets_a_message_naming_the_setting(change, message):
    args = list(SMALL)
    for index, value in change.items():
        args[index] = value
    with pytest.raises(gr.Error, match=message):
        list(grid_view.run_grid(*args))


# ------------------------------------------------------------------ a run, Stop, and the command


def test_the_printed_command_reproduces_the_views_numbers(tmp_path):
    final = last(grid_view.run_grid(*SMALL))
    data = final.data
    assert data["configurations_done"] == 4 and data["stopped"] is None and len(data["table"]) == 4
    run, cells = (shlex.split(line) for line in data["command"].splitlines())
    assert run[:3] == ["python", "-m", "spectr_gbv.bench.frontier"]
    assert cells[:3] == ["python", "-m", "spectr_gbv.bench.grid_cells"]
    run[run.index("--out") + 1] = str(tmp_path)
    rows = frontier.main(run[3:])
    assert {r["method"] for r in rows} == {"sd", "spectr", "spectr_gbv"}
    printed = grid_cells_command([str(tmp_path / "frontier.json"), *cells[4:]])  # the file the first one wrote
    shown = [{k: row[k] for k in printed[0]} for row in data["table"]]
    assert shown == printed  # every number: values, rules, intervals, ties
    assert printed == [cell_row(c, "expected") for c in grid_cells(rows, "expected", "best", "spectr")]


def test_the_cells_command_reads_a_frontier_file_with_several_temperatures(tmp_path, capsys):
    rows = [r for T in (0.4, 1.0) for r in rows_of(2, 4, {"spectr": [1.0, 1.2], "gbv": [1.5, None]}, T)]
    path = tmp_path / "frontier.json"
    path.write_text(json.dumps({"rows": rows}))
    with pytest.raises(SystemExit):
        grid_cells_command([str(path)])
    assert "several temperatures (0.4, 1): choose one" in capsys.readouterr().err
    (printed,) = grid_cells_command([str(path), "--temperature", "1.0"])
    assert printed["rule"] == "spectr" and printed["T"] == 1.0  # GBV's null (no value) is not a best


def test_stop_keeps_the_configurations_that_finished():
    request = SimpleNamespace(session_hash="grid-stop-test")
    stream = grid_view.run_grid(*SMALL, request=request)
    first, second = next(stream), next(stream)  # the empty grid, then the first configuration
    assert first.data["configurations_done"] == 0 and second.data["configurations_done"] == 1
    STOPS.ask(request.session_hash)
    final = last(stream)
    assert "you pressed Stop" in final.data["stopped"] and "you pressed Stop" in final.header
    assert final.data["configurations_done"] == 1 and len(final.data["table"]) == 1
    assert last(grid_view.run_grid(*SMALL, request=request)).data["stopped"] is None  # the request was taken


def test_the_lossy_rule_is_left_out_and_the_rule_and_baseline_are_always_run():
    assert grid_view.measured_rules(["spectr_gbv_released", "sd"], "as_bv", "gbv") == ["sd", "gbv", "as_bv"]
    assert grid_view.measured_rules([], "best", "spectr") == ["spectr"]
