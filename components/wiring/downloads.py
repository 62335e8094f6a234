"""Out of the page: a result view's rows as CSV and JSON files, and the command that reproduces them.

Compare, Sweep and Fidelity put in their data output a `table` (the rows of what they drew,
made by `spectr_gbv.bench.view`, the same functions the command line uses) and a `command`
(`spectr_gbv.bench.view.command_line`). After each run, `downloads` turns that data into two
files for a `gr.File` under the view and the command for the box beside it
(`wire_downloads`). It runs in the page's own process, after the run, so the files are written
where the server serves them from, whichever machine decoded.
"""

from __future__ import annotations

import csv
import json
import math
import tempfile
from pathlib import Path

import gradio as gr

from .run_events import QUICK

FILE_PREFIX = "spectr-gbv-"
NO_COMMAND = "# the command that reproduces the run shows here once a run has finished"


def _cell(value) -> str:
    """A CSV cell: lists as space-separated numbers, None and NaN empty, floats at full precision."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, (list, tuple)):
        return " ".join(_cell(v) for v in value)
    return repr(float(value)) if isinstance(value, float) else str(value)  # a numpy float reads as a number too


def _json_value(value):
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v) for v in value]
    return value


def write_table(rows: list[dict], view: str, command: str) -> list[str]:
    """The rows as `<view>.csv` and `<view>.json` (the JSON also carries the command) in a new temporary folder."""
    folder = Path(tempfile.mkdtemp(prefix=FILE_PREFIX))
    columns = list(dict.fromkeys(key for row in rows for key in row))
    csv_path, json_path = folder / f"{view}.csv", folder / f"{view}.json"
    with csv_path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(columns)
        writer.writerows([[_cell(row.get(c)) for c in columns] for row in rows])
    json_path.write_text(json.dumps({"command": command, "rows": _json_value(rows)}, indent=1, ensure_ascii=False),
                         encoding="utf-8")
    return [str(csv_path), str(json_path)]


def downloads(data) -> tuple[list[str] | None, str]:
    """(files, command) of a view's data output: None and the placeholder while there is no table."""
    if not isinstance(data, dict) or not data.get("table") or not data.get("command"):
        return None, NO_COMMAND
    view = data["table"][0].get("view", "results")
    return write_table(data["table"], view, data["command"]), data["command"]


def download_components(view: str) -> tuple[gr.File, gr.Code]:
    """The download box and the command box under a view's charts."""
    files = gr.File(label="Download what the charts drew (CSV, JSON)", file_count="multiple", interactive=False,
                    elem_id=f"{view}-downloads")
    command = gr.Code(value=NO_COMMAND, language="shell", label="The command that reproduces this run",
                      interactive=False, elem_id=f"{view}-command")
    return files, command


def wire_downloads(run, data: gr.JSON, files: gr.File, command: gr.Code) -> None:
    """After `run`: its data output made into the files and the command; a failed run empties them."""
    run.then(downloads, data, [files, command], **QUICK)
    run.failure(lambda: (None, NO_COMMAND), None, [files, command], **QUICK)
