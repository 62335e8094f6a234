"""Server memory after many API sessions: bounded by the app's session capacity, not by traffic;
and the cold start: how long a visitor's first request takes from the server's start.

    python tests/memory_sessions.py [--sessions 1000] [--pair toy] [--json PATH]     (make memory-test)

Starts the app in a child process on loopback, then sends /generate requests over plain HTTP
(Gradio's /call route: every request is a session of its own, with a run state, and never a
heartbeat, as an API client behaves), each with the app's default rule and settings. It reads
the server's resident memory (VmRSS) after the first request, after 10 sessions and after all
of them. The goal: within 300 MiB from 10 sessions on, and within 500 MiB from the first request
on. What bounds it is `state_session_capacity` (SPECTR_GBV_MAX_SESSIONS, default 200): the
oldest sessions' states are dropped, so the 1,000th session costs what the 201st did.

Cold start: seconds from the child's spawn until the server answers, and until the first
request's answer is back (the pair loads on that request, unless the start preloaded it). A wall
clock: measure on a quiet machine; the file cache is as warm as the machine leaves it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
from app_server import CHILD, free_port, wait_until_up  # noqa: E402
from raw_api import call  # noqa: E402

GOAL_MIB = 300  # from 10 sessions on
GOAL_FROM_FIRST_MIB = 500  # from the first request on


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for process {pid}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--pair", default="toy", help="the pair every request uses")
    parser.add_argument("--tokens", type=int, default=40, help="max new tokens per request (the app's default)")
    parser.add_argument("--json", help="write the measurement here")
    args = parser.parse_args()

    from components.wiring.inputs import DEFAULT_K, DEFAULT_L, DEFAULT_METHOD, DEFAULT_T

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    code = CHILD.format(root=str(ROOT), pair=args.pair, prompt="the cat", port=port)
    spawned = time.monotonic()
    server = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=os.environ.copy())
    try:
        wait_until_up(url, server)
        up_s = time.monotonic() - spawned
        readings, failures, started = {}, 0, time.monotonic()
        first_request_s = None
        for i in range(1, args.sessions + 1):
            ok, answer = call(url, "generate", [args.pair, "the cat", DEFAULT_METHOD, DEFAULT_K, DEFAULT_L, DEFAULT_T,
                                                args.tokens, i])
            failures += not ok
            if i == 1:
                first_request_s = time.monotonic() - spawned
                print(f"cold start: serving after {up_s:.1f} s, the first request answered after {first_request_s:.1f} s "
                      f"({'ok' if ok else answer})", flush=True)
            if i in (1, 10, 100, 200, 500) or i == args.sessions:
                readings[i] = rss_mib(server.pid)
                print(f"{i:5d} sessions: server RSS {readings[i]:.0f} MiB ({time.monotonic() - started:.0f} s)", flush=True)
        # from 10 sessions on: a run of fewer (a cold-start timing alone) is measured from the first
        growth = readings[args.sessions] - readings[min(10, args.sessions)]
        growth_from_first = readings[args.sessions] - readings[1]
        result = {
            "pair": args.pair, "sessions": args.sessions, "failures": failures, "rss_mib": readings,
            "request": {"method": DEFAULT_METHOD, "K": DEFAULT_K, "L": DEFAULT_L, "T": DEFAULT_T, "tokens": args.tokens},
            "growth_mib_after_10": growth, "goal_mib": GOAL_MIB,
            "growth_mib_after_first": growth_from_first, "goal_from_first_mib": GOAL_FROM_FIRST_MIB,
            # a memory verdict needs the sessions: a shorter run times the cold start only
            "met": growth <= GOAL_MIB and failures == 0 if args.sessions >= 10 else None,
            "met_from_first": growth_from_first <= GOAL_FROM_FIRST_MIB and failures == 0 if args.sessions >= 10 else None,
            "cold_start_s": {"serving": up_s, "first_request": first_request_s},
            "session_capacity": int(os.environ.get("SPECTR_GBV_MAX_SESSIONS", 200)),
            "command": "python tests/memory_sessions.py " + " ".join(sys.argv[1:]),
            # the library's cache folder: an empty one makes the first request dequantise the model file
            "cache": os.environ.get("SPECTR_GBV_CACHE", "~/.cache/spectr-gbv (the default)"),
        }
        print(f"growth from {min(10, args.sessions)} to {args.sessions} sessions: {growth:+.0f} MiB (goal <= {GOAL_MIB} MiB), from the first "
              f"request {growth_from_first:+.0f} MiB (goal <= {GOAL_FROM_FIRST_MIB} MiB); {failures} failed requests "
              f"-> {'not judged (under 10 sessions)' if result['met'] is None else 'met' if result['met'] and result['met_from_first'] else 'MISSED'}")
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
