"""Launch the app on loopback for API and browser tests (one server per test module)."""

from __future__ import annotations

import dataclasses
import socket
from contextlib import contextmanager

import app
from components.serving import visitors


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_app(queue: dict | None = None, **build_kwargs):
    """The app on loopback. Its test client is one visitor sending hundreds of requests in a row,
    so the gate's join rate is opened wide here (tests/test_queue_flood.py and tests/test_gate.py
    test the rate at its defaults); every other limit is the app's own."""
    demo = app.build_demo(**build_kwargs)
    port = free_port()
    queue = dict(queue or {})
    queue.setdefault("fairness", dataclasses.replace(visitors.FAIR, joins_per_minute=60_000, join_burst=1_000))
    app.launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **queue)
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()
