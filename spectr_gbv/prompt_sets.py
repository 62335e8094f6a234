"""The project's prompt lists, kept as data in `assets/prompts/` and read by benchmarks and
training alike (so neither imports the other to learn which prompts are held out).

* `bench_prompts()`: the end-to-end benchmark's prompts, one per kind (code, math, story,
  instructions);
* `held_out_prompts()`: the draft's held-out prompts, (kind, text) pairs;
* `PAPER_SUITE`: the paper-style prompt suite of the frontier and paper benchmarks;
  `suite_prompts(pair_key, count)` takes `count` of them across its families in turn (a teaching
  pair gets short prompts in its own words, `TEACHING_PROMPTS`), as the frontier bench and the
  app's prompt sets (`components.wiring.prompt_set_choice`) both read them;
* `EXAMPLES`: the app's example prompts, (pair key, text); `named_set(name, pair_key, prompt)`:
  the prompts of a named set (`SET_NAMES`), as the app's views and `python -m
  spectr_gbv.bench.view` both run them.

None of them is ever trained on: `spectr_gbv.training.distill` drops any sample whose prompt
is one of them.
"""

from __future__ import annotations

import itertools
import json
from functools import cache
from pathlib import Path

from .pairs import DEFAULT_KEY, TOY_KEY, TWO_TOKEN_KEY, is_teaching, pair_key_of

PROMPTS_FOLDER = Path(__file__).resolve().parents[1] / "assets" / "prompts"
PAPER_SUITE = PROMPTS_FOLDER / "paper_suite.json"
# The teaching pairs read only their own words: their "suite" is these, cycled.
TEACHING_PROMPTS = {TOY_KEY: ["the", "the cat", "the dog ran", "on the mat", "the cat sat on"],
                    TWO_TOKEN_KEY: ["A", "B", "A B", "B B A", "A A B"]}


EXAMPLES = [
    [DEFAULT_KEY, "Write a Python function that checks whether a number is prime."],
    [DEFAULT_KEY, "A train travels 120 km in 1.5 hours. What is its average speed?"],
    [DEFAULT_KEY, "Write a short story about a robot who learns to paint."],
    [DEFAULT_KEY, "Give three tips for staying focused while studying."],
    [TOY_KEY, "the cat"],
    [TWO_TOKEN_KEY, "A"],
]

# The named prompt sets: the prompt alone, the pair's examples, and slices of the suite.
SINGLE = "prompt"
SUITE_SIZES = (5, 10, 20, 40, 120)  # multiples of the suite's five families: every slice is balanced
SET_NAMES = (SINGLE, "examples", *(f"suite-{n}" for n in SUITE_SIZES))


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


def example_prompts(pair_key: str) -> list[str]:
    """The pair's example prompts (a model pair without its own: the default pair's); a teaching pair adds its
    own short prompts, so its set has more than one."""
    key = pair_key_of(pair_key)
    own = [text for k, text in EXAMPLES if k == key] or [text for k, text in EXAMPLES if not is_teaching(k)]
    return list(dict.fromkeys(own + TEACHING_PROMPTS.get(key, [])))


def named_set(name: str, pair_key: str, prompt: str) -> list[str]:
    """The prompts of the set `name` (one of SET_NAMES) on this pair; `prompt` is the `prompt` set's one."""
    if name == SINGLE:
        return [prompt]
    if name == "examples":
        return example_prompts(pair_key)
    if name in SET_NAMES:
        return suite_prompts(pair_key, int(name.removeprefix("suite-")))
    raise ValueError(f"unknown prompt set {name!r}: choose one of {', '.join(SET_NAMES)}")
