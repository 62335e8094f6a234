"""What a forward of the default target costs in each CPU kernel, as ratios to a one-token step.

    python -m spectr_gbv.bench.kernels [--kernels float32 fp16-weights bfloat16 int4] [--threads 1]
                                       [--repeats 15] [--out assets/results/cpu_<class>]

In one process, for each kernel (default: the candidates `models.cpu_kernel` probes on this
CPU; name bfloat16 to time it emulated where it is not native): a one-token step and 4-, 5-, 9-
and 17-position forwards over a 100-token KV cache, and the feature draft's step at K = 2
(one `extend_branches` of 2 rows), each the fastest of `--repeats` interleaved timings. Prints
the CPU model, its class and whether /proc/cpuinfo lists avx512_bf16 or amx_bf16, and writes
`kernels.md` and `kernels.json` under --out (one folder per CPU class).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import torch

from ..models import cpu_kernel

POSITIONS = (4, 5, 9, 17)


def draft_step_ms(target_loaded, repeats: int) -> float:
    """The feature draft's drafting step at K = 2 (one extend of 2 rows), the fastest of `repeats`."""
    from ..models.hf import FEATURE_DRAFT_ASSETS, feature_draft_model

    draft = feature_draft_model(target_loaded, FEATURE_DRAFT_ASSETS)
    session = draft.start(list(range(10, 110)))
    session.add_features(torch.zeros(99, target_loaded.model.config.hidden_size))
    session.branch_logits(2)
    tokens = torch.tensor([11, 12])
    times = []
    for _ in range(repeats + 1):
        started = time.perf_counter()
        session.extend_branches(tokens)
        times.append((time.perf_counter() - started) * 1000)
        session.kv.depth = 1  # keep the drafted depth at 1: the next step overwrites the slot after it
    return min(times[1:])


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="+", choices=cpu_kernel.KERNELS)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--out", help="folder for kernels.md / kernels.json (default: assets/results/cpu_<class>)")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from ..models.hf import load_model

    flags = cpu_kernel.cpu_flags()
    klass = cpu_kernel.cpu_class(flags)
    header = f"{cpu_kernel.describe_cpu(flags)}; torch {torch.__version__}, {args.threads} thread(s)"
    print(header, flush=True)
    base = load_model("default", device="cpu", dtype=torch.float32)
    kernels = args.kernels or cpu_kernel.candidates(flags, base.model)  # int4 where bf16 is native
    rows = []
    for kernel in kernels:
        model = cpu_kernel.apply_kernel(copy.deepcopy(base.model), kernel)
        step = None
        ratios = {}
        for n in POSITIONS:
            one, many = cpu_kernel.time_forwards(model, positions=n, repeats=args.repeats)
            step = one if step is None else min(step, one)
            ratios[n] = many / one
        # the kernel as the app records it, so the draft runs as it does there (models.hf._draft_in_fp16_weights)
        choice = cpu_kernel.KernelChoice(kernel, klass, cpu_kernel.cpu_model(), reason="benchmark")
        loaded = type(base)(base.name, model, base.tokenizer, base.output_token_ids, kernel=choice)
        draft = draft_step_ms(loaded, args.repeats)
        row = {"kernel": kernel, "step_ms": round(step, 2), "draft_step_ms": round(draft, 2),
               "draft_over_step": round(draft / step, 3), **{f"positions_{n}": round(r, 3) for n, r in ratios.items()}}
        rows.append(row)
        print(json.dumps(row), flush=True)
        del model, loaded
    lines = ["# Forward costs of the default target per CPU kernel\n", header + "\n",
             "Command: `python -m spectr_gbv.bench.kernels " + " ".join(sys.argv[1:] if argv is None else argv) + "`\n",
             "Each cost is the fastest of the interleaved repeats, over a 100-token KV cache; positions in one-token steps.\n",
             "| kernel | one-token step (ms) | " + " | ".join(f"{n} positions" for n in POSITIONS)
             + " | draft step K = 2 (ms) | draft / step |",
             "|---|---|" + "---|" * len(POSITIONS) + "---|---|"]
    for row in rows:
        lines.append(f"| {cpu_kernel.KERNEL_LABELS[row['kernel']]} | {row['step_ms']:.1f} | "
                     + " | ".join(f"{row[f'positions_{n}']:.2f}" for n in POSITIONS)
                     + f" | {row['draft_step_ms']:.1f} | {100 * row['draft_over_step']:.0f} % |")
    out = Path(args.out or f"assets/results/cpu_{klass.lower().replace('-', '_')}")
    out.mkdir(parents=True, exist_ok=True)
    (out / "kernels.md").write_text("\n".join(lines) + "\n")
    (out / "kernels.json").write_text(json.dumps({"cpu": header, "rows": rows}, indent=2) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
