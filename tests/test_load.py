"""24 concurrent clients against the app on loopback (tests/load_test.py, `make load-test`).

Every request ends in time with a correct result or a clear "queue is full" answer; none
fails or hangs, and at least the first waiting line's worth succeeds.
"""

from __future__ import annotations

import dataclasses

import pytest

from app_server import running_app
from components.serving.visitors import FAIR
from load_test import run_load

pytestmark = pytest.mark.slow

REQUESTS, QUEUE_SIZE, WALL_BOUND_S = 24, 16, 420


def test_concurrent_mixed_requests_all_end_correctly_or_busy():
    one_proxy = dataclasses.replace(FAIR, proxy_hops=1)  # every client is its own visitor (X-Forwarded-For)
    with running_app(queue={"queue_size": QUEUE_SIZE, "concurrency": 2, "fairness": one_proxy}) as url:
        report = run_load(url, REQUESTS)
    assert report["failed"] == [], report["failed"]
    assert report["ok"] + report["busy"] == REQUESTS
    assert report["ok"] >= QUEUE_SIZE  # the waiting line's worth is served
    assert report["wall_s"] < WALL_BOUND_S
    assert set(report["by_endpoint"]) == {"/generate", "/compare", "/sweep", "/fidelity"}
    teaching = report["latency_by_pair_kind"]["teaching"]
    assert teaching["ok"] >= 16 and teaching["p50_s"] <= teaching["p95_s"]
