"""Sweep: block efficiency and measured speedup as K, L or T varies, on one prompt.

The qualitative ablations of the paper (BE rising with K; BE rising and speedup peaking in
L; stability in T) on the user's own prompt. For every value of the swept setting, every
method decodes the prompt with the same seeds; `ar` is timed on the same machine in the same
call, either just before the first method and again after every method (`interleave_ar`, as
the app's Compare does: a caller can take each method's tokens/s over those of the AR runs just
before and after it, and see from their disagreement whether the machine's load moved) or once
per temperature. Speedups are hardware-dependent, unlike block efficiency.
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
          values: Sequence[float], base: DecodeConfig, on_iteration: Callable | None = None, repeats: int = 1,
          interleave_ar: bool = False) -> list[dict]:
    """One row per (method, value): the run summary plus the swept value and the timings (`iter_sweep`)."""
    return list(iter_sweep(target, draft, prompt_ids, methods, axis, values, base, on_iteration, repeats, interleave_ar))


def iter_sweep(target: LanguageModel, draft: LanguageModel, prompt_ids: Sequence[int], methods: Sequence[str],
               axis: str, values: Sequence[float], base: DecodeConfig, on_iteration: Callable | None = None,
               repeats: int = 1, interleave_ar: bool = False) -> Iterator[dict]:
    """Yield one row per (value, method) as soon as its runs are done (a streaming caller shows each point).

    Each point is `repeats` runs with seeds base.seed, base.seed + 1, ...: the row is the first
    run's summary plus, per repeat, the block efficiency, mean E[tau | drafts], target calls and
    tokens/s (`repeat_*`), so a caller can give a mean with a confidence band, and
    `ar_tokens_per_second`: the AR runs (at the point's temperature) to time it against. With
    `interleave_ar` those are the AR runs just before and just after the method's runs (the one
    after a method is the one before the next, and ends one point and starts the next at the same
    temperature); else the one AR run of that temperature. `on_iteration` is handed to every
    `generate` call (a caller's time budget)."""
    if axis not in AXES:
        raise ValueError(f"sweep axis must be one of {', '.join(AXES)}, got {axis!r}")
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"sweep needs verifier methods; unknown or missing: {unknown or 'no methods'}")
    if repeats < 1:
        raise ValueError(f"a sweep needs at least one run per point, got repeats={repeats}")
    field_name = AXES[axis]
    configs = [replace(base, **{field_name: type(getattr(base, field_name))(v)}) for v in values]  # validates each
    timed: dict[float, float] = {}  # temperature -> tokens/s of its latest AR run

    def time_ar(config: DecodeConfig) -> float:
        ar = generate_config(target, None, prompt_ids, replace(config, method="ar", with_theory=False), on_iteration)
        timed[config.temperature] = ar.tokens_per_second
        return ar.tokens_per_second

    latest: float | None = None  # the temperature of the latest AR run: it opens the next point at that temperature
    for config in configs:
        before = timed[config.temperature] if config.temperature in timed and (
            not interleave_ar or latest == config.temperature) else time_ar(config)
        latest = config.temperature
        for method in methods:
            runs = [generate_config(target, draft, prompt_ids, replace(config, method=method, seed=config.seed + r),
                                    on_iteration) for r in range(repeats)]
            around = [before, time_ar(config)] if interleave_ar else [before]
            row = runs[0].summary()
            row.update(axis=axis, value=getattr(config, field_name),
                       seeds=[config.seed + r for r in range(repeats)],
                       repeat_block_efficiency=[run.block_efficiency for run in runs],
                       repeat_expected_accepted=[run.mean_expected_accepted for run in runs],
                       repeat_target_calls=[run.target_calls for run in runs],
                       repeat_tokens_per_second=[run.tokens_per_second for run in runs],
                       ar_tokens_per_second=around)
            before = around[-1]
            yield row


def iter_set_sweep(target: LanguageModel, draft: LanguageModel, prompt_ids: Sequence[Sequence[int]],
                   methods: Sequence[str], axis: str, values: Sequence[float], base: DecodeConfig,
                   on_iteration: Callable | None = None, repeats: int = 1, interleave_ar: bool = False) -> Iterator[dict]:
    """`iter_sweep` over several prompts: one row per (value, method) once every prompt has run at that value.

    The row is the first prompt's row with the `repeat_*` lists, `seeds` and the AR timings of
    every prompt joined (prompt after prompt), so a point's mean and band are over all its runs, a
    (prompt, seed) pair each, and `prompts` says how many prompts there were."""
    for value in values:
        rows: dict[str, list[dict]] = {m: [] for m in methods}
        for ids in prompt_ids:
            for row in iter_sweep(target, draft, ids, methods, axis, [value], base, on_iteration, repeats, interleave_ar):
                rows[row["method"]].append(row)
        for method in methods:
            first, joined = rows[method][0], {}
            for key in ("seeds", "repeat_block_efficiency", "repeat_expected_accepted", "repeat_target_calls",
                        "repeat_tokens_per_second", "ar_tokens_per_second"):
                joined[key] = [v for row in rows[method] for v in row[key]]
            yield first | joined | {"prompts": len(prompt_ids)}
