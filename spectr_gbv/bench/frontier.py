"""The coupled frontier of the exact multi-draft rules: every rule judges the same drafts with the same draws.

    python -m spectr_gbv.bench.frontier [--pair default] [--prompts 120] [--drafts 2 4 8] [--lengths 2 4 6 8]
        [--temperatures 0.4 0.7 1.0] [--methods ...] [--max-new-tokens 64] [--out assets/results/frontier]
        [--resume [--chunk-prompts 20]]

For every (K, L, T) and every prompt, one coupled run (`spectr_gbv.coupled`): the draft proposes K
blocks, the target scores them once, every listed rule verifies that input with identically seeded
coins, and the leader (spectr_gbv, else the first exact rule listed) advances the context. Per
prompt and rule it keeps the mean over iterations of E[tau | drafts] (the theory line: the coins
integrated out, so the lowest-variance measure of a rule) and the block efficiency 1 + mean tau.

Reported per configuration and rule: the mean over prompts, and the mean and 95 % t-interval of
the paired per-prompt differences against spectr and against spectr_gbv (a prompt is the unit:
iterations within one are dependent, prompts are not). An interval that excludes 0 is a
difference the rules make, not sampling noise. The released rule is labelled lossy and has no
theory line. Writes `frontier.json` and `frontier.md` under --out.

With --resume [--chunk-prompts 20] the grid is measured in chunks (one configuration over that many
prompts) saved under OUT/chunks as each finishes, temperatures in the order listed; run again, it
skips the chunks on disk, refuses chunks measured under other settings, and assembles the same
`frontier.json` an uninterrupted run writes (`spectr_gbv.bench.frontier_chunks`).

Prompts: on the default pair the paper suite (`assets/prompts/paper_suite.json`), taken across its
five families in turn; on the teaching pairs, short prompts in their own words.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path
from typing import Sequence


from ..prompt_sets import PAPER_SUITE, TEACHING_PROMPTS, suite_prompts  # noqa: F401 - TEACHING_PROMPTS: importable here
from ..config import DecodeConfig
from ..coupled import CoupledRun, coupled_steps
from ..intervals import t_interval
from ..methods import METHODS
from ..pairs import DEFAULT_KEY, get_pair

SUITE = PAPER_SUITE
DEFAULT_METHODS = ["sd", "gbv", "spectr", "spectr_gbv", "as_bv", "as_bv_handoff", "traversal", "spectr_gbv_released"]
REFERENCES = ("spectr", "spectr_gbv")
METRICS = ("expected_accepted", "block_efficiency")


def prompt_texts(pair_key: str, count: int) -> list[str]:
    """`count` prompts: the paper suite's families in turn (a model pair) or the teaching prompts, cycled."""
    return suite_prompts(pair_key, count)


def paired_interval(values: Sequence[float], reference: Sequence[float]) -> tuple[float, float, float]:
    """Mean of the paired differences and its 95 % t-interval (lo, hi); NaN width for one pair."""
    return t_interval([a - b for a, b in zip(values, reference)])


def leader_of(methods: Sequence[str]) -> str:
    """The method whose drafts drive the coupled run: the registry's leader (`leads_coupled`) if listed, else
    the first exact one."""
    return next((m for m in methods if METHODS[m].leads_coupled), None) or next(m for m in methods if METHODS[m].exact)


def prompt_means(run, methods: Sequence[str]) -> dict[str, dict[str, float]]:
    """One coupled run's per-rule means over its iterations: E[tau | drafts] (NaN without a theory line)
    and block efficiency; a prompt's values in `rule_rows`."""
    means = {}
    for m in methods:
        summary = run.summary(m)
        expected = summary["mean_expected_accepted"]
        means[m] = {"expected_accepted": float("nan") if expected is None else expected,
                    "block_efficiency": summary["block_efficiency"]}
    return means


def rule_rows(per_prompt: dict[str, dict[str, list[float]]], methods: Sequence[str], K: int, L: int, T: float,
         references: Sequence[str] = REFERENCES) -> list[dict]:
    """One row per rule: its means over prompts and, against each listed reference, the paired
    differences' mean and 95 % t-interval (`paired_interval`; a prompt is the unit)."""
    out = []
    for m in methods:
        count = len(per_prompt[m]["block_efficiency"])
        row = {"K": K, "L": L, "T": T, "prompts": count, "method": m, "label": METHODS[m].label,
               "exact": METHODS[m].exact, "per_prompt": per_prompt[m]}
        for metric in METRICS:
            values = per_prompt[m][metric]
            row[metric] = sum(values) / len(values)
            for ref in references:
                if ref in per_prompt:
                    row.setdefault(f"vs_{ref}", {})[metric] = paired_interval(values, per_prompt[ref][metric])
        out.append(row)
    return out


def measure(pair, prompt_ids: list[list[int]], methods: Sequence[str], K: int, L: int, T: float, max_new_tokens: int,
            log=lambda line: None, references: Sequence[str] = REFERENCES, on_step=lambda step: None,
            first_seed: int = 0) -> list[dict]:
    """One configuration: per-prompt coupled runs, then one row per rule (`rule_rows`). A prompt's seed
    is its index in the whole list (`first_seed` for the first given): a chunk of prompts gets the
    numbers the whole list gets.

    `on_step` sees every coupled step as it finishes (the app's Grid ticks its budget and its Stop there)."""
    per_prompt: dict[str, dict[str, list[float]]] = {m: {k: [] for k in METRICS} for m in methods}
    for seed, ids in enumerate(prompt_ids, start=first_seed):
        config = DecodeConfig(method=leader_of(methods), num_drafts=K, draft_length=L, temperature=T,
                              max_new_tokens=max_new_tokens, seed=seed)
        run = CoupledRun(config, list(methods), list(ids))
        for step in coupled_steps(pair.target, pair.draft, ids, methods, config):
            run.steps.append(step)
            on_step(step)
        for m, means in prompt_means(run, methods).items():
            for metric in METRICS:
                per_prompt[m][metric].append(means[metric])
    log(f"K = {K}, L = {L}, T = {T}: {len(prompt_ids)} prompts")
    return rule_rows(per_prompt, methods, K, L, T, references)


def _cell(interval) -> str:
    if interval is None or math.isnan(interval[0]):
        return "–"
    mean, lo, hi = interval
    if math.isnan(lo):
        return f"{mean:+.3f}"
    mark = "**" if lo > 0 or hi < 0 else ""
    return f"{mark}{mean:+.3f} [{lo:+.3f}, {hi:+.3f}]{mark}"


def markdown(rows: list[dict]) -> str:
    refs = [r for r in REFERENCES if any(f"vs_{r}" in row for row in rows)]
    head = ["K", "L", "T", "rule", "E[tau given drafts]", "block efficiency"]
    for ref in refs:
        head += [f"E[tau] − {METHODS[ref].label}", f"BE − {METHODS[ref].label}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        label = row["label"] if row["exact"] or "lossy" in row["label"] else f"{row['label']} (lossy)"
        expected = "–" if math.isnan(row["expected_accepted"]) else f"{row['expected_accepted']:.3f}"
        cells = [str(row["K"]), str(row["L"]), str(row["T"]), label, expected, f"{row['block_efficiency']:.3f}"]
        for ref in refs:
            diffs = row.get(f"vs_{ref}", {})
            cells += [_cell(None if ref == row["method"] else diffs.get("expected_accepted")),
                      _cell(None if ref == row["method"] else diffs.get("block_efficiency"))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def winners(rows: list[dict]) -> list[str]:
    """Per configuration: the exact rule with the highest mean E[tau | drafts], and its margin over SpecTr."""
    lines = []
    for key, group in itertools.groupby(rows, key=lambda r: (r["K"], r["L"], r["T"])):
        exact = [r for r in group if r["exact"] and not math.isnan(r["expected_accepted"])]
        if not exact:
            continue
        best = max(exact, key=lambda r: r["expected_accepted"])
        margin = best.get("vs_spectr", {}).get("expected_accepted")
        verdict = "" if margin is None or best["method"] == "spectr" else (
            f"; over SpecTr {_cell(margin)}" + (" (outside the 95 % interval)" if margin[1] > 0 else " (not significant)"))
        lines.append(f"* K = {key[0]}, L = {key[1]}, T = {key[2]}: {best['label']} ({best['expected_accepted']:.3f}){verdict}")
    return lines


def without_nan(value):
    """NaN (no theory line, one prompt) as JSON null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: without_nan(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_nan(v) for v in value]
    return value


def write_results(out: Path, pair, args, rows: list[dict], done: int, total: int, note: str) -> str:
    """`frontier.md` and `frontier.json` under `out` for the configurations measured so far; the markdown.
    `note` closes the header: the command, its time and how much of the grid this is."""
    md = "\n\n".join([
        f"Pair: {pair.info.label}; target {pair.target.name}, draft {pair.draft.name}; {args.prompts} prompts, "
        f"{args.max_new_tokens} new tokens each; coupled (same drafts and draws for every rule; drafts from "
        f"{leader_of(args.methods)}). Means over prompts; differences are paired per prompt, mean "
        f"[95 % t-interval], bold where the interval excludes 0. {note}",
        markdown(rows),
        "**Best exact rule by E[tau given drafts]**\n\n" + "\n".join(winners(rows)),
    ])
    (out / "frontier.md").write_text(md + "\n")
    (out / "frontier.json").write_text(json.dumps(without_nan({
        "pair": args.pair, "prompts": args.prompts, "max_new_tokens": args.max_new_tokens,
        "configurations_done": done, "configurations": total, "rows": rows}), indent=1))
    return md


def run_in_chunks(pair, args, texts: list[str], prompt_ids: list[list[int]], command: str,
                  log) -> tuple[list[dict], str]:
    """--resume: measure the chunks not on disk yet (`frontier_chunks`), temperature by temperature
    as listed, and assemble the results from every chunk after each one."""
    from . import frontier_chunks as chunks

    out = Path(args.out)
    store = chunks.ChunkStore(out, chunks.run_settings(pair, args))
    ranges = chunks.chunk_ranges(len(prompt_ids), args.chunk_prompts)
    digests = [chunks.prompts_digest(texts[start:stop]) for start, stop in ranges]
    grid = chunks.grid_order(args.drafts, args.lengths, args.temperatures)
    todo = len(grid) * len(ranges)

    def assemble() -> tuple[list[dict], str]:
        complete = store.assembled(grid, ranges, digests)
        rows = [row for key in grid if key in complete for row in rule_rows(complete[key], args.methods, *key)]
        finished = sum(store.load(*key, *r, d) is not None for key in grid for r, d in zip(ranges, digests))
        progress = "" if finished == todo else (f"; partial: {finished} of {todo} chunks of {args.chunk_prompts} "
                                                "prompts, resumable with the same command")
        note = (f"Command: `{command.strip()}` ({store.seconds():.0f} s measuring over "
                f"{finished} chunks{progress}).")
        return rows, write_results(out, pair, args, rows, len(complete), len(grid), note)

    for K, L, T in chunks.work_order(args.drafts, args.lengths, args.temperatures):
        for (start, stop), prompts in zip(ranges, digests):
            if store.load(K, L, T, start, stop, prompts) is not None:
                continue
            begun = time.perf_counter()
            measured = measure(pair, prompt_ids[start:stop], args.methods, K, L, T, args.max_new_tokens,
                               first_seed=start)
            store.save(K, L, T, start, stop, prompts, {row["method"]: row["per_prompt"] for row in measured},
                       time.perf_counter() - begun)
            log(f"K = {K}, L = {L}, T = {T}: prompts {start}..{stop - 1} "
                f"({time.perf_counter() - begun:.0f} s)")
            assemble()
    return assemble()


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default=DEFAULT_KEY, help=f"a key of spectr_gbv.pairs.PAIRS (default {DEFAULT_KEY})")
    parser.add_argument("--prompts", type=int, default=120)
    parser.add_argument("--drafts", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--lengths", type=int, nargs="+", default=[2, 4, 6, 8])
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.4, 0.7, 1.0])
    parser.add_argument("--methods", nargs="+", default=DEFAULT_METHODS)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--out", default="assets/results/frontier")
    parser.add_argument("--resume", action="store_true",
                        help="measure in chunks saved under OUT/chunks as each finishes, skipping those already there "
                             "(temperatures in the order listed); results assembled from the chunks")
    parser.add_argument("--chunk-prompts", type=int, default=None, help="prompts per chunk with --resume (default 20)")
    args = parser.parse_args(argv)
    unknown = [m for m in args.methods if m not in METHODS]
    if unknown:
        parser.error(f"unknown methods {unknown}; choose from {', '.join(METHODS)}")
    if args.chunk_prompts is not None and not args.resume:
        parser.error("--chunk-prompts needs --resume")
    args.chunk_prompts = args.chunk_prompts or 20
    if args.chunk_prompts < 1:
        parser.error("--chunk-prompts must be at least 1")
    started = time.perf_counter()
    log = lambda line: print(f"[{time.perf_counter() - started:6.0f} s] {line}", file=sys.stderr, flush=True)  # noqa: E731
    pair = get_pair(args.pair)
    texts = prompt_texts(args.pair, args.prompts)
    prompt_ids = [pair.encode(text) for text in texts]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    command = "python -m spectr_gbv.bench.frontier " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.resume:
        from .frontier_chunks import SettingsMismatch

        try:
            rows, md = run_in_chunks(pair, args, texts, prompt_ids, command, log)
        except SettingsMismatch as refused:
            parser.exit(2, f"{parser.prog}: refused: {refused}\n")
        print(md)
        return rows
    configs = list(itertools.product(args.drafts, args.lengths, args.temperatures))
    rows: list[dict] = []
    for done, (K, L, T) in enumerate(configs, start=1):
        rows += measure(pair, prompt_ids, args.methods, K, L, T, args.max_new_tokens, log)
        # Written after every configuration, so an interrupted grid keeps what it measured
        # (the header says how much of it that is).
        progress = "" if done == len(configs) else f"; partial: {done} of {len(configs)} configurations so far"
        md = write_results(out, pair, args, rows, done, len(configs),
                           f"Command: `{command.strip()}` ({time.perf_counter() - started:.0f} s{progress}).")
    print(md)
    return rows


if __name__ == "__main__":
    main()
