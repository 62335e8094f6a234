"""One TLS context for every httpx client a test process makes.

httpx builds a new SSL context for every `Client`, loading certifi's CA bundle each time (about 60 ms
of CPU on the AVX2 EPYC), and `httpx.get`, `post` and `stream` each make a `Client`; gradio_client
makes several per prediction. The tests and the load harnesses talk plain HTTP to loopback, so that
work buys nothing, and on a 2-core machine it competed with the server it was measuring: posting
the junk of tests/test_private_events.py spent 45 % of the run's CPU in it.

`share_one_tls_context()` makes httpx reuse one default context (verify=True, no client
certificate) per process. An `ssl.SSLContext` may serve many connections and threads at once;
anything other than the default still gets a context of its own.
"""

from __future__ import annotations

import os
import threading


def share_one_tls_context() -> None:
    from httpx import _config
    from httpx._transports import default

    made = default.create_ssl_context
    if getattr(made, "shared", False):
        return
    kept: dict = {}
    lock = threading.Lock()

    def create_ssl_context(verify=True, cert=None, trust_env=True):
        if verify is not True or cert:
            return made(verify=verify, cert=cert, trust_env=trust_env)
        key = (trust_env, os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))  # what httpx reads
        with lock:
            if key not in kept:
                kept[key] = made(verify=True, trust_env=trust_env)
            return kept[key]

    create_ssl_context.shared = True
    _config.create_ssl_context = default.create_ssl_context = create_ssl_context
