"""The ZeroGPU decorator on Hugging Face Spaces, and a no-op everywhere else.

On a ZeroGPU Space the `spaces` package is installed and `spaces.GPU` attaches a GPU slice
to the decorated call only; elsewhere (CPU Spaces, laptops, CI) the function runs as is.
"""

from __future__ import annotations

import os

GPU_SECONDS = int(os.environ.get("SPECTR_GBV_GPU_SECONDS", "120"))

try:  # pragma: no cover - only on Spaces
    import spaces

    gpu = spaces.GPU(duration=GPU_SECONDS)
except ImportError:
    def gpu(fn):
        return fn
