"""UI values -> validated library settings, with messages a user can act on.

Sliders and number boxes arrive as floats (or None when cleared); the API accepts anything.
Everything is checked here once, so handlers can trust what they get.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from spectr_gbv import AUTOREGRESSIVE, METHODS
from spectr_gbv.config import DecodeConfig

from .limits import LIMITS, check_block

MAX_DRAFTS, MAX_DRAFT_LENGTH, MAX_TEMPERATURE = 8, 16, 1.5
MAX_NEW_TOKENS = LIMITS.new_tokens
MAX_PROMPT_CHARS = 4000


def _number(name: str, value, low: float, high: float, integer: bool):
    if isinstance(value, bool) or value is None or (isinstance(value, str) and not value.strip()):
        raise ValueError(f"{name} is missing: give a number in [{low:g}, {high:g}]")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number in [{low:g}, {high:g}], got {value!r}") from None
    if math.isnan(number) or not low <= number <= high:
        raise ValueError(f"{name} must be in [{low:g}, {high:g}], got {value!r}")
    if integer:
        if number != int(number):
            raise ValueError(f"{name} must be a whole number, got {value!r}")
        return int(number)
    return number


def check_method(method, allow_ar: bool = True) -> str:
    known = ([AUTOREGRESSIVE] if allow_ar else []) + list(METHODS)
    if method not in known:
        raise ValueError(f"unknown method {method!r}; choose one of: {', '.join(known)}")
    return method


def check_methods(methods) -> list[str]:
    if not methods:
        raise ValueError("select at least one method to compare")
    if isinstance(methods, str):
        methods = [methods]
    return [check_method(m, allow_ar=False) for m in dict.fromkeys(methods)]


def check_prompt(prompt) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("the prompt is empty: type something to continue")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(f"the prompt is too long ({len(prompt)} characters; at most {MAX_PROMPT_CHARS})")
    return prompt


@dataclass(frozen=True)
class Settings:
    num_drafts: int
    draft_length: int
    temperature: float
    max_new_tokens: int
    seed: int

    def config(self, method: str, with_theory: bool = True) -> DecodeConfig:
        return DecodeConfig(method=method, num_drafts=self.num_drafts, draft_length=self.draft_length,
                            temperature=self.temperature, max_new_tokens=self.max_new_tokens, seed=self.seed,
                            with_theory=with_theory)


def settings(num_drafts, draft_length, temperature, max_new_tokens, seed) -> Settings:
    checked = Settings(
        num_drafts=_number("K (drafts)", num_drafts, 1, MAX_DRAFTS, True),
        draft_length=_number("L (draft length)", draft_length, 1, MAX_DRAFT_LENGTH, True),
        temperature=_number("T (temperature)", temperature, 0, MAX_TEMPERATURE, False),
        max_new_tokens=_number("max new tokens", max_new_tokens, 1, MAX_NEW_TOKENS, True),
        seed=_number("seed", seed, 0, 2**31 - 1, True),
    )
    check_block(checked.num_drafts, checked.draft_length)
    return checked


def number(name: str, value, low: float, high: float, integer: bool = True):
    """A single checked number (sweep sizes, fidelity N, ...)."""
    return _number(name, value, low, high, integer)
