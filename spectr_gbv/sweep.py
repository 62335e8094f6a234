"""Sweep: block efficiency and measured speedup as K, L or T varies, on one prompt.

The qualitative ablations of the paper (BE rising with K; BE rising and speedup peaking in
L; stability in T) on the user's own prompt. For every value of the swept setting, every
method decodes the prompt with the same seed; `ar` is timed once per temperature on the
same machine in the same call, and the speedup is tokens/s over AR's tokens/s (hardware-
dependent, unlike block efficiency).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterator, Sequence

from .config import DecodeConfig
from .engine import generate_config
from .methods import METHODS
from .models.base import LanguageModel

AXES = {"K": "num_drafts", "L": "draft_length", "T": "temperature"}


def sweep(target: LanguageModel, draft: LanguageModel, prompt_ids: Sequence[int], methods: Sequence[str], axis: str,
          values: Sequence[float], base: DecodeConfig, on_iteration: Callable | None = None, repeats: int = 1) -> list[dict]:
    """One row per (method, value): the run summary plus the swept value and speedup vs AR (`iter_sweep`)."""
    return list(iter_sweep(target, draft, prompt_ids, methods, axis, values, base, on_iteration, repeats))


def iter_sweep(target: LanguageModel, draft: LanguageModel, prompt_ids: Sequence[int], methods: Sequence[str],
               axis: str, values: Sequence[float], base: DecodeConfig, on_iteration: Callable | None = None,
               repeats: int = 1) -> Iterator[dict]:
    """Yield one row per (value, method) as soon as its runs are done (a streaming caller shows each point).

    Each point is `repeats` runs with seeds base.seed, base.seed + 1, ...: the row is the first
    run's summary plus, per repeat, the block efficiency, mean E[tau | drafts] and target calls
    (`repeat_*`), so a caller can give a mean with a confidence band. `on_iteration` is handed to
    every `generate` call (a caller's time budget)."""
    if axis not in AXES:
        raise ValueError(f"sweep axis must be one of {', '.join(AXES)}, got {axis!r}")
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"sweep needs verifier methods; unknown or missing: {unknown or 'no methods'}")
    if repeats < 1:
        raise ValueError(f"a sweep needs at least one run per point, got repeats={repeats}")
    field_name = AXES[axis]
    configs = [replace(base, **{field_name: type(getattr(base, field_name))(v)}) for v in values]  # validates each
    ar_rates: dict[float, float] = {}
    for config in configs:
        if config.temperature not in ar_rates:
            ar = generate_config(target, None, prompt_ids, replace(config, method="ar", with_theory=False), on_iteration)
            ar_rates[config.temperature] = ar.tokens_per_second
        for method in methods:
            runs = [generate_config(target, draft, prompt_ids, replace(config, method=method, seed=config.seed + r),
                                    on_iteration) for r in range(repeats)]
            row = runs[0].summary()
            row.update(axis=axis, value=getattr(config, field_name),
                       speedup_vs_ar=runs[0].tokens_per_second / ar_rates[config.temperature],
                       seeds=[config.seed + r for r in range(repeats)],
                       repeat_block_efficiency=[run.block_efficiency for run in runs],
                       repeat_expected_accepted=[run.mean_expected_accepted for run in runs],
                       repeat_target_calls=[run.target_calls for run in runs])
            yield row
