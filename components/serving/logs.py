"""The app's log: one INFO line per refusal, on stderr, where a Space shows its logs.

The app logs under the `spectr_gbv` logger (refusals in spectr_gbv.app, the lines in
spectr_gbv.visitors, the gate in spectr_gbv.gate). Python shows only warnings until a
handler is configured, so launch gives `spectr_gbv` one of its own at INFO (the level from
SPECTR_GBV_LOG_LEVEL), unless the operator configured one already.
"""

from __future__ import annotations

import logging
import os

FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure() -> logging.Logger:
    """`spectr_gbv`'s INFO lines on stderr (once; a handler already there is kept)."""
    log = logging.getLogger("spectr_gbv")
    level = os.environ.get("SPECTR_GBV_LOG_LEVEL", "INFO").upper()
    log.setLevel(getattr(logging, level, logging.INFO))
    if not log.handlers:
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter(FORMAT))
        log.addHandler(handler)
    return log
