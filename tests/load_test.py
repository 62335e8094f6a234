"""Load test: the app on loopback under concurrent gradio_client requests.

    python tests/load_test.py [--requests 24] [--queue-size 16] [--json PATH]     (make load-test)

Mixed endpoints on the teaching pairs and the offline default pair, every request from its
own client (its own session), all sent at once. Each request must end, within the time
bound, either with a correct result (generation results are compared with the same
settings decoded in-process: same settings and seed, same tokens) or with Gradio's clear
"queue is full" answer. Reports wall time, latency percentiles and peak memory (the
process's maximum resident set, server and clients together).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root
sys.path.insert(0, str(Path(__file__).resolve().parent))

REQUEST_TIMEOUT = 240  # seconds for any single request, queueing included


def planned_requests(count: int) -> list[tuple[str, tuple, str]]:
    """(endpoint, args, kind): a fixed mix cycling through every endpoint and pair."""
    mix = [
        ("/generate", ("toy", "the cat", "spectr_gbv", 3, 4, 0.8, 30, None), "generate"),
        ("/generate", ("toy", "the dog", "sd", 1, 4, 1.0, 30, None), "generate"),
        ("/compare", ("toy", "the cat", ["sd", "gbv", "spectr_gbv"], 3, 4, 0.8, 20, None, True), "compare"),
        ("/generate", ("default", "Name a fruit.", "spectr_gbv", 2, 3, 0.7, 8, None), "generate"),
        ("/sweep", ("toy", "the", ["gbv", "spectr_gbv"], "K", "1, 2, 4", 2, 3, 0.8, 15, None), "sweep"),
        ("/fidelity", ("two-token", "A", "spectr_gbv", 1, 2, 1.0, 200, 3), "fidelity"),
    ]
    requests = []
    for i in range(count):
        endpoint, args, kind = mix[i % len(mix)]
        args = tuple(i if a is None else a for a in args)  # the seed: different per request
        requests.append((endpoint, args, kind))
    return requests


def expected_text(args: tuple) -> str:
    """The same generation decoded in-process: what the server must return."""
    import app

    *_, data = list(app.generate_stream(*args))[-1][:3]
    return data["text"]


def check(endpoint: str, args: tuple, result) -> None:
    if endpoint == "/generate":
        data = result[2]
        assert data["new_tokens"] <= args[6] and data["text"] == expected_text(args), "wrong generation"
    elif endpoint == "/compare":
        data = result[-1]
        assert data["methods"] == args[2] and len(data["coupled_runs"]) == len(args[2])
    elif endpoint == "/sweep":
        assert len(result[-1]["rows"]) == len(args[2]) * 3
    elif endpoint == "/fidelity":
        assert result[-1]["runs"] == args[6] and result[-1]["within_noise"]


def one_request(url: str, endpoint: str, args: tuple) -> tuple[str, float, str]:
    from gradio_client import Client

    start = time.perf_counter()
    try:
        client = Client(url, verbose=False)
        result = client.submit(*args, api_name=endpoint).result(timeout=REQUEST_TIMEOUT)
        check(endpoint, args, result)
        return "ok", time.perf_counter() - start, ""
    except Exception as error:  # noqa: BLE001 - classified below
        text = f"{type(error).__name__}: {error}"
        outcome = "busy" if "queue is full" in text.lower() else "failed"
        return outcome, time.perf_counter() - start, text[:300]


def run_load(url: str, count: int) -> dict:
    requests = planned_requests(count)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=count) as pool:
        results = list(pool.map(lambda r: one_request(url, r[0], r[1]), requests))
    wall = time.perf_counter() - start
    latencies = sorted(seconds for outcome, seconds, _ in results if outcome == "ok")
    return {
        "requests": count,
        "ok": sum(o == "ok" for o, _, _ in results),
        "busy": sum(o == "busy" for o, _, _ in results),
        "failed": [(r[0], r[1][0], msg) for r, (o, _, msg) in zip(requests, results) if o == "failed"],
        "by_endpoint": {e: sum(r[0] == e for r in requests) for e in dict.fromkeys(r[0] for r in requests)},
        "wall_s": wall,
        "latency_median_s": statistics.median(latencies) if latencies else None,
        "latency_max_s": latencies[-1] if latencies else None,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def main() -> None:
    from app_server import running_app

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--queue-size", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--json")
    args = parser.parse_args()
    with running_app(queue={"queue_size": args.queue_size, "concurrency": args.concurrency}) as url:
        report = run_load(url, args.requests) | {"queue_size": args.queue_size, "concurrency": args.concurrency}
    print("| requests | ok | busy (queue full) | failed | wall time | median latency | max latency | peak memory |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {report['requests']} ({', '.join(f'{n} {e}' for e, n in report['by_endpoint'].items())}) | {report['ok']} | "
          f"{report['busy']} | {len(report['failed'])} | {report['wall_s']:.1f} s | {report['latency_median_s']:.1f} s | "
          f"{report['latency_max_s']:.1f} s | {report['peak_rss_mib']:.0f} MiB |")
    print(f"\nqueue: {args.concurrency} runs at once, waiting line of {args.queue_size}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    if report["failed"]:
        sys.exit(f"failed requests: {report['failed']}")


if __name__ == "__main__":
    main()
