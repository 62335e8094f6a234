"""One prepared GPU check, within 8 minutes: the CUDA tests, then the default pair's speed and
host-bound costs on the GPU, written to `assets/results/gpu_<device>.md` (and `.json`).

    python -m spectr_gbv.bench.gpu_check [--out assets/results] [--tokens 48] [--rounds 2]
                                         [--device cuda] [--target default] [--skip-tests]

What it measures, in this order (each step prints as it goes, so a run cut by its time limit
still says what it reached):
1. `pytest -m cuda`-style: the CUDA test module (tests/test_cuda.py), its pass/fail counts;
2. the default pair on the device, in the lean mode, with the benchmark's fair schedule
   (`spectr_gbv.bench`: every run warmed up, plain decoding interleaved prompt by prompt, each
   run's fastest round) for plain decoding, SD, GBV, SpecTr-GBV and AS-BV+H at K = 2, L = 4,
   and transformers' `generate` on the same weights as the peer;
3. host reads per iteration and aten ops per token of each run (`spectr_gbv.bench.counts`):
   on a GPU each read is a device sync and each op a kernel launch.

The loop runs eagerly: forwards captured as CUDA graphs are not implemented yet, and the file
says so rather than printing a column of eager numbers under another name.
`--device cpu` rehearses the script on a machine without a GPU (the numbers are then the CPU's).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import torch

from ..models.hf import chat_prompt_ids, load_pair
from ..prompt_sets import bench_prompts
from . import __main__ as bench
from .counts import count_loop

METHODS = [("sd", 1, 4), ("gbv", 1, 4), ("spectr_gbv", 2, 4), ("as_bv_handoff", 2, 4)]


def device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return platform.processor() or platform.machine()


def file_stem(name: str) -> str:
    """'NVIDIA H200' -> 'h200': the result file's name."""
    words = re.sub(r"[^a-z0-9]+", " ", name.lower()).split()
    words = [w for w in words if w not in {"nvidia", "geforce", "tesla"}] or ["device"]
    return "_".join(words)


def cuda_tests() -> dict:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "tests/test_cuda.py"], capture_output=True, text=True)
    last = (done.stdout.strip().splitlines() or [""])[-1]
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|failed|skipped|error)", last)}
    return {"summary": last, "counts": counts, "seconds": time.perf_counter() - start, "exit": done.returncode}


def run(args) -> dict:
    device = torch.device(args.device)
    result: dict = {"device": device_name(device), "torch": torch.__version__, "graphs": "not implemented: eager only"}
    if not args.skip_tests:
        result["cuda_tests"] = cuda_tests()
        print("CUDA tests:", result["cuda_tests"]["summary"], flush=True)
    target, draft, tokenizer = load_pair(args.target, device=device)
    prompts = [chat_prompt_ids(tokenizer, text) for text in bench_prompts().values()]
    n, T = args.tokens, args.temperature
    ar = bench.ours(target, draft, "ar", 0, 0, T, n)
    contenders = [bench.ours(target, draft, m, K, L, T, n) for m, K, L in METHODS]
    peers = [bench.peer(target, T, n, f"{bench.PEER} [{target.model.dtype}]")]
    bench.race(contenders + peers, ar, prompts, args.rounds)
    counted = {(m, K, L): count_loop(target, draft, prompts[0], m, K, L, T, n)
               for m, K, L in [("ar", 1, 1), *METHODS]}
    rows = [bench.row(ar, ar, T, counted[("ar", 1, 1)])]
    rows += [bench.row(c, ar, T, counted[(c.name, c.K, c.L)]) for c in contenders]
    rows += [bench.row(c, ar, T) for c in peers]
    peer_speed = max(r["tokens_per_s"] for r in rows if r["method"].startswith(bench.PEER))
    for r in rows:
        r["speedup_vs_peer"] = r["tokens_per_s"] / peer_speed
    result.update({
        "target": target.name, "draft": draft.name, "dtype": str(target.model.dtype),
        "prompts": list(bench_prompts()), "max_new_tokens": n, "temperature": T, "rounds": args.rounds,
        "rows": rows, "command": "python -m spectr_gbv.bench.gpu_check " + " ".join(sys.argv[1:]),
    })
    return result


def markdown(result: dict) -> str:
    tests = result.get("cuda_tests")
    lines = [
        f"# {result['device']}: the default pair, eager", "",
        f"torch {result['torch']}; target {result['target']} ({result['dtype']}), draft {result['draft']}; "
        f"prompts: {', '.join(result['prompts'])}; {result['max_new_tokens']} tokens each; T = {result['temperature']}; "
        f"lean mode, every run warmed up, plain decoding interleaved prompt by prompt, each run's fastest of "
        f"{result['rounds']} rounds. CUDA graphs: {result['graphs']}.", "",
        f"CUDA tests: {tests['summary']} ({tests['seconds']:.0f} s)." if tests else "CUDA tests: not run.", "",
        f"Command: `{result['command']}`", "",
        "| run | K | L | block efficiency | host reads / iteration | aten ops / token | tokens/s | speedup vs ar | "
        f"speedup vs {bench.PEER} |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    return "\n".join(lines + [bench._row(r) for r in result["rows"]]) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="assets/results")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--target", default="default")
    parser.add_argument("--tokens", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--skip-tests", action="store_true")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit("gpu_check: no CUDA device here (torch.cuda.is_available() is False); --device cpu rehearses it")
    result = run(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"gpu_{file_stem(result['device'])}" if args.device.startswith("cuda") else "gpu_check_rehearsal_cpu"
    (out / f"{stem}.json").write_text(json.dumps(result, indent=2))
    (out / f"{stem}.md").write_text(markdown(result))
    print(markdown(result))
    print(f"-> {out / stem}.md")


if __name__ == "__main__":
    main()
