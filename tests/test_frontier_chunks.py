"""The resumable frontier (`python -m spectr_gbv.bench.frontier --resume`), on the Toy world.

Methodology: a grid cut into chunks must give the numbers of the one-pass command, however often
it is stopped. So the one-pass command's `frontier.json` is the reference: the chunked run must
write it byte for byte (a chunk's prompts keep their seeds), also when it is interrupted after
some chunks and resumed (the resumed run measures only the chunks that are missing). A folder
never mixes two runs: other settings, or other prompts under the same indices, are refused
before anything is measured, and a damaged chunk is measured again.
"""

from __future__ import annotations

import json

import pytest

from spectr_gbv.bench import frontier, frontier_chunks, frontier_summary

pytestmark = pytest.mark.unit

GRID = ["--pair", "toy", "--prompts", "5", "--drafts", "2", "--lengths", "2", "3", "--max-new-tokens", "6",
        "--methods", "spectr", "spectr_gbv", "as_bv", "spectr_gbv_released"]
RESUME = [*GRID, "--temperatures", "0.7", "0.4", "--resume", "--chunk-prompts", "2"]
CHUNKS = 2 * 2 * 3  # (L, T) configurations x prompt ranges 0-1, 2-3, 4
MEASURE = frontier.measure  # the real one, which `chunk_runs` wraps


class Interrupted(Exception):
    """Stands for the run being killed."""


def chunk_runs(monkeypatch, stop_after: int | None = None) -> list[tuple]:
    """Records every chunk measured (K, L, T, first seed); raises Interrupted at chunk `stop_after` + 1."""
    measured = []

    def counted(pair, prompt_ids, methods, K, L, T, max_new_tokens, log=lambda line: None, first_seed=0):
        if stop_after is not None and len(measured) == stop_after:
            raise Interrupted
        measured.append((K, L, T, first_seed))
        return MEASURE(pair, prompt_ids, methods, K, L, T, max_new_tokens, log, first_seed=first_seed)

    monkeypatch.setattr(frontier, "measure", counted)
    return measured


@pytest.fixture(scope="module")
def one_pass(tmp_path_factory) -> str:
    """The one-pass command's frontier.json, temperatures in ascending order."""
    out = tmp_path_factory.mktemp("one_pass")
    frontier.main([*GRID, "--temperatures", "0.4", "0.7", "--out", str(out)])
    return (out / "frontier.json").read_text()


def test_chunk_ranges_cover_the_prompts_once():
    assert frontier_chunks.chunk_ranges(5, 2) == [(0, 2), (2, 4), (4, 5)]
    assert frontier_chunks.chunk_ranges(120, 20)[-1] == (100, 120) and len(frontier_chunks.chunk_ranges(120, 20)) == 6
    assert frontier_chunks.work_order([2, 4], [2], [0.7, 0.4])[:2] == [(2, 2, 0.7), (4, 2, 0.7)]


def test_the_chunked_grid_is_the_one_pass_grid(tmp_path, monkeypatch, one_pass):
    measured = chunk_runs(monkeypatch)
    frontier.main([*RESUME, "--out", str(tmp_path)])
    assert (tmp_path / "frontier.json").read_text() == one_pass
    assert len(measured) == CHUNKS and len(list((tmp_path / "chunks").glob("*.json"))) == CHUNKS
    # Whole temperatures first, in the order listed.
    assert [T for _, _, T, _ in measured] == [0.7] * 6 + [0.4] * 6
    assert "partial" not in (tmp_path / "frontier.md").read_text()


def test_an_interrupted_run_resumed_writes_what_an_uninterrupted_one_writes(tmp_path, monkeypatch, one_pass):
    chunk_runs(monkeypatch, stop_after=4)
    with pytest.raises(Interrupted):
        frontier.main([*RESUME, "--out", str(tmp_path)])
    assert len(list((tmp_path / "chunks").glob("*.json"))) == 4
    # What was finished is already readable: one configuration (three chunks) of four.
    partial = json.loads((tmp_path / "frontier.json").read_text())
    assert (partial["configurations_done"], partial["configurations"]) == (1, 4)
    assert {(r["K"], r["L"], r["T"]) for r in partial["rows"]} == {(2, 2, 0.7)}
    assert "partial: 4 of 12 chunks" in (tmp_path / "frontier.md").read_text()
    assert "(5 prompts x 6 tokens, partial: 1 of 4 configurations)" in frontier_summary.main(
        [str(tmp_path / "frontier.json")])

    measured = chunk_runs(monkeypatch)
    frontier.main([*RESUME, "--out", str(tmp_path)])
    assert len(measured) == CHUNKS - 4 and (2, 2, 0.7, 0) not in measured
    assert (tmp_path / "frontier.json").read_text() == one_pass

    measured = chunk_runs(monkeypatch)  # a finished run resumed measures nothing and writes the same
    frontier.main([*RESUME, "--out", str(tmp_path)])
    assert measured == [] and (tmp_path / "frontier.json").read_text() == one_pass


@pytest.mark.parametrize("change, named", [
    (["--max-new-tokens", "7"], "max_new_tokens: 6 on disk, 7 now"),
    (["--chunk-prompts", "3"], "chunk_prompts: 2 on disk, 3 now"),
    (["--methods", "spectr", "spectr_gbv", "as_bv"], "methods:"),
])
def test_other_settings_are_refused_before_anything_is_measured(tmp_path, monkeypatch, capsys, change, named):
    args = [*RESUME, "--out", str(tmp_path)]
    chunk_runs(monkeypatch, stop_after=2)
    with pytest.raises(Interrupted):
        frontier.main(args)
    before = sorted(p.read_text() for p in (tmp_path / "chunks").glob("*.json"))

    measured = chunk_runs(monkeypatch)
    changed = list(args)
    for flag_at in [i for i, a in enumerate(changed) if a == change[0]]:  # replace the flag's values
        end = next((j for j in range(flag_at + 1, len(changed)) if changed[j].startswith("--")), len(changed))
        del changed[flag_at:end]
    with pytest.raises(SystemExit) as refused:
        frontier.main([*changed, *change])
    assert refused.value.code == 2 and measured == []
    message = capsys.readouterr().err
    assert "refused" in message and named in message and "another --out folder" in message
    assert sorted(p.read_text() for p in (tmp_path / "chunks").glob("*.json")) == before


def test_a_chunk_of_other_prompts_is_refused_and_a_damaged_one_measured_again(tmp_path, monkeypatch, capsys, one_pass):
    frontier.main([*RESUME, "--out", str(tmp_path)])
    first = tmp_path / "chunks" / "K2_L2_T0.7_p000-002.json"
    saved = json.loads(first.read_text())
    first.write_text(json.dumps(saved | {"prompts_digest": "0" * 16}))
    with pytest.raises(SystemExit):
        frontier.main([*RESUME, "--out", str(tmp_path)])
    assert "other prompts 0..1" in capsys.readouterr().err

    first.write_text(json.dumps(saved)[:100])  # a chunk cut short
    measured = chunk_runs(monkeypatch)
    frontier.main([*RESUME, "--out", str(tmp_path)])
    assert measured == [(2, 2, 0.7, 0)] and (tmp_path / "frontier.json").read_text() == one_pass


def test_chunk_prompts_needs_resume(tmp_path):
    with pytest.raises(SystemExit):
        frontier.main([*GRID, "--chunk-prompts", "2", "--out", str(tmp_path)])
