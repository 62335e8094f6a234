"""A hostile visitor on loopback: many threads posting small Toy /generate joins, never reading a result.

    python tests/flood_client.py URL [--threads 20] [--seconds 6] [--address 198.51.100.66] [--max-posts 20000]

Every thread posts to /gradio_api/queue/join as fast as the server answers, each join with
a session hash of its own (or all one, --one-session), all from one X-Forwarded-For address, until `seconds` have passed
or `max-posts` joins were sent; it stops by itself. Only a loopback URL is accepted. Prints one
JSON line: the count of each HTTP status the joins got.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from urllib.parse import urlparse

import httpx

TOY_GENERATE = ["toy", "the cat", "sd", 1, 2, 0.7, 5, 0]


def flood(url: str, threads: int, seconds: float, address: str, max_posts: int, one_session: bool = False) -> Counter:
    if urlparse(url).hostname != "127.0.0.1":
        raise SystemExit(f"flood_client floods loopback only, not {url}")
    config = httpx.get(f"{url}config", timeout=10).json()
    fn_index = next(d["id"] for d in config["dependencies"] if d.get("api_name") == "generate")
    statuses, lock, end = Counter(), threading.Lock(), time.monotonic() + seconds

    def post_joins(worker: int) -> None:
        with httpx.Client(timeout=10, headers={"X-Forwarded-For": address}) as http:
            n = 0
            while time.monotonic() < end:
                with lock:
                    if sum(statuses.values()) >= max_posts:
                        return
                body = {"data": TOY_GENERATE, "fn_index": fn_index, "session_hash": "flood" if one_session else f"flood{worker}x{n}",
                        "event_data": None, "trigger_id": None}
                try:
                    status = http.post(f"{url}gradio_api/queue/join", json=body).status_code
                except httpx.HTTPError as error:
                    status = type(error).__name__
                with lock:
                    statuses[status] += 1
                n += 1

    workers = [threading.Thread(target=post_joins, args=(i,)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(seconds + 20)
    return statuses


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--threads", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=6)
    parser.add_argument("--address", default="198.51.100.66")
    parser.add_argument("--max-posts", type=int, default=20000)
    parser.add_argument("--one-session", action="store_true", help="every join from one session (else each its own)")
    args = parser.parse_args()
    counts = flood(args.url.rstrip("/") + "/", args.threads, args.seconds, args.address, args.max_posts, args.one_session)
    print(json.dumps({str(k): v for k, v in counts.items()}))
    sys.stdout.flush()
