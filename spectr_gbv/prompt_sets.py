"""The project's prompt lists, kept as data in `assets/prompts/` and read by benchmarks and
training alike (so neither imports the other to learn which prompts are held out).

* `bench_prompts()`: the end-to-end benchmark's prompts, one per kind (code, math, story,
  instructions);
* `held_out_prompts()`: the draft's held-out prompts, (kind, text) pairs;
* `PAPER_SUITE`: the paper-style prompt suite of the frontier and paper benchmarks.

None of them is ever trained on: `spectr_gbv.training.distill` drops any sample whose prompt
is one of them.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

PROMPTS_FOLDER = Path(__file__).resolve().parents[1] / "assets" / "prompts"
PAPER_SUITE = PROMPTS_FOLDER / "paper_suite.json"


@cache
def _read(name: str) -> dict:
    return json.loads((PROMPTS_FOLDER / name).read_text())


def bench_prompts() -> dict[str, str]:
    """kind -> prompt text, in the benchmark's order."""
    return dict(_read("bench.json")["prompts"])


def held_out_prompts() -> list[tuple[str, str]]:
    """(kind, prompt text) pairs, two per kind."""
    return [(kind, text) for kind, text in _read("held_out.json")["prompts"]]
