"""The Grid tab's saved results: a frontier.json under assets/results drawn as the Grid draws a run, no model run.

`python -m spectr_gbv.bench.frontier --out FOLDER` writes FOLDER/frontier.json (the rows) and
FOLDER/frontier.md (whose header records the command). The results the README and docs/results.md
cite live under assets/results; this module lists them (`saved_results`), and draws one with the
Grid's cell value, rule and baseline: the same cells (`spectr_gbv.bench.grid_cells`), the same
heatmap (`components.render.kl_heatmap`), the same table for the downloads, and the commands that
reproduce it (the file's recorded frontier command, then the grid_cells command on the file).

A saved result is named by its key (its path under assets/results, `@T` added where a file holds
several temperatures): only the listed keys are read, so no name reaches a file outside the
listing. It is the gradio_client endpoint `/grid_saved`.
"""

from __future__ import annotations

import json
import logging
import re
import shlex
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import gradio as gr

from spectr_gbv import METHODS
from spectr_gbv.bench.grid_cells import BEST, CELL_VALUES, DEFAULT_BASELINE, EXPECTED, cell_row, grid_cells, read_rows

from ..render.kl_heatmap import kl_heatmap
from ..wiring.errors import user_errors
from ..wiring.outputs import NamedOutputs, skip
from ..wiring.runs import pair_label
from ..wiring.settings import check_choice, shown

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "assets" / "results"
FILE_NAME = "frontier.json"
DEFAULT_SAVED = "frontier_grid_v2/frontier.json@0.7"  # the README's frontier: the shipped draft at the app's default T
LOG = logging.getLogger("spectr_gbv.grid_saved")
RECORDED = re.compile(r"Command: `(python -m spectr_gbv\.bench\.frontier[^`]*)`")


@dataclass(frozen=True)
class SavedResult:
    key: str  # what the dropdown and the API name it by
    path: Path
    temperature: float
    several: bool  # the file holds several temperatures: its grid_cells command names this one
    label: str


def _where(path: Path) -> str:
    return path.relative_to(RESULTS).as_posix()


@cache
def saved_results() -> dict[str, SavedResult]:
    """Every frontier.json under assets/results, by key, one entry per temperature it holds (read once: the files
    are the repository's)."""
    found = {}
    for path in sorted(RESULTS.rglob(FILE_NAME)):
        try:
            rows = read_rows(path)
            temperatures = sorted({float(r["T"]) for r in rows})
        except (OSError, ValueError, KeyError, TypeError):  # not a frontier result: left out, the page still opens
            LOG.warning("%s does not read as a frontier result; not listed", path)
            continue
        if not rows:
            continue
        folder = " / ".join(path.parent.relative_to(RESULTS).parts)
        size = f"{rows[0]['prompts']} prompts x {_about(path)[1]} tokens"
        for t in temperatures:
            several = len(temperatures) > 1
            key = f"{_where(path)}@{t:g}" if several else _where(path)
            named = several or f"T{t:g}" not in folder  # the folder's name does not say its T already
            label = f"{folder}{f' at T {t:g}' if named else ''} ({size})"
            found[key] = SavedResult(key, path, t, several, label)
    return found


@cache
def _about(path: Path) -> tuple[str, object]:
    """The file's pair and new tokens per prompt (what its header names)."""
    document = json.loads(path.read_text())
    return document.get("pair", "default"), document.get("max_new_tokens", "?")


def pair_of(path: Path) -> str:
    """The pair a saved result was measured on."""
    return _about(path)[0]


@cache
def saved_cells(pair_key: str) -> tuple[tuple[SavedResult, object], ...]:
    """Every cell (`grid_cells.Cell`, best exact rule by E[tau | drafts]) of the saved results measured on this pair,
    with its result; the default saved result's first (the README's, at the app's default T)."""
    saved = sorted((r for r in saved_results().values() if pair_of(r.path) == pair_key),
                   key=lambda r: r.key != DEFAULT_SAVED)
    return tuple((result, cell) for result in saved
                 for cell in grid_cells(read_rows(result.path), temperature=result.temperature))


def saved_choices() -> list[tuple[str, str]]:
    return [(saved.label, key) for key, saved in saved_results().items()]


def default_saved() -> str | None:
    keys = list(saved_results())
    return DEFAULT_SAVED if DEFAULT_SAVED in keys else (keys[0] if keys else None)


def check_saved(key) -> SavedResult:
    """A listed saved result; anything else (a path, a made-up name) is refused with the names there are."""
    saved = saved_results()
    if not isinstance(key, str) or key not in saved:
        names = ", ".join(saved) or "none in this copy of the app"
        raise ValueError(f"no saved result named {shown(key)}: the saved results are {names}")
    return saved[key]


def _check_rule(name: str, value, rules: list[str], allow_best: bool) -> str:
    """A rule of the file's exact rules (the lossy one has no E[tau | drafts]), or "best" where allowed."""
    exact = [m for m in rules if METHODS[m].exact] if rules else []
    allowed = ([BEST] if allow_best else []) + exact
    if value in METHODS and value not in exact:
        why = (f"{METHODS[value].label} has no E[tau | drafts]" if not METHODS[value].exact
               else f"the saved result has no rows for {METHODS[value].label}")
        raise ValueError(f"the {name} must be an exact rule of the saved result: {why} (choose one of: "
                         f"{', '.join(allowed)})")
    return check_choice(f"the {name}", value, allowed)


def recorded_command(path: Path) -> str | None:
    """The frontier command the file was made with: its own `command`, else the one its frontier.md records."""
    own = json.loads(path.read_text()).get("command")
    if own:
        return own
    notes = path.with_name("frontier.md")
    found = RECORDED.search(notes.read_text()) if notes.is_file() else None
    return found.group(1).strip() if found else None


def cells_command(saved: SavedResult, cell_value: str, rule: str, baseline: str) -> str:
    words = ["python -m spectr_gbv.bench.grid_cells", shlex.quote(f"assets/results/{_where(saved.path)}"),
             "--value", cell_value, "--rule", rule, "--baseline", baseline]
    if saved.several:
        words += ["--temperature", repr(saved.temperature)]
    return " ".join(words)


@dataclass
class SavedGrid(NamedOutputs):
    """The Grid's outputs (header, heatmap, data), filled from a saved file."""

    header: object = skip()
    heatmap: object = skip()
    data: object = skip()


@user_errors
def show_saved(saved=DEFAULT_SAVED, cell_value=EXPECTED, rule=BEST, baseline=DEFAULT_BASELINE) -> SavedGrid:
    """A saved frontier result as the Grid's heatmap, its downloads' table and the commands that reproduce it."""
    chosen = check_saved(saved)
    rows = [r for r in read_rows(chosen.path) if float(r["T"]) == chosen.temperature]
    rules = list(dict.fromkeys(r["method"] for r in rows))
    cell_value = check_choice("the cell value", cell_value, CELL_VALUES)
    rule = _check_rule("rule", rule, rules, allow_best=True)
    baseline = _check_rule("baseline", baseline, rules, allow_best=False)
    if cell_value != EXPECTED and rule == baseline:
        raise ValueError(f"the rule and the baseline are both {METHODS[rule].label}: choose two different rules")
    cells = grid_cells(rows, cell_value, rule, baseline, chosen.temperature)
    pair, tokens = _about(chosen.path)
    table = [{"view": "grid", "saved": chosen.key, **cell_row(c, cell_value), "max_new_tokens": tokens,
              **{f"expected_accepted_{m}": v for m, v in c.values.items()}} for c in cells]
    recorded = recorded_command(chosen.path)
    command = "\n".join(filter(None, [recorded, cells_command(chosen, cell_value, rule, baseline)]))
    drafts, lengths = sorted({c.K for c in cells}), sorted({c.L for c in cells})
    header = (f"**Saved result** `assets/results/{_where(chosen.path)}` · {pair_label(pair)} · K "
              f"{', '.join(map(str, drafts))} x L {', '.join(map(str, lengths))} · T = {chosen.temperature:g} · "
              f"{cells[0].prompts if cells else 0} prompts of {tokens} tokens · coupled runs of "
              f"{', '.join(METHODS[m].label for m in rules)} · nothing was run: the file's numbers, drawn")
    data = {"saved": chosen.key, "file": f"assets/results/{_where(chosen.path)}", "pair": pair,
            "T": chosen.temperature, "drafts": drafts, "lengths": lengths, "max_new_tokens": tokens,
            "methods": rules, "cell_value": cell_value, "rule": rule, "baseline": baseline, "table": table,
            "command": command}
    return SavedGrid(header, kl_heatmap(cells, cell_value, rule, baseline), data)


@dataclass
class SavedControls:
    chosen: gr.Dropdown
    button: gr.Button


def controls() -> SavedControls:
    """The saved result's dropdown and its button (inside the Grid tab)."""
    with gr.Row():
        chosen = gr.Dropdown(saved_choices(), value=default_saved(), label="Saved result (no model runs)",
                             info="the frontier runs under assets/results, drawn with the cell value, rule and "
                                  "baseline above", elem_id="grid-saved", scale=3)
        button = gr.Button("Show saved", variant="secondary", elem_id="grid-saved-button", scale=1)
    return SavedControls(chosen, button)
