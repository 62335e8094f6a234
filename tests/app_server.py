"""Launch the app on loopback for API and browser tests (one server per test module)."""

from __future__ import annotations

import socket
from contextlib import contextmanager

import app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def running_app(queue: dict | None = None, **build_kwargs):
    demo = app.build_demo(**build_kwargs)
    port = free_port()
    app.launch(demo, server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True, **(queue or {}))
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        demo.close()
