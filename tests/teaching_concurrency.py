"""Why the teaching line runs one request at a time: N Toy-world Generates at the app's defaults, in-process,
by W threads at once (as W teaching slots would run them), best of rounds.

    python tests/teaching_concurrency.py [--runs 12] [--workers 1 2 4] [--rounds 2]

A Toy-world run is Python and torch ops on tensors of a few numbers; each op releases the interpreter's
lock, so runs in threads hand it back and forth at every op instead of sharing the cores.
"""

from __future__ import annotations

import argparse
import platform
import queue
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root


def wall_seconds(runs: int, workers: int) -> float:
    from components.tabs import generate
    from components.wiring.inputs import DEFAULT_K, DEFAULT_L, DEFAULT_METHOD, DEFAULT_T, DEFAULT_TOKENS

    todo: queue.Queue = queue.Queue()
    for seed in range(runs):
        todo.put(seed)

    def work():
        while True:
            try:
                seed = todo.get_nowait()
            except queue.Empty:
                return
            list(generate.generate_stream("toy", "the cat", DEFAULT_METHOD, DEFAULT_K, DEFAULT_L, DEFAULT_T,
                                          DEFAULT_TOKENS, seed))

    threads = [threading.Thread(target=work) for _ in range(workers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)  # as the server runs (one thread per model slot)
    wall_seconds(2, 1)  # warm
    best = {w: min(wall_seconds(args.runs, w) for _ in range(args.rounds)) for w in args.workers}
    print(f"{args.runs} Toy-world Generates at the defaults ({platform.processor() or platform.machine()}):")
    for workers, seconds in best.items():
        print(f"  {workers} at a time: {seconds:.2f} s ({seconds / best[args.workers[0]]:.2f}x)")


if __name__ == "__main__":
    main()
