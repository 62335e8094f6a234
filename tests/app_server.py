"""Launch the app on loopback for API and browser tests (one server per test module), in this
process or (`app_process`) in a child process whose output is the test's to read."""

from __future__ import annotations

import dataclasses
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import httpx

import app
from components.serving import visitors

ROOT = Path(__file__).resolve().parents[1]
CHILD = ("import sys; sys.path.insert(0, {root!r}); import app; app.launch(app.build_demo(default_pair={pair!r}, "
         "default_prompt={prompt!r}), server_name='127.0.0.1', server_port={port}, quiet=True)")


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


def wait_until_up(url: str, server: subprocess.Popen, seconds: float = 300) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode}")
        try:
            if httpx.get(url, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(1)
    raise TimeoutError(f"the app did not answer at {url} within {seconds:.0f} s")


@contextmanager
def app_process(log: Path, pair: str = "toy", prompt: str = "the cat", env: dict | None = None,
                pids: list | None = None):
    """The app in a child process on loopback, everything it prints (tracebacks too) written to `log`
    as it happens: what a Space's log would show. `env` adds to this process's environment; the
    child's process id is appended to `pids` (to read its memory)."""
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    code = CHILD.format(root=str(ROOT), pair=pair, prompt=prompt, port=port)
    with open(log, "w") as out:
        server = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
        if pids is not None:
            pids.append(server.pid)
        try:
            wait_until_up(url, server)
            yield url
        finally:
            server.terminate()
            server.wait(30)
