"""A class on loopback: N gradio_client sessions press Generate at the same moment (make class-load).

    python tests/class_load.py [--students 30] [--pairs toy default] [--json PATH]

The app runs in a child process as `make run` starts it, behind one trusted proxy hop
(SPECTR_GBV_PROXY_HOPS=1, as on a Space), so each client's X-Forwarded-For is its address.
Every session is its own gradio_client (its own session hash), made before the clock starts;
then all press Generate at the app's defaults at once, each with its own prompt and seed, and
each must get its tokens or a refusal within the bound. Scenarios, per pair:

* one address: the whole class behind one school address;
* own addresses: each session its own address;
* identical (the default pair): every session sends the same prompt and seed, as a class
  following its teacher does.

Prints served, refused, failed, p50 and p95 (seconds from pressing to the last update) per
scenario, and the server's resident memory before, at its peak and a while after. Loopback
only, bounded in count and time; it stops by itself.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root
sys.path.insert(0, str(Path(__file__).resolve().parent))
from one_tls_context import share_one_tls_context  # noqa: E402

share_one_tls_context()  # the clients' CPU is the students' machines', not the server's (one_tls_context.py)

REQUEST_TIMEOUT = 300  # seconds for any one student's run, waiting included
PROMPTS = {  # different prompts a class would type, per pair
    "toy": ["the cat", "the dog", "the cat sat", "the dog ran", "the cat on", "the mat", "the cat ran", "the dog sat"],
    "default": ["Name a fruit.", "What is a cat?", "Say hello.", "Count to five.", "Name a colour.",
                "What is rain?", "Name a planet.", "Give a word for happy."],
}
REFUSED = ("line for", "already has", "already have", "too many requests", "queue is full", "would start")


def percentile(values: list[float], q: float) -> float | None:
    """The q-quantile (0..1) by the nearest-rank rule; None when there are no values."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)] if ordered else None


def defaults() -> tuple:
    """The app's Generate defaults (method, K, L, T, tokens), read from the app itself."""
    from components.wiring.inputs import DEFAULT_K, DEFAULT_L, DEFAULT_METHOD, DEFAULT_T, DEFAULT_TOKENS

    return DEFAULT_METHOD, DEFAULT_K, DEFAULT_L, DEFAULT_T, DEFAULT_TOKENS


def cpu_seconds(pid: int) -> float:
    """The process's user + system CPU time so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def resident_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def press_generate(clients: list, requests: list[tuple], timeout: float = REQUEST_TIMEOUT) -> list[tuple]:
    """Every client submits its request at the same moment; (outcome, seconds, message) each."""
    go = threading.Barrier(len(clients))

    def one(pair):
        client, args = pair
        go.wait()
        start = time.perf_counter()
        try:
            result = client.submit(*args, api_name="/generate").result(timeout=timeout)
            data = result[2]
            ok = isinstance(data, dict) and data.get("new_tokens", 0) >= 1
            return ("served" if ok else "failed"), time.perf_counter() - start, "" if ok else str(data)[:200]
        except Exception as error:  # noqa: BLE001 - sorted below
            text = f"{type(error).__name__}: {error}"
            outcome = "refused" if any(words in text.lower() for words in REFUSED) else "failed"
            return outcome, time.perf_counter() - start, text[:300]

    with ThreadPoolExecutor(max_workers=len(clients)) as pool:
        return list(pool.map(one, zip(clients, requests)))


def scenario(url: str, name: str, pair: str, students: int, addresses: list[str], identical: bool,
             server_cpu=lambda: 0.0, first_seed: int = 1000) -> dict:
    """One class pressing Generate, student i with seed first_seed + i (each scenario its own seeds: a
    request equal to an earlier scenario's would be served its stored result); `server_cpu()` the
    server's CPU seconds so far (read from the press to the last answer, not the sessions' set-up)."""
    from gradio_client import Client

    method, k, length, temperature, tokens = defaults()
    prompts = PROMPTS.get(pair, PROMPTS["default"])
    requests = [(pair, prompts[0 if identical else i % len(prompts)], method, k, length, temperature, tokens,
                 0 if identical else first_seed + i) for i in range(students)]
    with ThreadPoolExecutor(max_workers=8) as pool:  # sessions made before the clock starts
        clients = list(pool.map(lambda address: Client(url, verbose=False, headers={"X-Forwarded-For": address}),
                                addresses))
    cpu_before, clients_before, started = server_cpu(), time.process_time(), time.perf_counter()
    results = press_generate(clients, requests)
    wall, cpu = time.perf_counter() - started, server_cpu() - cpu_before
    clients_cpu = time.process_time() - clients_before  # the students' machines', here on the same cores
    served = [seconds for outcome, seconds, _ in results if outcome == "served"]
    row = {"scenario": name, "pair": pair, "students": students, "addresses": len(set(addresses)),
           "served": len(served), "refused": sum(o == "refused" for o, _, _ in results),
           "failed": sum(o == "failed" for o, _, _ in results),
           "p50_s": percentile(served, 0.5), "p95_s": percentile(served, 0.95), "wall_s": wall,
           "server_cpu_s": cpu, "clients_cpu_s": clients_cpu,
           "messages": sorted({message for outcome, _, message in results if outcome != "served"})[:5]}
    for client in clients:
        try:
            client.close()
        except Exception:  # noqa: BLE001 - best effort
            pass
    return row


def warm_up(url: str, pairs: list[str]) -> None:
    from gradio_client import Client

    method, k, length, temperature, tokens = defaults()
    client = Client(url, verbose=False, headers={"X-Forwarded-For": "198.18.0.1"})
    for pair in pairs:
        client.predict(pair, PROMPTS.get(pair, PROMPTS["default"])[-1], method, k, length, temperature, tokens, 999,
                       api_name="/generate")
    client.close()


def plan(pairs: list[str], students: int, big_class: int) -> list[tuple]:
    """(name, pair, students, addresses, identical) for every scenario."""
    school = "198.18.7.1"
    rows = []
    for pair in pairs:
        rows.append(("one address", pair, students, [school] * students, False))
        rows.append(("own addresses", pair, students, [f"198.18.{8 + i // 250}.{1 + i % 250}" for i in range(students)],
                     False))
        if pair != "toy":
            rows.append(("identical, one address", pair, students, [school] * students, True))
    if big_class and "toy" in pairs:
        rows.append(("one address", "toy", big_class, [school] * big_class, False))
    return rows


def main() -> None:
    from app_server import app_process

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--big-class", type=int, default=60, help="a second Toy class behind one address (0: none)")
    parser.add_argument("--pairs", nargs="+", default=["toy", "default"])
    parser.add_argument("--json", help="write the rows here too")
    parser.add_argument("--server-env", nargs="*", default=[], metavar="NAME=VALUE",
                        help="environment variables for the server (SPECTR_GBV_TEACHING_CONCURRENCY=1, say)")
    parser.add_argument("--only", choices=["one address", "own addresses", "identical, one address"],
                        help="run this scenario alone (for a profile of it)")
    parser.add_argument("--settle", type=float, default=60, help="seconds to wait before the last memory reading")
    args = parser.parse_args()
    if not 1 <= args.students <= 120 or not 0 <= args.big_class <= 120:
        parser.error("--students and --big-class: at most 120 sessions")
    # One trusted proxy hop, as on a Space; eager (a background compile would hold a core for minutes).
    env = {"SPECTR_GBV_PROXY_HOPS": "1", "SPECTR_GBV_COMPILE": "off",
           **dict(item.split("=", 1) for item in args.server_env)}
    rows, memory, pids = [], {}, []
    with tempfile.TemporaryDirectory() as folder, app_process(Path(folder) / "server.log", pair="default",
                                                              prompt=PROMPTS["default"][0], env=env, pids=pids) as url:
        pid = pids[0]
        warm_up(url, args.pairs)  # each pair loaded and run once: a class meets a server that is up
        memory["start_mib"] = resident_mib(pid)
        for number, (name, pair, students, addresses, identical) in enumerate(plan(args.pairs, args.students,
                                                                                   args.big_class)):
            if args.only and name != args.only:
                continue
            row = scenario(url, name, pair, students, addresses, identical, server_cpu=lambda: cpu_seconds(pid),
                           first_seed=1000 * (number + 1))
            row["rss_mib"] = resident_mib(pid)
            rows.append(row)
            print(f"{row['scenario']:>24} | {row['pair']:>8} | {row['students']:>3} sessions | served {row['served']:>3} "
                  f"| refused {row['refused']:>3} | failed {row['failed']:>3} | p50 {_s(row['p50_s'])} "
                  f"| p95 {_s(row['p95_s'])} | server {row['rss_mib']:.0f} MiB, {row['server_cpu_s']:.1f} s CPU (clients {row['clients_cpu_s']:.1f} s)", flush=True)
        memory["peak_mib"] = max(row["rss_mib"] for row in rows)
        time.sleep(args.settle)
        memory["after_60s_mib"] = resident_mib(pid)
    print(f"\nserver memory: {memory['start_mib']:.0f} MiB once warmed up, {memory['peak_mib']:.0f} MiB at the peak, "
          f"{memory['after_60s_mib']:.0f} MiB {args.settle:.0f} s after the last class")
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores")
    print("\n| scenario | pair | sessions | served | refused | p50 | p95 |\n|---|---|---|---|---|---|---|")
    for row in rows:
        print(f"| {row['scenario']} | {row['pair']} | {row['students']} | {row['served']} | {row['refused']} | "
              f"{_s(row['p50_s'])} | {_s(row['p95_s'])} |")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "memory": memory}, indent=2))
    failed = [row for row in rows if row["failed"]]
    if failed:
        sys.exit(f"failed runs: {[(row['scenario'], row['pair'], row['messages']) for row in failed]}")


def _s(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.1f} s"


if __name__ == "__main__":
    main()
