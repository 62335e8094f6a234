"""What one request may cost, sized for a free CPU Space (2 vCPU, 16 GB), overridable by the operator.

Every limit is read from an environment variable once, at import (documented in the
README). A request over a limit is refused up front with a message naming the limit and
the variable, and so is one whose settings cannot fit the iteration budget however the run
goes (`check_fits`); a request that runs past its wall-time budget is stopped between two
steps of work (decoding iterations, scoring calls) with the same kind of message, and one
whose visitor has gone (the connection closed) is stopped there too (`ClientGone`).
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import math
import time
from dataclasses import dataclass
from typing import Callable


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name)
    if raw is None or not raw.strip():
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name} must be a whole number, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"environment variable {name} must be at least 1, got {value}")
    return value


@dataclass(frozen=True)
class Limits:
    prompt_tokens: int  # tokens of the prompt after the chat template
    new_tokens: int  # max new tokens per run
    block_tokens: int  # K x L: the target scores K x (L + 1) positions per call (memory)
    iterations: int  # decoding iterations per request, all runs together
    seconds: int  # wall time per request
    sweep_runs: int  # methods x values in one sweep
    fidelity_runs: int  # N on the teaching pairs (whose runs cost microseconds)
    fidelity_runs_llm: int  # N on real models
    hub_pairs: int  # hub pairs kept in memory at once
    allow_any_model: bool  # accept "target, draft" hub ids or local paths typed into the pair box
    sessions: int = 200  # sessions whose state is kept (Gradio's state_session_capacity): memory
    state_seconds: int = 1800  # how long a session keeps its last run for the explorer
    monitoring: bool = False  # Gradio's /monitoring page (public when on)

    @classmethod
    def from_env(cls) -> "Limits":
        return cls(
            prompt_tokens=_env_int("SPECTR_GBV_MAX_PROMPT_TOKENS", 1024),
            new_tokens=_env_int("SPECTR_GBV_MAX_NEW_TOKENS", 256),
            block_tokens=_env_int("SPECTR_GBV_MAX_BLOCK_TOKENS", 64),
            iterations=_env_int("SPECTR_GBV_MAX_ITERATIONS", 2000),
            seconds=_env_int("SPECTR_GBV_MAX_SECONDS", 180),
            sweep_runs=_env_int("SPECTR_GBV_MAX_SWEEP_RUNS", 24),
            fidelity_runs=_env_int("SPECTR_GBV_MAX_FIDELITY_RUNS", 2000),
            fidelity_runs_llm=_env_int("SPECTR_GBV_MAX_FIDELITY_RUNS_LLM", 300),
            hub_pairs=_env_int("SPECTR_GBV_MAX_HUB_PAIRS", 1),
            allow_any_model=os.environ.get("SPECTR_GBV_ALLOW_ANY_MODEL", "").lower() in ("1", "true", "yes"),
            sessions=_env_int("SPECTR_GBV_MAX_SESSIONS", 200),
            state_seconds=_env_int("SPECTR_GBV_STATE_SECONDS", 1800),
            monitoring=os.environ.get("SPECTR_GBV_MONITORING", "").lower() in ("1", "true", "yes"),
        )


LIMITS = Limits.from_env()


# Functions look LIMITS up when called (not as a default argument), so tests can swap it.
def check_block(num_drafts: int, draft_length: int, limits: Limits | None = None) -> None:
    limits = limits or LIMITS
    if num_drafts * draft_length > limits.block_tokens:
        raise ValueError(
            f"K x L = {num_drafts} x {draft_length} = {num_drafts * draft_length} drafted tokens per iteration is over "
            f"this server's limit of {limits.block_tokens} drafted tokens: lower K or L"
        )


def check_prompt_tokens(count: int, limits: Limits | None = None) -> None:
    limits = limits or LIMITS
    if count > limits.prompt_tokens:
        raise ValueError(
            f"the prompt is {count} tokens long, over this server's limit of {limits.prompt_tokens} "
            "tokens: shorten it"
        )


# The GPU time a ZeroGPU call asked for (components.gpu sets it around the call, inside the GPU
# worker): a Budget made inside that call stops decoding GPU_MARGIN_S before that time is up, so
# the run ends with a message instead of being aborted by ZeroGPU mid-iteration.
_GPU_CALL: contextvars.ContextVar[tuple[float, float] | None] = contextvars.ContextVar("spectr_gbv_gpu_call", default=None)
GPU_MARGIN_S = 5.0  # the call's work outside decoding: worker start, figures, the explorer's strings


@contextlib.contextmanager
def gpu_call(seconds: float, started: float):
    """Within this block, a new Budget ends GPU_MARGIN_S before `seconds` after `started` (if that is sooner)."""
    token = _GPU_CALL.set((started + seconds - GPU_MARGIN_S, seconds))
    try:
        yield
    finally:
        _GPU_CALL.reset(token)


def fewest_iterations(tokens: int, draft_length: int = 0, can_stop_early: bool = True) -> int:
    """The fewest decoding iterations a run of `tokens` new tokens can take: an iteration emits at most
    draft_length + 1 tokens (1 for plain AR), and a model with an end-of-text token may stop after one."""
    return 1 if can_stop_early else math.ceil(tokens / (draft_length + 1))


def check_fits(iterations: int, what: str, limits: Limits | None = None,
               advice: str = "fewer runs, tokens, methods or values, or a longer L") -> None:
    """Refuse, before any work, a request that needs at least `iterations` steps when fewer are allowed
    (`advice`: what the request's view can change)."""
    limits = limits or LIMITS
    if iterations > limits.iterations:
        raise ValueError(
            f"this request needs at least {iterations} decoding iterations ({what}), over this server's limit of "
            f"{limits.iterations} per request, so it was not started: {advice}"
        )


class BudgetSpent(ValueError):
    """A request ran out of its time or iteration budget mid-run: what finished before is kept and shown
    (components.runs), with this message as the reason; a ValueError, so code that knows nothing of
    partial results still reports it as a refusal."""


class ClientGone(Exception):
    """The visitor who sent the request has gone: the work stops, and nobody reads the message."""


# Whether the request's visitor is still connected (components.visitors sets it around a handler's
# work); a Budget made inside checks it at every tick.
_CLIENT_ALIVE: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar("spectr_gbv_client",
                                                                                           default=None)


# Whether the request's run was cut short (a budget, a Stop): a one-item list set around a handler's
# work (components.visitors.served), marked by `mark_cut` (a Budget that runs out, a view's Stop).
# Only a run that was not cut is kept for identical requests (components.serving.shared_runs).
_RUN_CUT: contextvars.ContextVar[list | None] = contextvars.ContextVar("spectr_gbv_run_cut", default=None)


@contextlib.contextmanager
def watching_client(alive: Callable[[], bool] | None, cut: list | None = None):
    """Within this block, a new Budget stops its request (ClientGone) once `alive()` is false, and a
    run cut short marks `cut[0]`."""
    token, cut_token = _CLIENT_ALIVE.set(alive), _RUN_CUT.set(cut)
    try:
        yield
    finally:
        _RUN_CUT.reset(cut_token)
        _CLIENT_ALIVE.reset(token)


def mark_cut() -> None:
    """The run being served was cut short (its output is not what the request alone would always give)."""
    cell = _RUN_CUT.get()
    if cell is not None:
        cell[0] = True


class Budget:
    """Wall time and iterations left to one request; `tick()` between steps of work.

    A step is a decoding iteration or one scoring call of fidelity's exact law; a tick also
    stops the request when its visitor has gone (see `watching_client`)."""

    def __init__(self, limits: Limits | None = None):
        self.limits = limits = limits or LIMITS
        self.started = time.monotonic()
        self.deadline = self.started + limits.seconds
        self.gpu_seconds = None  # set when the GPU time asked for ends first
        if (gpu := _GPU_CALL.get()) is not None and gpu[0] < self.deadline:
            self.deadline, self.gpu_seconds = gpu
        self.client_alive = _CLIENT_ALIVE.get()
        self.iterations = 0

    def tick(self, iterations: int = 1) -> None:
        if self.client_alive is not None and not self.client_alive():
            mark_cut()
            raise ClientGone(f"the visitor left; the request was stopped after {self.iterations} steps")
        self.iterations += iterations
        if self.iterations > self.limits.iterations:
            mark_cut()
            raise BudgetSpent(
                f"this request needs more than {self.limits.iterations} decoding iterations per request"
            )  # without advice: each view adds its own (components.wiring.admission.budget_stops.ADVICE)
        if time.monotonic() > self.deadline:
            mark_cut()
            limit = (f"this server's limit of {self.limits.seconds} s per request" if self.gpu_seconds is None
                     else f"the {self.gpu_seconds:.0f} s of GPU time it asked for")
            raise BudgetSpent(f"this request ran past {limit} and was stopped")
