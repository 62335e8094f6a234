"""Nothing lost, numbers to quote: the header every output carries, budget stops, repeat statistics, Stop.

Helpers for the app's streaming handlers (pure, but for the sessions' Stop requests, `STOPS`). A handler yields its outputs after every
finished piece of work (a method, a sweep point, a chunk of fidelity runs); when its budget
stops it (`components.serving.limits.BudgetSpent`) it yields once more what finished, with the
header saying what was stopped and why, instead of raising over the output. Repeats (seeds
seed, seed + 1, ...) give a mean with a 95 % Student-t band (`mean_band`).
"""

from __future__ import annotations

import html
import math
import re
import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from spectr_gbv import AUTOREGRESSIVE, METHODS
from spectr_gbv.intervals import t_interval
from spectr_gbv.pairs import PAIRS

from ..render.chart_layout import fit_top
from ..serving import limits
from ..render.speedup_figure import NOISY_AR_SPREAD, Speedup  # noqa: F401 - the record speedup_of makes

MAX_REPEATS = 10
CONFIDENCE = 0.95


def pair_label(pair_key: str) -> str:
    info = PAIRS.get(pair_key)
    return info.label if info else pair_key


def method_name(method: str) -> str:
    return "AR" if method == AUTOREGRESSIVE else (METHODS[method].label if method in METHODS else method)


def ignored_settings(methods: Sequence[str]) -> dict[str, list[str]]:
    """Which of K and L each method ignores: single-draft rules use one draft, plain AR drafts nothing."""
    ignored: dict[str, list[str]] = {}
    for method in methods:
        if method == AUTOREGRESSIVE:
            for setting in ("K", "L"):
                ignored.setdefault(setting, []).append(method_name(method))
        elif method in METHODS and not METHODS[method].multi_draft:
            ignored.setdefault("K", []).append(method_name(method))
    return ignored


@dataclass(frozen=True)
class Stop:
    """Where a budget stopped a run: `done` of `total` `unit` finished, and the budget's message."""

    done: int
    total: int
    unit: str
    reason: str

    def __post_init__(self):
        limits.mark_cut()  # a stopped run is not kept for identical requests (components.serving.shared_runs)

    def text(self) -> str:
        return f"stopped at {self.done} / {self.total} {self.unit}: {self.reason}"


def header_line(pair_key: str, methods: Sequence[str], num_drafts: int, draft_length: int, temperature: float,
                seed: int | None, extra: Sequence[str] = (), stop: Stop | None = None, swept: str | None = None,
                served: str | None = None) -> str:
    """One Markdown line naming what made this output: pair, method(s), K, L, T, seed, how the target
    ran (`served`: "eager" or "compiled", `spectr_gbv.models.compiled.serving_mode`; none for a
    teaching pair) and where it stopped.

    A setting every method ignores is struck out, one some ignore says by whom; the swept
    setting (`swept`) is replaced by the sweep."""
    ignored = ignored_settings(methods)
    parts = [f"**{pair_label(pair_key)}**", ", ".join(method_name(m) for m in methods)]
    for name, value in (("K", num_drafts), ("L", draft_length), ("T", f"{temperature:g}")):
        if name == swept:
            parts.append(f"{name} swept")
        elif len(ignored.get(name, [])) == len(methods):
            parts.append(f"~~{name} = {value}~~ (ignored)")
        elif name in ignored:
            parts.append(f"{name} = {value} (ignored by {', '.join(ignored[name])})")
        else:
            parts.append(f"{name} = {value}")
    if seed is not None:
        parts.append(f"seed {seed}")
    if served is not None:
        parts.append(f"target {served}")
    parts.extend(extra)
    line = " · ".join(parts)
    if stop is not None:
        line += f"  \n**{stop.text()}**. What finished is shown."
    return f"{line}\n\n"


def header_html(markdown_line: str) -> str:
    """`header_line` for an HTML output: escaped, bold and strike-through kept."""
    text = html.escape(markdown_line.strip(), quote=False)
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", text)
    text = re.sub(r"~~(.+?)~~", r"<s>\1</s>", text).replace("  \n", "<br>")
    return f'<div class="run-header" style="margin-bottom:8px">{text}</div>'


def mean_band(values: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float | None, float | None]:
    """Mean and Student-t confidence interval of the mean (`spectr_gbv.intervals`); no band from a single value."""
    data = [float(v) for v in values if v is not None]
    if not data:
        return math.nan, None, None
    mean, low, high = t_interval(data, confidence)
    return (mean, None, None) if len(data) == 1 else (mean, low, high)


def point_stats(block_efficiencies: Sequence[float], expected_accepted: Sequence[float | None],
                target_calls: Sequence[int]) -> dict[str, object]:
    """A measured point from its repeats: mean block efficiency, its band, the theory and the iterations behind it."""
    mean, low, high = mean_band(block_efficiencies)
    theory = [e for e in expected_accepted if e is not None]
    return {"repeats": len(block_efficiencies), "mean_block_efficiency": mean, "band_low": low, "band_high": high,
            "theory_acceptance_length": 1 + float(np.mean(theory)) if theory else None,
            "iterations": int(sum(target_calls))}


def point_from_summaries(summaries: Sequence[dict]) -> dict[str, object]:
    """`point_stats` of one method's repeats, from their run summaries (RunRecord or CoupledRun)."""
    return point_stats([s["block_efficiency"] for s in summaries], [s.get("mean_expected_accepted") for s in summaries],
                       [s["target_calls"] for s in summaries])


def sweep_point(row: dict) -> dict[str, object]:
    """A sweep row (`spectr_gbv.sweep.iter_sweep`) with its repeat statistics and, as in Compare, its
    speedup: the median over its runs, each against the AR runs timed around them (`speedup_of`)."""
    speedup = speedup_of(row["repeat_tokens_per_second"], row["ar_tokens_per_second"])
    return row | point_stats(row["repeat_block_efficiency"], row["repeat_expected_accepted"],
                             row["repeat_target_calls"]) | {"speedup_vs_ar": speedup.summary()}


def speedup_of(rates: Sequence[float], ar_rates: Sequence[float]) -> Speedup:
    """`Speedup` of a method's tokens/s `rates` against the tokens/s of the AR runs around them (one or two)."""
    ar_rate = len(ar_rates) / sum(1 / rate for rate in ar_rates)  # harmonic mean: tokens/s of the AR runs together
    ratios = sorted(rate / ar_rate for rate in rates)
    spread = (abs(ar_rates[0] - ar_rates[-1]) / (sum(ar_rates) / len(ar_rates))) if len(ar_rates) > 1 else None
    return Speedup(float(np.median(ratios)), ratios[0], ratios[-1], len(ratios), spread)


def titled(figure, coupled: bool):
    """Say on a figure's first subtitle line whether its numbers come from coupled or from independent
    runs (in the title it made the title too long for a half-screen chart)."""
    source = f"{'coupled' if coupled else 'independent'} runs"
    subtitle = figure.layout.title.subtitle.text
    figure.update_layout(title_subtitle_text=f"{source}<br>{subtitle}" if subtitle else source)
    return fit_top(figure, figure.layout.title.subtitle.text)  # room for the line added


PRESSED_STOP = "you pressed Stop"
PAIR_CHANGED = "you chose another pair"


class StopRequests:
    """Sessions whose visitor pressed Stop (or chose another pair): their streaming run ends at its next
    step, normally, and says why.

    A cooperative stop instead of cancelling the event: the run itself yields its last output
    (the tokens so far, the explorer filled, the note), so nothing races the cancellation and no
    error badge is drawn over the output. Only a run in this process sees it (not a ZeroGPU worker)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._sessions: dict[str, str] = {}

    def ask(self, session: str | None, reason: str = PRESSED_STOP) -> None:
        if session:
            with self._lock:
                self._sessions[session] = reason

    def take(self, session: str | None) -> str | None:
        """Why this session asked to stop ("you pressed Stop"), or None; the request is forgotten."""
        with self._lock:
            return self._sessions.pop(session, None) if session is not None else None


STOPS = StopRequests()
