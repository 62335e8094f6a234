"""UI values -> validated library settings, with messages a user can act on.

Sliders and number boxes arrive as floats (or None when cleared); the API accepts anything:
the app's events skip Gradio's preprocessing, so every value of every type (strings, None,
lists, NaN, huge integers, lone surrogates) reaches these checks and gets a message naming
the setting and what it accepts. Everything is checked here once, so handlers can trust
what they get.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from spectr_gbv import AUTOREGRESSIVE, METHODS
from spectr_gbv.config import DecodeConfig

from ..serving.limits import LIMITS, check_block

MAX_DRAFTS, MAX_DRAFT_LENGTH, MAX_TEMPERATURE = 8, 16, 1.5
MAX_NEW_TOKENS = LIMITS.new_tokens
MAX_PROMPT_CHARS = 4000
MAX_PAIR_CHARS = 500  # a label, or an operator's 'TARGET, DRAFT'


def shown(value, limit: int = 60) -> str:
    """repr of a value for a message: short, and plain ASCII (no lone surrogate reaches a log or JSON)."""
    text = ascii(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({type(value).__name__} of {len(text)} characters)"


def _bounds(low: float, high: float) -> str:
    return "[" + ", ".join(str(int(b)) if float(b).is_integer() else f"{b:g}" for b in (low, high)) + "]"


def _number(name: str, value, low: float, high: float, integer: bool):
    if value is None or (isinstance(value, str) and not value.strip()):
        raise ValueError(f"{name} is missing: give a number in {_bounds(low, high)}")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"{name} must be a number in {_bounds(low, high)}, got {type(value).__name__} {shown(value)}")
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: an integer too big for a float
        raise ValueError(f"{name} must be a number in {_bounds(low, high)}, got {shown(value)}") from None
    if math.isnan(number) or not low <= number <= high:
        raise ValueError(f"{name} must be in {_bounds(low, high)}, got {shown(value)}")
    if integer:
        if number != int(number):
            raise ValueError(f"{name} must be a whole number, got {shown(value)}")
        return int(number)
    return number


def check_method(method, allow_ar: bool = True) -> str:
    known = ([AUTOREGRESSIVE] if allow_ar else []) + list(METHODS)
    if not isinstance(method, str) or method not in known:
        raise ValueError(f"unknown method {shown(method)}; choose one of: {', '.join(known)}")
    return method


def check_methods(methods, at_least_one: bool = True) -> list[str]:
    """The ticked methods (Compare, Sweep); none ticked is refused, unless `at_least_one` is False (a label's count)."""
    if isinstance(methods, str):
        methods = [methods]
    if methods is not None and not isinstance(methods, (list, tuple)):
        raise ValueError(f"the methods must be a list of method names, got {type(methods).__name__} {shown(methods)}")
    if not methods and at_least_one:
        raise ValueError("select at least one method to compare")
    return [check_method(m, allow_ar=False) for m in dict.fromkeys(map(_hashable, methods or []))]


def _hashable(value):
    return value if isinstance(value, (str, int, float, type(None))) else shown(value)


def check_choice(name: str, value, choices) -> str:
    """A value that must be one of a few names (the sweep axis, ...)."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {shown(value)}")
    return value


def check_flag(name: str, value) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"{name} must be true or false, got {type(value).__name__} {shown(value)}")
    return value


def check_pair_key(key) -> str:
    """The pair box's value: a name (the library checks which); anything but text is refused here."""
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_PAIR_CHARS:
        raise ValueError(f"the model pair must be the name of a pair, for example 'toy', got {type(key).__name__} "
                         f"{shown(key)}")
    return check_text("the model pair", key)


def check_text(name: str, text: str) -> str:
    """Text that tokenizers, logs and JSON can carry: no lone surrogate (a broken UTF-16 half)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(f"{name} contains a character that is not text (a lone surrogate, "
                         f"{shown(text[error.start])} at position {error.start}): remove it") from None
    return text


def check_prompt(prompt) -> str:
    if prompt is not None and not isinstance(prompt, str):
        raise ValueError(f"the prompt must be text, got {type(prompt).__name__} {shown(prompt)}")
    if not prompt or not prompt.strip():
        raise ValueError("the prompt is empty: type something to continue")
    if len(prompt) > MAX_PROMPT_CHARS:
        raise ValueError(f"the prompt is too long ({len(prompt)} characters; at most {MAX_PROMPT_CHARS})")
    return check_text("the prompt", prompt)


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
