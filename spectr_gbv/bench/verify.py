"""Time one verification per method at K in {1, 4, 8}, L in {4, 8, 16} and K = 4, L = 6, V = 49152.

    python -m spectr_gbv.bench.verify [--repeats N] [--configs 4,6 ...] [--methods ...]
        [--device cpu|cuda] [--draft-head H] [--json PATH] [--markdown PATH]

Inputs are synthetic but realistic in shape: peaked random target distributions over a
49152-token vocabulary (the size of SmolLM2's), drafts sampled from a perturbed copy, so
acceptance is partial and every code path (intermediate stops, residuals, rho*) runs. With
--draft-head 8192 the draft can propose only 8,192 of the tokens, as the default draft's head
(AS-BV then works on that support, `spectr_gbv.methods.support`).

Every repeat draws a fresh input and every method verifies that same input, in an order that
rotates from repeat to repeat. Fresh inputs because a real decode never meets a node twice:
timing one input over and over would let AS-BV's node-LP cache answer from memory. The same
input for all methods because the ratios are then paired: `as_bv / spectr_gbv` is the median
over repeats of the per-input ratio, so a machine that slows down between repeats (this one is
shared) moves both sides of a ratio alike. Reported: median milliseconds per verification
(CPU time of the process on the CPU, wall time on a GPU; after one warm-up input), the ratios of `spectr_gbv` to `spectr` and of `as_bv` to
`spectr_gbv`, and the goal "as_bv at most 2x spectr_gbv at K = 4, L = 6" with the range of its
per-input ratios. Building the validated `VerifyInput` is timed separately (it is shared by
all methods).
"""

from __future__ import annotations

import argparse
import json
import platform
import shlex
import statistics
import sys
import time
from pathlib import Path

import torch

from ..methods import METHODS, VerifyInput
from ..randomness import TorchRandomness

VOCAB = 49152
CONFIGS = sorted([(K, L) for K in (1, 4, 8) for L in (4, 8, 16)] + [(4, 6)])
GOAL_CONFIG, GOAL_RATIO = (4, 6), 2.0  # the goal: as_bv <= 2x spectr_gbv at K = 4, L = 6


def synthetic_input(K: int, L: int, vocab: int, device: torch.device, seed: int,
                    draft_head: int | None = None) -> tuple[torch.Tensor, ...]:
    """One input; with `draft_head`, the draft can propose only that many tokens (a fixed random
    subset, as the default draft's 8,192-token head of the target's 49,152), the target all."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    # Distinct node distributions per draft position; drafts share the root node.
    target_logits = torch.randn(K, L + 1, vocab, generator=g) * 3.0
    target_logits[:, 0] = target_logits[0, 0].clone()
    target = torch.softmax(target_logits, -1)
    draft_logits = target_logits[:, :L] + torch.randn(K, L, vocab, generator=g) * 1.5
    if draft_head is not None and draft_head < vocab:
        head = torch.randperm(vocab, generator=torch.Generator().manual_seed(0))[:draft_head]
        outside = torch.ones(vocab, dtype=torch.bool)
        outside[head] = False
        draft_logits[..., outside] = float("-inf")
    draft = torch.softmax(draft_logits, -1)
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=g).reshape(K, L)
    return tokens.to(device), draft.to(device), target.to(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_ms(fn, device: torch.device) -> tuple[float, object]:
    """(milliseconds, fn()). On the CPU the clock is this process's CPU time: other jobs on a
    shared machine take the core away without inflating it. On a GPU, wall time after a sync."""
    clock = time.process_time if device.type == "cpu" else time.perf_counter
    _sync(device)
    start = clock()
    value = fn()
    _sync(device)
    return (clock() - start) * 1e3, value


def clock_name(device: torch.device) -> str:
    return "process CPU time" if device.type == "cpu" else "wall time"


def methods_for(K: int, names: list[str]) -> list[str]:
    return [name for name in names if METHODS[name].multi_draft or K == 1]


def run_config(K: int, L: int, names: list[str], repeats: int, device: torch.device, vocab: int = VOCAB,
               draft_head: int | None = None) -> dict:
    """One row: per method the median ms over `repeats` fresh inputs (input 0 is the warm-up),
    and every per-input ratio as_bv / spectr_gbv and spectr_gbv / spectr where both ran."""
    names = methods_for(K, names)
    samples: dict[str, list[float]] = {name: [] for name in ["build_input", *names]}
    for i in range(repeats + 1):
        tokens, draft, target = synthetic_input(K, L, vocab, device, seed=K * 100 + L + 1000 * i, draft_head=draft_head)
        build_ms, inp = timed_ms(lambda: VerifyInput.build(tokens, draft, target), device)
        times = {"build_input": build_ms}
        rotated = names[i % len(names):] + names[:i % len(names)] if names else []
        for name in rotated:
            generator = torch.Generator(device=device).manual_seed(i)
            times[name] = timed_ms(lambda: METHODS[name].verify(inp, TorchRandomness(generator)), device)[0]
        if i:  # input 0 warms up allocators and imports
            for name, ms in times.items():
                samples[name].append(ms)
    row = {"K": K, "L": L, "V": vocab, "draft_head": draft_head, "repeats": repeats}
    row.update({name: statistics.median(values) for name, values in samples.items()})
    for top, bottom in (("spectr_gbv", "spectr"), ("as_bv", "spectr_gbv")):
        if top in samples and bottom in samples:
            row[f"{top}/{bottom}"] = [a / b for a, b in zip(samples[top], samples[bottom])]
    return row


def run(repeats: int, device: torch.device, configs=CONFIGS, names: list[str] | None = None, vocab: int = VOCAB,
        draft_head: int | None = None) -> list[dict]:
    names = list(METHODS) if names is None else names
    return [run_config(K, L, names, repeats, device, vocab, draft_head) for K, L in configs]


def ratio_cell(row: dict, key: str) -> str:
    return f"{statistics.median(row[key]):.2f}" if key in row else "–"


def goal_line(rows: list[dict]) -> str:
    row = next((r for r in rows if (r["K"], r["L"]) == GOAL_CONFIG and "as_bv/spectr_gbv" in r), None)
    if row is None:
        return f"Goal (as_bv <= {GOAL_RATIO:g}x spectr_gbv at K = {GOAL_CONFIG[0]}, L = {GOAL_CONFIG[1]}): not measured in this run."
    ratios = row["as_bv/spectr_gbv"]
    median = statistics.median(ratios)
    verdict = "met" if median <= GOAL_RATIO else "NOT met"
    return (f"Goal (as_bv <= {GOAL_RATIO:g}x spectr_gbv at K = {GOAL_CONFIG[0]}, L = {GOAL_CONFIG[1]}, V = {row['V']}"
            f"{', draft head ' + str(row['draft_head']) if row.get('draft_head') else ''}): "
            f"**{verdict}**, median ratio {median:.2f} over {len(ratios)} fresh inputs "
            f"(per-input range {min(ratios):.2f}–{max(ratios):.2f}; {sum(r <= GOAL_RATIO for r in ratios)} of "
            f"{len(ratios)} at most {GOAL_RATIO:g}).")


def markdown(rows: list[dict], device: torch.device, command: str | None = None) -> str:
    names = [name for name in METHODS if any(name in row for row in rows)]
    header = "| K | L | build input | " + " | ".join(names) + " | spectr_gbv / spectr | as_bv / spectr_gbv |"
    lines = [f"Generated by `{command}`.", ""] if command else []
    vocab = rows[0]["V"] if rows else VOCAB
    head = rows[0].get("draft_head") if rows else None
    support = f" (the draft proposes {head} of them)" if head else ""
    lines += [
        f"Verification time per iteration, median ms over fresh inputs ({clock_name(device)}; {device.type}, "
        f"{platform.processor() or platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads), "
        f"V = {vocab}{support}; ratios are medians of per-input ratios:",
        "",
        header,
        "|" + "---|" * (len(names) + 5),
    ]
    for row in rows:
        cells = [f"{row[n]:.2f}" if n in row else "–" for n in names]
        lines.append(f"| {row['K']} | {row['L']} | {row['build_input']:.2f} | " + " | ".join(cells)
                     + f" | {ratio_cell(row, 'spectr_gbv/spectr')} | {ratio_cell(row, 'as_bv/spectr_gbv')} |")
    lines += ["", goal_line(rows)]
    return "\n".join(lines)


def parse_config(text: str) -> tuple[int, int]:
    try:
        K, L = (int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a configuration is K,L (two integers, e.g. 4,6), not {text!r}") from None
    if K < 1 or L < 1:
        raise argparse.ArgumentTypeError(f"K and L must be at least 1, not {text!r}")
    return K, L


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="fresh inputs per configuration (after one warm-up)")
    parser.add_argument("--configs", type=parse_config, nargs="+", default=CONFIGS, metavar="K,L")
    parser.add_argument("--methods", nargs="+", choices=list(METHODS), default=list(METHODS))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--draft-head", type=int, default=None, metavar="H",
                        help="the draft proposes only H tokens (the default draft: 8192); default: all V")
    parser.add_argument("--json", help="also write the rows as JSON here")
    parser.add_argument("--markdown", help="also write the table (with this command line) here")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    device = torch.device(args.device)
    rows = run(args.repeats, device, args.configs, args.methods, draft_head=args.draft_head)
    command = "python -m spectr_gbv.bench.verify " + shlex.join(sys.argv[1:] if argv is None else argv)
    table = markdown(rows, device, command.strip())
    print(table)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    if args.markdown:
        Path(args.markdown).write_text(table + "\n")


if __name__ == "__main__":
    main()
