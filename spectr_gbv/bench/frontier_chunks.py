"""The bookkeeping of a resumable frontier run (`python -m spectr_gbv.bench.frontier --resume`).

A grid of (K, L, T) over many prompts runs for hours, so it is cut into chunks: one
configuration over one range of prompts. Each finished chunk is written at once to
`OUT/chunks/K{K}_L{L}_T{T}_p{start}-{stop}.json` (written whole or not at all), with the
settings it was measured under. A resumed run skips the chunks on disk and measures the rest;
`OUT/frontier.json` is assembled from the chunks, so an interrupted and resumed run writes
exactly what an uninterrupted one writes.

The settings that make the numbers (pair, target and its kernel, draft and its files, methods,
new tokens, chunk size) must match those of every chunk already in the folder: a folder never
mixes two runs. A prompt's seed is its index in the suite, whichever chunk measures it.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path
from typing import Iterable, Sequence

from ..pairs import DEFAULT_KEY
from .frontier import without_nan

CHUNKS = "chunks"
# The settings a chunk's numbers depend on besides its own (K, L, T) and prompts.
SETTINGS = ("pair", "target", "target_kernel", "draft", "draft_kernel", "draft_files", "methods",
            "max_new_tokens", "chunk_prompts")


class SettingsMismatch(ValueError):
    """A chunk on disk was measured under other settings than the run that would resume it."""


def digest(parts: Iterable[bytes]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(hashlib.sha256(part).digest())  # hashed per part, so no two splits collide
    return h.hexdigest()[:16]


def files_digest(folder: Path | None) -> str | None:
    """A digest of every file in `folder` (name and bytes), or None where there is none."""
    if folder is None or not Path(folder).is_dir():
        return None
    files = sorted(p for p in Path(folder).iterdir() if p.is_file())
    return digest(part for p in files for part in (p.name.encode(), p.read_bytes()))


def run_settings(pair, args) -> dict:
    """The settings a run's numbers depend on (SETTINGS). The kernels matter: the CPU target runs in
    the kernel this machine measured best (or the one $SPECTR_GBV_CPU_KERNEL names), and its rounding
    changes the probabilities; the draft's files say which training of it this is."""
    target_kernel = getattr(getattr(getattr(pair.target, "loaded", None), "kernel", None), "kernel", None)
    draft_folder = None
    if pair.info.key == DEFAULT_KEY:
        from ..models.hf import FEATURE_DRAFT_ASSETS

        draft_folder = FEATURE_DRAFT_ASSETS
    return {"pair": pair.info.key, "target": pair.target.name, "target_kernel": target_kernel,
            "draft": pair.draft.name, "draft_kernel": getattr(pair.draft, "kernel", None),
            "draft_files": files_digest(draft_folder), "methods": list(args.methods),
            "max_new_tokens": args.max_new_tokens, "chunk_prompts": args.chunk_prompts}


def prompts_digest(texts: Sequence[str]) -> str:
    return digest(text.encode() for text in texts)


def chunk_ranges(prompts: int, chunk_prompts: int) -> list[tuple[int, int]]:
    """[start, stop) prompt ranges of at most `chunk_prompts` prompts, covering `prompts`."""
    return [(start, min(start + chunk_prompts, prompts)) for start in range(0, prompts, chunk_prompts)]


def work_order(drafts: Sequence[int], lengths: Sequence[int], temperatures: Sequence[float]) -> list[tuple]:
    """(K, L, T) in the order they are measured: temperature by temperature, as listed, so whole
    temperatures finish early; within one, K then L as listed."""
    return [(K, L, T) for T in temperatures for K in drafts for L in lengths]


def grid_order(drafts: Sequence[int], lengths: Sequence[int], temperatures: Sequence[float]) -> list[tuple]:
    """(K, L, T) in the order the assembled results list them: sorted by K, then L, then T."""
    return [(K, L, T) for K in sorted(drafts) for L in sorted(lengths) for T in sorted(temperatures)]


def _floats(values: list) -> list[float]:
    """Saved values back to floats: JSON null (no theory line) to NaN."""
    return [math.nan if v is None else float(v) for v in values]


def _differences(saved: dict, current: dict) -> list[str]:
    return [f"{key}: {saved.get(key)!r} on disk, {current.get(key)!r} now"
            for key in SETTINGS if saved.get(key) != current.get(key)]


class ChunkStore:
    """The chunks of one run under `out/chunks`, checked against `settings` when opened."""

    def __init__(self, out: Path, settings: dict):
        self.folder = Path(out) / CHUNKS
        self.settings = json.loads(json.dumps(settings))  # as it reads back from disk
        self.folder.mkdir(parents=True, exist_ok=True)
        for path in sorted(self.folder.glob("*.json")):
            saved = self._read(path)
            if saved is not None:
                self._check(path, saved)

    def path(self, K: int, L: int, T: float, start: int, stop: int) -> Path:
        return self.folder / f"K{K}_L{L}_T{T:g}_p{start:03d}-{stop:03d}.json"

    def _read(self, path: Path) -> dict | None:
        """A chunk as saved; None for an unreadable one (measured again: it is only lost time)."""
        try:
            saved = json.loads(path.read_text())
            return saved if isinstance(saved, dict) and "per_prompt" in saved else None
        except (OSError, ValueError):
            return None

    def _check(self, path: Path, saved: dict) -> None:
        differences = _differences(saved.get("settings", {}), self.settings)
        if differences:
            raise SettingsMismatch(
                f"{path} was measured under other settings ({'; '.join(differences)}). Resume it with the "
                f"settings it was made with, or start this run in another --out folder.")

    def load(self, K: int, L: int, T: float, start: int, stop: int, prompts: str) -> dict | None:
        """The per-prompt values of a finished chunk (method -> metric -> values), or None if not done.
        A chunk of other prompts under the same indices (the suite changed) is refused."""
        path = self.path(K, L, T, start, stop)
        saved = self._read(path) if path.is_file() else None
        if saved is None:
            return None
        self._check(path, saved)
        if saved.get("prompts_digest") != prompts:
            raise SettingsMismatch(f"{path} was measured on other prompts {start}..{stop - 1} than the suite "
                                   "holds now. Start this run in another --out folder.")
        return {m: {metric: _floats(values) for metric, values in by_metric.items()}
                for m, by_metric in saved["per_prompt"].items()}

    def save(self, K: int, L: int, T: float, start: int, stop: int, prompts: str, per_prompt: dict,
             seconds: float) -> Path:
        """Writes a finished chunk whole: to a temporary name, then renamed (an interrupted write
        leaves no half chunk behind)."""
        path = self.path(K, L, T, start, stop)
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(without_nan({
            "settings": self.settings, "K": K, "L": L, "T": T, "start": start, "stop": stop,
            "prompts_digest": prompts, "seconds": round(seconds, 1), "per_prompt": per_prompt}), indent=1))
        os.replace(partial, path)
        return path

    def seconds(self) -> float:
        """The measuring time of every chunk on disk, summed over the runs that made them."""
        return sum((self._read(p) or {}).get("seconds", 0.0) for p in self.folder.glob("*.json"))

    def assembled(self, configurations: Sequence[tuple], ranges: Sequence[tuple[int, int]],
                  prompt_digests: Sequence[str]) -> dict[tuple, dict]:
        """(K, L, T) -> per-prompt values over every range, for the configurations whose chunks are all done."""
        complete = {}
        for K, L, T in configurations:
            parts = [self.load(K, L, T, start, stop, d) for (start, stop), d in zip(ranges, prompt_digests)]
            if all(part is not None for part in parts):
                complete[(K, L, T)] = {m: {metric: [v for part in parts for v in part[m][metric]]
                                           for metric in parts[0][m]} for m in parts[0]}
        return complete
