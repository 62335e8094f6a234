"""Sweep: block efficiency and measured speedup as K, L or T varies, on one prompt.

The qualitative ablations of the paper (BE rising with K; BE rising and speedup peaking in
L; stability in T) on the user's own prompt. For every value of the swept setting, every
method decodes the prompt with the same seed; `ar` is timed once per temperature on the
same machine in the same call, and the speedup is tokens/s over AR's tokens/s (hardware-
dependent, unlike block efficiency).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Sequence

from .config import DecodeConfig
from .engine import generate_config
from .methods import METHODS
from .models.base import LanguageModel

AXES = {"K": "num_drafts", "L": "draft_length", "T": "temperature"}


def sweep(target: LanguageModel, draft: LanguageModel, prompt_ids: Sequence[int], methods: Sequence[str], axis: str,
          values: Sequence[float], base: DecodeConfig, on_iteration: Callable | None = None) -> list[dict]:
    """One row per (method, value): the run summary plus the swept value and speedup vs AR.

    `on_iteration` is handed to every `generate` call (a caller's time budget)."""
    if axis not in AXES:
        raise ValueError(f"sweep axis must be one of {', '.join(AXES)}, got {axis!r}")
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"sweep needs verifier methods; unknown or missing: {unknown or 'no methods'}")
    field_name = AXES[axis]
    configs = [replace(base, **{field_name: type(getattr(base, field_name))(v)}) for v in values]  # validates each
    ar_rates: dict[float, float] = {}
    rows = []
    for config in configs:
        if config.temperature not in ar_rates:
            ar = generate_config(target, None, prompt_ids, replace(config, method="ar", with_theory=False), on_iteration)
            ar_rates[config.temperature] = ar.tokens_per_second
        for method in methods:
            run = generate_config(target, draft, prompt_ids, replace(config, method=method), on_iteration)
            row = run.summary()
            row.update(axis=axis, value=getattr(config, field_name),
                       speedup_vs_ar=run.tokens_per_second / ar_rates[config.temperature])
            rows.append(row)
    return rows
