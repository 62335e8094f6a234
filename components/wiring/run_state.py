"""What a session keeps between events: the last Generate run, for the explorer."""

from __future__ import annotations

from dataclasses import dataclass

from spectr_gbv.records import RunRecord


@dataclass
class RunState:
    """The last (or current) Generate run of this session.

    `texts` holds the display string of every token id the explorer can show, so the explorer
    needs no model (on ZeroGPU it runs outside the GPU worker)."""

    pair: str  # the pair's key
    record: RunRecord
    texts: dict[int, str]
    heading: dict  # components.wiring.runs.header_line's keywords for this run
    total: int  # the tokens asked for
    output: str | None = None  # the finished output's text as the page reads it back (None while it streams)

    def token_text(self, ids) -> list[str]:
        return [self.texts[i] for i in ids]
