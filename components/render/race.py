"""Pure: the Race's two lanes -> HTML (each side's text coloured by provenance, its live numbers, the finish).

A lane with `appear_at` is a replay: every token is in the HTML, each iteration's hidden until its
moment on the lane's clock (a CSS animation delay, assets/app.css `.tok-replay`), so the page
plays the race without another update from the server."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Callable, Sequence

from spectr_gbv.records import RunRecord

from .palette import is_lossy, method_colour
from .text import UNTIMED_NOTE, legend_html, provenance_html

FINISH_FLAG = "🏁"


@dataclass(frozen=True)
class LaneView:
    """What a lane shows: its name, its method (for the colour), the run so far and its numbers."""

    label: str
    method: str
    record: RunRecord
    seconds: float  # the time of its own turns
    total: int  # the tokens asked for
    finish: str | None  # how it crossed the finish line ("finished after 8 target calls"); None: racing
    fresh: bool  # whether its latest target call's tokens are outlined (while it races)
    appear_at: Sequence[float] | None = None  # a replay: when each iteration appears, in seconds

    @property
    def tokens(self) -> int:
        return len(self.record.tokens)

    @property
    def tokens_per_second(self) -> float | None:
        return self.tokens / self.seconds if self.seconds > 0 and self.tokens else None


def stats_line(lane: LaneView, timed: bool = True) -> str:
    """Tokens, target calls and tokens/s (on a teaching pair, a lookup table, the note that its speed means nothing)."""
    rate = (UNTIMED_NOTE if not timed else f"{lane.tokens_per_second:.1f} tokens/s"
            if lane.tokens_per_second is not None else "– tokens/s")
    parts = [f"{lane.tokens} / {lane.total} tokens", f"{lane.record.target_calls} target calls", rate]
    if lane.finish is not None:
        parts.append(f"{FINISH_FLAG} {lane.finish}")
    return " · ".join(parts)


def lane_html(lane: LaneView, spelled: Callable[[list[int]], list[str]], timed: bool = True) -> str:
    colour = method_colour(lane.method)
    body = provenance_html(lane.record, spelled, legend=False, fresh=lane.fresh, appear_at=lane.appear_at)
    body = body.replace(" (click: open it in the explorer)", "")  # the Race has no explorer to open
    done = " race-finished" if lane.finish is not None else ""
    # a replay's numbers appear with its last tokens
    stats_replay = (f' tok-replay" style="animation-delay:{lane.appear_at[-1]:.2f}s;' if lane.appear_at
                    else '" style="')
    return (f'<div class="race-lane{done}" data-method="{html.escape(lane.method)}" data-tokens="{lane.tokens}" '
            f'data-target-calls="{lane.record.target_calls}" style="flex:1;min-width:240px;border:1px solid #ddd;'
            f'border-left:6px {"dashed" if is_lossy(lane.method) else "solid"} {colour};border-radius:6px;padding:8px">'
            f'<h4 style="margin:0 0 4px 0">{html.escape(lane.label)}</h4>'
            f'<div class="race-stats{stats_replay}font-size:14px;margin-bottom:6px">'
            f'{html.escape(stats_line(lane, timed))}</div>'
            f"{body}</div>")


def race_html(lanes: list[LaneView], spelled: Callable[[list[int]], list[str]], note: str = "",
              timed: bool = True) -> str:
    """Both lanes side by side, the kinds' legend under them, and `note` (plain text) above; `timed`
    False (a teaching pair) writes no tokens/s."""
    top = f'<div class="race-note" style="margin-bottom:6px">{html.escape(note)}</div>' if note else ""
    columns = "".join(lane_html(lane, spelled, timed) for lane in lanes)
    return (f'{top}<div class="race-row" style="display:flex;gap:10px;flex-wrap:wrap">{columns}</div>'
            + legend_html())
