"""Server memory after many API sessions: bounded by the app's session capacity, not by traffic.

    python tests/memory_sessions.py [--sessions 1000] [--pair toy] [--json PATH]     (make memory-test)

Starts the app in a child process on loopback, then sends /generate requests over plain HTTP
(Gradio's /call route: every request is a session of its own, with a run state, and never a
heartbeat, as an API client behaves). It reads the server's resident memory (VmRSS) after the
first 10 sessions and after all of them. The goal (issue 17): within 300 MiB of each other.
What bounds it is `state_session_capacity` (SPECTR_GBV_MAX_SESSIONS, default 200): the oldest
sessions' states are dropped, so the 1,000th session costs what the 201st did.
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

GOAL_MIB = 300


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

    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    code = CHILD.format(root=str(ROOT), pair=args.pair, prompt="the cat", port=port)
    server = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=os.environ.copy())
    try:
        wait_until_up(url, server)
        readings, failures, started = {}, 0, time.monotonic()
        for i in range(1, args.sessions + 1):
            ok, answer = call(url, "generate", [args.pair, "the cat", "spectr_gbv", 2, 4, 0.8, args.tokens, i])
            failures += not ok
            if i in (10, 100, 200, 500) or i == args.sessions:
                readings[i] = rss_mib(server.pid)
                print(f"{i:5d} sessions: server RSS {readings[i]:.0f} MiB ({time.monotonic() - started:.0f} s)", flush=True)
        growth = readings[args.sessions] - readings[10]
        result = {
            "pair": args.pair, "sessions": args.sessions, "failures": failures, "rss_mib": readings,
            "growth_mib_after_10": growth, "goal_mib": GOAL_MIB, "met": growth <= GOAL_MIB and failures == 0,
            "session_capacity": int(os.environ.get("SPECTR_GBV_MAX_SESSIONS", 200)),
        }
        print(f"growth from 10 to {args.sessions} sessions: {growth:+.0f} MiB (goal <= {GOAL_MIB} MiB); "
              f"{failures} failed requests -> {'met' if result['met'] else 'MISSED'}")
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
