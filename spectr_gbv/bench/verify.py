"""Time one verification per method at K in {1, 4, 8}, L in {4, 8, 16} and K = 4, L = 6, V = 49152.

    python -m spectr_gbv.bench.verify [--repeats N] [--device cpu|cuda] [--json PATH]

Inputs are synthetic but realistic in shape: peaked random target distributions over a
49152-token vocabulary (the size of SmolLM2's), drafts sampled from a perturbed copy, so
acceptance is partial and every code path (intermediate stops, residuals, rho*) runs.
Reported: median milliseconds per verification (after one warm-up), the ratio of `spectr_gbv`
to `spectr` and of `as_bv` to `spectr_gbv` at the same K, L (the goal for AS-BV: at most 2 at
K = 4, L = 6). Building the validated `VerifyInput` is timed separately (it is shared by all
methods).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

from ..methods import METHODS, VerifyInput
from ..randomness import TorchRandomness

VOCAB = 49152
CONFIGS = sorted([(K, L) for K in (1, 4, 8) for L in (4, 8, 16)] + [(4, 6)])


def synthetic_input(K: int, L: int, vocab: int, device: torch.device, seed: int) -> tuple[torch.Tensor, ...]:
    g = torch.Generator(device="cpu").manual_seed(seed)
    # Distinct node distributions per draft position; drafts share the root node.
    target_logits = torch.randn(K, L + 1, vocab, generator=g) * 3.0
    target_logits[:, 0] = target_logits[0, 0].clone()
    target = torch.softmax(target_logits, -1)
    draft = torch.softmax(target_logits[:, :L] + torch.randn(K, L, vocab, generator=g) * 1.5, -1)
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=g).reshape(K, L)
    return tokens.to(device), draft.to(device), target.to(device)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def time_ms(fn, repeats: int, device: torch.device) -> float:
    fn()  # warm-up
    samples = []
    for _ in range(repeats):
        _sync(device)
        start = time.perf_counter()
        fn()
        _sync(device)
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def run(repeats: int, device: torch.device) -> list[dict]:
    rows = []
    for K, L in CONFIGS:
        tokens, draft, target = synthetic_input(K, L, VOCAB, device, seed=K * 100 + L)
        build_ms = time_ms(lambda: VerifyInput.build(tokens, draft, target), repeats, device)
        inp = VerifyInput.build(tokens, draft, target)
        row = {"K": K, "L": L, "V": VOCAB, "build_input_ms": build_ms}
        for name, spec in METHODS.items():
            if not spec.multi_draft and K > 1:
                continue
            generator = torch.Generator(device=device).manual_seed(0)
            row[name] = time_ms(lambda: spec.verify(inp, TorchRandomness(generator)), repeats, device)
        rows.append(row)
    return rows


def markdown(rows: list[dict], device: torch.device) -> str:
    names = list(METHODS)
    header = "| K | L | build input | " + " | ".join(names) + " | spectr_gbv / spectr | as_bv / spectr_gbv |"
    lines = [
        f"Verification time per iteration, median ms ({device.type}, {platform.processor() or platform.machine()}, "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads), V = {VOCAB}:",
        "",
        header,
        "|" + "---|" * (len(names) + 5),
    ]
    for row in rows:
        cells = [f"{row[n]:.2f}" if n in row else "–" for n in names]
        ratio = f"{row['spectr_gbv'] / row['spectr']:.2f}" if "spectr" in row else "–"
        as_bv_ratio = f"{row['as_bv'] / row['spectr_gbv']:.2f}" if "as_bv" in row else "–"
        lines.append(f"| {row['K']} | {row['L']} | {row['build_input_ms']:.2f} | " + " | ".join(cells)
                     + f" | {ratio} | {as_bv_ratio} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", help="also write the rows as JSON here")
    args = parser.parse_args()
    device = torch.device(args.device)
    rows = run(args.repeats, device)
    print(markdown(rows, device))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
