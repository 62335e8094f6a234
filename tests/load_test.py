"""Load test: the app on loopback under concurrent gradio_client requests.

    python tests/load_test.py [--requests 24] [--queue-size 16] [--json PATH]     (make load-test)

Mixed endpoints on the teaching pairs and the offline default pair, every request from its
own client (its own session, and its own visitor: a distinct X-Forwarded-For address, read
as on a Space behind one proxy), all sent at once. Each request must end, within the time
bound, either with a correct result (generation results are compared with the same
settings decoded in-process: same settings and seed, same tokens) or with a clear "busy"
answer (Gradio's "queue is full", or a full line). Reports wall time, latency percentiles
(p50 and p95 per pair kind: teaching pairs and real models wait in different lines) and
peak memory (the process's maximum resident set, server and clients together).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import resource
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from components.tabs import generate

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root
sys.path.insert(0, str(Path(__file__).resolve().parent))
from one_tls_context import share_one_tls_context  # noqa: E402

share_one_tls_context()  # the clients' CPU is the students' machines', not the server's (one_tls_context.py)

REQUEST_TIMEOUT = 240  # seconds for any single request, queueing included


def planned_requests(count: int) -> list[tuple[str, tuple, str]]:
    """(endpoint, args, kind): a fixed mix cycling through every endpoint and pair."""
    mix = [
        ("/generate", ("toy", "the cat", "spectr_gbv", 3, 4, 0.8, 30, None), "generate"),
        ("/generate", ("toy", "the dog", "sd", 1, 4, 1.0, 30, None), "generate"),
        ("/compare", ("toy", "the cat", ["sd", "gbv", "spectr_gbv"], 3, 4, 0.8, 20, None, True, 1), "compare"),
        ("/generate", ("default", "Name a fruit.", "spectr_gbv", 2, 3, 0.7, 8, None), "generate"),
        ("/sweep", ("toy", "the", ["gbv", "spectr_gbv"], "K", "1, 2, 4", 2, 3, 0.8, 15, None, 1), "sweep"),
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

    *_, data = list(generate.generate_stream(*args))[-1][:3]
    return data["text"]


def check(endpoint: str, args: tuple, result) -> None:
    if endpoint == "/generate":
        data = result[2]
        expected = expected_text(args)
        assert data["new_tokens"] <= args[6] and data["text"] == expected, f"wrong generation: {data['text']!r}, in-process {expected!r}"
    elif endpoint == "/compare":
        data = result[-1]
        assert data["methods"] == args[2] and len(data["coupled_runs"]) == len(args[2])
    elif endpoint == "/sweep":
        assert len(result[-1]["rows"]) == len(args[2]) * 3
    elif endpoint == "/fidelity":
        assert result[-1]["runs"] == args[6] and result[-1]["within_noise"]


BUSY = ("queue is full", "line for", "already have")  # Gradio's full queue; components.visitors' lines


def pair_kind(args: tuple) -> str:
    return "teaching" if args[0] in ("toy", "two-token") else "model"


def percentile(values: list[float], q: float) -> float | None:
    """The q-quantile (0..1) by the nearest-rank rule; None when there are no values."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else None


def one_request(url: str, endpoint: str, args: tuple, visitor: str) -> tuple[str, float, str]:
    from gradio_client import Client

    start = time.perf_counter()
    try:
        client = Client(url, verbose=False, headers={"X-Forwarded-For": visitor})
        result = client.submit(*args, api_name=endpoint).result(timeout=REQUEST_TIMEOUT)
        check(endpoint, args, result)
        return "ok", time.perf_counter() - start, ""
    except Exception as error:  # noqa: BLE001 - classified below
        text = f"{type(error).__name__}: {error}"
        outcome = "busy" if any(words in text.lower() for words in BUSY) else "failed"
        return outcome, time.perf_counter() - start, text[:300]


def run_load(url: str, count: int) -> dict:
    requests = planned_requests(count)
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=count) as pool:
        results = list(pool.map(lambda ir: one_request(url, ir[1][0], ir[1][1], f"198.18.0.{ir[0] + 1}"),
                                enumerate(requests)))
    wall = time.perf_counter() - start
    latencies = sorted(seconds for outcome, seconds, _ in results if outcome == "ok")
    by_kind = {}
    for kind in ("teaching", "model"):
        served = [seconds for r, (outcome, seconds, _) in zip(requests, results) if outcome == "ok" and pair_kind(r[1]) == kind]
        by_kind[kind] = {"ok": len(served), "p50_s": percentile(served, 0.5), "p95_s": percentile(served, 0.95)}
    return {
        "requests": count,
        "ok": sum(o == "ok" for o, _, _ in results),
        "busy": sum(o == "busy" for o, _, _ in results),
        "failed": [(r[0], r[1][0], msg) for r, (o, _, msg) in zip(requests, results) if o == "failed"],
        "by_endpoint": {e: sum(r[0] == e for r in requests) for e in dict.fromkeys(r[0] for r in requests)},
        "wall_s": wall,
        "latency_median_s": statistics.median(latencies) if latencies else None,
        "latency_max_s": latencies[-1] if latencies else None,
        "latency_by_pair_kind": by_kind,
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
    from components.serving.visitors import FAIR

    one_proxy = dataclasses.replace(FAIR, proxy_hops=1)  # each client's X-Forwarded-For is its visitor address
    with running_app(queue={"queue_size": args.queue_size, "concurrency": args.concurrency, "fairness": one_proxy}) as url:
        report = run_load(url, args.requests) | {"queue_size": args.queue_size, "concurrency": args.concurrency}
    print("| requests | ok | busy (queue full) | failed | wall time | median latency | max latency | peak memory |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {report['requests']} ({', '.join(f'{n} {e}' for e, n in report['by_endpoint'].items())}) | {report['ok']} | "
          f"{report['busy']} | {len(report['failed'])} | {report['wall_s']:.1f} s | {report['latency_median_s']:.1f} s | "
          f"{report['latency_max_s']:.1f} s | {report['peak_rss_mib']:.0f} MiB |")
    print("\n| pair kind | served | p50 latency | p95 latency |\n|---|---|---|---|")
    for kind, row in report["latency_by_pair_kind"].items():
        shown = [f"{row[k]:.1f} s" if row[k] is not None else "-" for k in ("p50_s", "p95_s")]
        print(f"| {kind} | {row['ok']} | {shown[0]} | {shown[1]} |")
    print(f"\nmodel line: {args.concurrency} runs at once, {args.queue_size} waiting")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2))
    if report["failed"]:
        sys.exit(f"failed requests: {report['failed']}")


if __name__ == "__main__":
    main()
