"""`DecodeConfig`: every setting of one decoding run, validated once."""

from __future__ import annotations

from dataclasses import dataclass

# Method names handled by the engine itself rather than by a verifier.
AUTOREGRESSIVE = "ar"

# Ranges the library accepts. The app may offer narrower ones; these are what is meaningful.
MAX_TEMPERATURE = 100.0


@dataclass(frozen=True)
class DecodeConfig:
    method: str = "spectr_gbv"  # "ar" or a key of spectr_gbv.METHODS
    num_drafts: int = 4  # K: i.i.d. drafts per iteration (single-draft methods use 1)
    draft_length: int = 4  # L: tokens per draft block
    temperature: float = 1.0  # 0 means greedy (one-hot distributions)
    top_k: int | None = None  # keep the k most likely tokens (applied to draft AND target)
    top_p: float | None = None  # nucleus mass (applied to draft AND target)
    max_new_tokens: int = 32  # exactly this many tokens unless an end-of-sequence token comes first
    seed: int = 0  # same seed, same tokens
    with_theory: bool = True  # compute E[tau | drafts] per iteration (not counted in timings)

    def __post_init__(self) -> None:
        from .methods import METHODS  # the registry; imported here to keep config import-light

        if self.method != AUTOREGRESSIVE and self.method not in METHODS:
            known = ", ".join([AUTOREGRESSIVE, *METHODS])
            raise ValueError(f"method {self.method!r} is unknown; choose one of: {known}")
        _check_int("num_drafts", self.num_drafts, 1)
        _check_int("draft_length", self.draft_length, 1)
        _check_int("max_new_tokens", self.max_new_tokens, 1)
        _check_int("seed", self.seed, 0)
        if isinstance(self.temperature, bool) or not isinstance(self.temperature, (int, float)):
            raise ValueError(f"temperature must be a number, got {self.temperature!r}")
        if not 0 <= self.temperature <= MAX_TEMPERATURE:  # also rejects NaN
            raise ValueError(f"temperature must be in [0, {MAX_TEMPERATURE}], got {self.temperature}")
        if self.top_k is not None:
            _check_int("top_k", self.top_k, 1)
        if self.top_p is not None and not (isinstance(self.top_p, (int, float)) and 0 < self.top_p <= 1):
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p!r}")

    @property
    def is_autoregressive(self) -> bool:
        return self.method == AUTOREGRESSIVE

    @property
    def effective_num_drafts(self) -> int:
        """K actually drafted: single-draft methods (sd, gbv) draft one block."""
        from .methods import METHODS

        if self.is_autoregressive:
            return 0
        return self.num_drafts if METHODS[self.method].multi_draft else 1


def _check_int(name: str, value: object, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
