"""The project's prompt lists, kept as data in `assets/prompts/` and read by benchmarks and
training alike (so neither imports the other to learn which prompts are held out).

* `bench_prompts()`: the end-to-end benchmark's prompts, one per kind (code, math, story,
  instructions);
* `held_out_prompts()`: the draft's held-out prompts, (kind, text) pairs;
* `PAPER_SUITE`: the paper-style prompt suite of the frontier and paper benchmarks;
  `suite_prompts(pair_key, count)` takes `count` of them across its families in turn (a teaching
  pair gets short prompts in its own words, `TEACHING_PROMPTS`), as the frontier bench and the
  app's prompt sets (`components.wiring.prompt_set_choice`) both read them.

None of them is ever trained on: `spectr_gbv.training.distill` drops any sample whose prompt
is one of them.
"""

from __future__ import annotations

import itertools
import json
from functools import cache
from pathlib import Path

from .pairs import TOY_KEY, TWO_TOKEN_KEY, is_teaching, pair_key_of

PROMPTS_FOLDER = Path(__file__).resolve().parents[1] / "assets" / "prompts"
PAPER_SUITE = PROMPTS_FOLDER / "paper_suite.json"
# The teaching pairs read only their own words: their "suite" is these, cycled.
TEACHING_PROMPTS = {TOY_KEY: ["the", "the cat", "the dog ran", "on the mat", "the cat sat on"],
                    TWO_TOKEN_KEY: ["A", "B", "A B", "B B A", "A A B"]}


@cache
def _read(name: str) -> dict:
    return json.loads((PROMPTS_FOLDER / name).read_text())


def bench_prompts() -> dict[str, str]:
    """kind -> prompt text, in the benchmark's order."""
    return dict(_read("bench.json")["prompts"])


def held_out_prompts() -> list[tuple[str, str]]:
    """(kind, prompt text) pairs, two per kind."""
    return [(kind, text) for kind, text in _read("held_out.json")["prompts"]]


def paper_suite() -> list[str]:
    """The paper suite's prompts, its five families in turn (a slice of any length is balanced across them)."""
    families = _read(PAPER_SUITE.name)["families"].values()
    return [p for group in itertools.zip_longest(*families) for p in group if p is not None]


def suite_prompts(pair_key: str, count: int) -> list[str]:
    """`count` prompts: the paper suite's families in turn (a model pair) or the teaching prompts, cycled."""
    key = pair_key_of(pair_key)
    pool = TEACHING_PROMPTS[key] if is_teaching(key) else paper_suite()
    return [pool[i % len(pool)] for i in range(count)]
