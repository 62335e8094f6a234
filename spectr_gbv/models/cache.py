"""The library's cache folder: dequantised models, assembled drafts, measured kernels, verified files.

Read by `hf` (loading) and `default_file` (its verified-file memo); it imports neither.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "SPECTR_GBV_CACHE"


def cache_dir() -> Path:
    """Where dequantised models are cached: $SPECTR_GBV_CACHE or ~/.cache/spectr-gbv."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "spectr-gbv")
