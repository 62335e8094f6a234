"""One compact table from one or more `frontier.json` files (the README's frontier grid).

    python -m spectr_gbv.bench.frontier_summary assets/results/frontier_grid/T*/frontier.json
        [--out assets/results/frontier_grid/summary.md]

`python -m spectr_gbv.bench.frontier` writes every rule's row per configuration (K, L, T); run per
temperature, a grid is several files. This reads them and writes one row per configuration: the
mean E[tau | drafts] of the exact multi-draft rules, the best of them, and two paired differences
with their 95 % t-intervals (computed by the frontier command, per prompt): the best against
SpecTr (the issue's goal) and AS-BV against SpecTr-GBV★ (docs/algorithms.md §6.7); where AS-BV with
hand-off ran too, its paired difference against AS-BV (from the saved per-prompt values). Then
the tallies the README quotes, counted from those rows, never typed.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Sequence

from ..methods import METHODS
from .frontier import _cell, paired_interval

COLUMNS = ("spectr", "spectr_gbv", "as_bv", "as_bv_handoff", "traversal")


def load_rows(paths: Sequence[Path]) -> tuple[list[dict], list[dict]]:
    """All rows of the files, sorted by (K, L, T), and each file's header fields."""
    rows, headers = [], []
    for path in paths:
        saved = json.loads(Path(path).read_text())
        rows += saved["rows"]
        headers.append({k: saved.get(k) for k in ("pair", "prompts", "max_new_tokens", "configurations_done",
                                                  "configurations")} | {"path": str(path)})
    return sorted(rows, key=lambda r: (r["K"], r["L"], r["T"])), headers


def configurations(rows: list[dict]) -> dict[tuple, dict[str, dict]]:
    grouped: dict[tuple, dict[str, dict]] = {}
    for row in rows:
        grouped.setdefault((row["K"], row["L"], row["T"]), {})[row["method"]] = row
    return grouped


def _best_exact(by_method: dict[str, dict]) -> dict | None:
    candidates = [r for r in by_method.values()
                  if r["exact"] and METHODS[r["method"]].multi_draft and r.get("expected_accepted") is not None]
    return max(candidates, key=lambda r: r["expected_accepted"], default=None)


def _significant(interval) -> bool:
    return interval is not None and not math.isnan(interval[1]) and (interval[1] > 0 or interval[2] < 0)


def _interval(value) -> tuple[float, float, float] | None:
    """A saved (mean, lo, hi); JSON null (one prompt: no width) back to NaN."""
    return None if value is None else tuple(float("nan") if v is None else v for v in value)


def _paired(by_method: dict[str, dict], rule: str, reference: str):
    """The paired per-prompt difference of E[tau given drafts], rule − reference, where both ran."""
    if rule not in by_method or reference not in by_method:
        return None
    values = [by_method[m]["per_prompt"]["expected_accepted"] for m in (rule, reference)]
    return paired_interval(*values)


def summary_rows(rows: list[dict]) -> list[dict]:
    """Per configuration: E[tau] per column rule, the best exact multi-draft rule and the two differences."""
    out = []
    for (K, L, T), by_method in configurations(rows).items():
        best = _best_exact(by_method)
        as_bv = by_method.get("as_bv", {})
        out.append({
            "K": K, "L": L, "T": T,
            "expected": {m: by_method[m]["expected_accepted"] for m in COLUMNS if m in by_method},
            "best": None if best is None else best["method"],
            "best_vs_spectr": None if best is None or best["method"] == "spectr"
            else _interval(best.get("vs_spectr", {}).get("expected_accepted")),
            "as_bv_vs_spectr_gbv": _interval(as_bv.get("vs_spectr_gbv", {}).get("expected_accepted")),
            "handoff_vs_as_bv": _paired(by_method, "as_bv_handoff", "as_bv"),
        })
    return out


def tallies(summary: list[dict]) -> list[str]:
    n = len(summary)
    best_counts: dict[str, int] = {}
    for row in summary:
        best_counts[row["best"]] = best_counts.get(row["best"], 0) + 1
    beats_spectr = sum(1 for r in summary if _significant(r["best_vs_spectr"]) and r["best_vs_spectr"][0] > 0)
    shallow = [r for r in summary if r["L"] <= 3 and r["as_bv_vs_spectr_gbv"] is not None]
    shallow_ok = sum(1 for r in shallow if r["as_bv_vs_spectr_gbv"][0] >= 0)
    deep = [r for r in summary if r["L"] > 3 and r["as_bv_vs_spectr_gbv"] is not None]
    deep_ahead = sum(1 for r in deep if _significant(r["as_bv_vs_spectr_gbv"]) and r["as_bv_vs_spectr_gbv"][0] > 0)
    deep_behind = sum(1 for r in deep if _significant(r["as_bv_vs_spectr_gbv"]) and r["as_bv_vs_spectr_gbv"][0] < 0)
    lines = [
        "* Best exact multi-draft rule by E[tau given drafts]: "
        + ", ".join(f"{METHODS[m].label} in {c}" for m, c in sorted(best_counts.items(), key=lambda kv: -kv[1]) if m)
        + f" of {n} configurations.",
        f"* The best beats SpecTr outside the 95 % interval of the paired difference in {beats_spectr} of {n}.",
    ]
    if shallow:
        lines.append(f"* L ≤ 3: AS-BV ≥ SpecTr-GBV★ (mean paired difference ≥ 0) in {shallow_ok} of {len(shallow)}.")
    if deep:
        lines.append(f"* L > 3: AS-BV ahead of SpecTr-GBV★ outside the interval in {deep_ahead} of {len(deep)}, "
                     f"behind it outside the interval in {deep_behind}.")
    return lines


def markdown(summary: list[dict], headers: list[dict], command: str) -> str:
    files = "; ".join(f"`{h['path']}` ({h['prompts']} prompts x {h['max_new_tokens']} tokens"
                      + ("" if h.get("configurations_done") in (None, h.get("configurations"))
                         else f", partial: {h['configurations_done']} of {h['configurations']} configurations")
                      + ")" for h in headers)
    columns = [m for m in COLUMNS if any(r["expected"].get(m) is not None for r in summary)]  # rules that ran
    handoff = any(r["handoff_vs_as_bv"] is not None for r in summary)
    head = ["K", "L", "T", *(METHODS[m].label for m in columns), "best exact", "best − SpecTr",
            "AS-BV − SpecTr-GBV★", *(["AS-BV+H − AS-BV"] if handoff else [])]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in summary:
        cells = [str(r["K"]), str(r["L"]), str(r["T"])]
        cells += [f"{r['expected'][m]:.3f}" if r["expected"].get(m) is not None else "–" for m in columns]
        cells += [METHODS[r["best"]].label if r["best"] else "–",
                  "–" if r["best_vs_spectr"] is None else _cell(r["best_vs_spectr"]),
                  "–" if r["as_bv_vs_spectr_gbv"] is None else _cell(r["as_bv_vs_spectr_gbv"])]
        if handoff:
            cells.append("–" if r["handoff_vs_as_bv"] is None else _cell(r["handoff_vs_as_bv"]))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n\n".join([
        f"Mean E[tau given drafts] per configuration, coupled runs on the default pair (from {files}); "
        "differences are paired per prompt, mean [95 % t-interval], bold where the interval excludes 0. "
        f"Command: `{command}`.",
        "\n".join(lines),
        "\n".join(tallies(summary)),
    ])


def main(argv: Sequence[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="frontier.json files")
    parser.add_argument("--out", type=Path, default=None, help="also write the markdown here")
    args = parser.parse_args(argv)
    rows, headers = load_rows(args.files)
    command = "python -m spectr_gbv.bench.frontier_summary " + " ".join(
        [*map(str, args.files), *(["--out", str(args.out)] if args.out else [])])
    md = markdown(summary_rows(rows), headers, command)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(md + "\n")
    print(md)
    return md


if __name__ == "__main__":
    main()
