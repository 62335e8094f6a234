"""Time every view at the page's defaults on a pair, as a visitor's first click would run it (a measurement, not a test).

    python tests/view_defaults.py [--pair default] [--prompt TEXT] [--beside]

`--beside` keeps a second visitor's model run going in another process (plain decoding on the
default pair, one torch thread), as a Space with two visitors sees. One torch thread per run,
as `app.launch` sets on 2 cores (components.serving.visitors.threads_per_run).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

import torch  # noqa: E402


def second_visitor(stop) -> None:
    """Plain decoding on the default pair, over and over, until `stop` is set."""
    torch.set_num_threads(1)
    from spectr_gbv import generate
    from spectr_gbv.pairs import get_pair

    pair = get_pair("default")
    ids = pair.encode("Write a short story about a lighthouse keeper.")
    while not stop.is_set():
        generate(pair.target, None, ids, method="ar", temperature=0.7, max_new_tokens=40, seed=0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pair", default="default")
    parser.add_argument("--prompt", default="Write a haiku about the sea.")
    parser.add_argument("--beside", action="store_true", help="with a second visitor's model run on the other core")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from components.tabs import compare, fidelity, generate, sweep
    from helpers import last, page_defaults

    d = page_defaults(args.pair, args.prompt)
    settings = (d["K"], d["L"], d["T"], d["tokens"], d["seed"])
    last(generate.generate_stream(args.pair, args.prompt, d["method"], *settings))  # loads the pair, untimed
    spawn = multiprocessing.get_context("spawn")  # a fresh interpreter: no torch state shared with this one
    stop, visitor = spawn.Event(), None
    if args.beside:
        visitor = spawn.Process(target=second_visitor, args=(stop,), daemon=True)
        visitor.start()
        time.sleep(20)  # its pair loaded and decoding
    runs = {
        f"Generate ({d['method']}, {d['tokens']} tokens)":
            lambda: (last(generate.generate_stream(args.pair, args.prompt, d["method"], *settings)), None),
        f"Compare ({len(d['methods'])} methods, coupled, Repeats {d['repeats']})":
            lambda: (c := last(compare.compare(args.pair, args.prompt, d["methods"], *settings, True, d["repeats"])),
                     c.data.get("stopped")),
        f"Sweep ({len(d['methods'])} methods x K = {d['values']})":
            lambda: (w := last(sweep.run_sweep(args.pair, args.prompt, d["methods"], "K", d["values"], *settings, 1)),
                     w.data.get("stopped")),
        f"Fidelity ({d['method']}, N = {d['runs']}, {d['fidelity_tokens']} tokens)":
            lambda: (f := last(fidelity.run_fidelity(args.pair, args.prompt, d["method"], d["K"], d["L"], d["T"],
                                                     d["runs"], d["fidelity_tokens"])), f.data.get("stopped")),
    }
    rows = []
    for name, run in runs.items():
        started = time.perf_counter()
        _, stopped = run()
        rows.append({"view": name, "seconds": round(time.perf_counter() - started, 1), "stopped": stopped})
        print(json.dumps(rows[-1]), flush=True)
    stop.set()
    if visitor is not None:
        visitor.join(timeout=60)
    print(f"load average after: {os.getloadavg()[0]:.1f}; beside a second visitor: {args.beside}")


if __name__ == "__main__":
    main()
