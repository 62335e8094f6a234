"""ZeroGPU conventions on Hugging Face Spaces, and plain calls everywhere else.

On a ZeroGPU Space the platform installs `spaces` and sets SPACES_ZERO_GPU. Then:

* `spaces` is imported before torch touches CUDA: app.py imports this module before
  anything else, and this module imports `spaces` first;
* models are placed on `cuda` when the app starts (`at_start`): ZeroGPU packs what is on
  cuda at start and hands it to every GPU worker, so a request does not load a model;
* every handler that runs a model is under `spaces.GPU` (`on_gpu(cost)`), with a duration
  computed from the request (`seconds`: tokens, K, L, number of methods, runs, prompts of a set), clamped to
  [MIN_SECONDS, MAX_SECONDS]. ZeroGPU refuses a call whose duration is more than the
  visitor's quota has left (an anonymous visitor has 2 minutes a day), so asking for the
  work's size, not a fixed 120 s, is what lets a visitor make more than one call. A request
  on a teaching pair (toy, two-token) runs no model and asks for no GPU time;
* inside the call the app's own time budget (`components.serving.limits.Budget`) ends decoding
  GPU_MARGIN_S before that duration, so a long run stops with a message instead of being
  aborted;
* handlers run in forked workers with their arguments and results pickled: they return
  plain Python (HTML, dicts, figures), never tensors, and nothing here uses torch.compile
  (ZeroGPU does not support it).

Without `spaces` (CPU Spaces, laptops, CI), `on_gpu(cost)` returns the handler unchanged
and `at_start` does nothing: the pairs load on first use, as before.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import logging
import math
import os
import time
from typing import Callable, Iterable

try:  # first: ZeroGPU's `spaces` must patch torch before anything initialises CUDA
    import spaces
except ImportError:
    spaces = None

from spectr_gbv import AUTOREGRESSIVE
from spectr_gbv.pairs import PAIRS, is_teaching, pair_key_of

from .limits import LIMITS, _env_int, gpu_call
from .request import COMPARE, FIDELITY, GENERATE, GRID, SWEEP, Inputs, RunRequest
from .run_cost import PairCost
from .steps import each_step

LOG = logging.getLogger("spectr_gbv.gpu")
# The variable `spaces` itself reads to know it is on ZeroGPU; with `spaces` installed but
# not on ZeroGPU (a CPU Space, a laptop), spaces.GPU is a no-op and so is `on_gpu`.
ON_ZEROGPU = spaces is not None and os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")

# Cost model of the default pair on a ZeroGPU H200 slice. This project's one H200 run (README,
# "On a GPU") found the 135M pair bound by the host: a forward costs 20-50 ms whatever its size,
# and end to end an iteration of K = 4, L = 6 took about 70 ms. The constants below are a few
# times that, and every iteration is assumed to emit one token only (the worst case: alpha 0, so a
# run of n tokens takes n iterations), so a run finishes well inside what it asked for; the Budget
# stops one that does not. The same model as the CPU estimates (components.serving.run_cost).
GPU_COST = PairCost(
    alpha=0.0,
    step_s=0.03,  # one plain AR target step
    iteration_s=0.06,  # one target forward scoring the drafts
    position_s=0.0005,  # per scored position (K x (L + 1)): nearly flat, since host-bound
    draft_step_s=0.03,  # one draft step (all K rows at once)
    prefill_s=0.06,  # the prompt through the target and the draft, once per run
)
START_SECONDS = 8.0  # worker start, first CUDA use, figures and the explorer's strings
MIN_SECONDS = 10
MAX_SECONDS = _env_int("SPECTR_GBV_GPU_MAX_SECONDS", 120)  # an anonymous visitor's whole daily quota


@dataclasses.dataclass(frozen=True)
class Run:
    """One decoding run a request makes (or `repeats` identical ones)."""

    tokens: int  # new tokens asked for: at most this many iterations, since each emits at least one
    num_drafts: int = 0  # K; 0 for plain AR
    draft_length: int = 0  # L; 0 for plain AR
    repeats: int = 1  # e.g. fidelity's N runs, or several methods at the same K and L

    def seconds(self) -> float:
        """The worst case: every iteration emits one token, so `tokens` iterations."""
        return self.repeats * GPU_COST.worst_case_seconds(self.tokens, self.num_drafts, self.draft_length)


def seconds(runs: Iterable[Run]) -> int:
    """GPU seconds to ask ZeroGPU for: start-up plus every run's worst case, clamped."""
    estimate = START_SECONDS + sum(run.seconds() for run in runs)
    return max(MIN_SECONDS, min(MAX_SECONDS, math.ceil(estimate)))


# ------------------------------------------------------------- what each handler asks for
# Each reads the handler's RunRequest and returns its runs, or None when the request runs no
# model (a teaching pair) and so needs no GPU. They may raise on bad input: the request then
# asks for no GPU time, and the handler itself refuses the input with its message. `on_gpu`
# takes the positional form (`generate_cost`, ...), which builds the RunRequest from the
# handler's own arguments.


def _needs_model(pair_key) -> bool:
    key = pair_key_of(pair_key)
    if not isinstance(key, str) or is_teaching(key):
        return False
    return key in PAIRS or "," in key  # a curated pair, or an operator's "TARGET, DRAFT"


def _drafted(num_drafts, draft_length, tokens, repeats=1) -> Run:
    return Run(int(tokens), int(num_drafts), int(draft_length), int(repeats))


def _run(method, num_drafts, draft_length, tokens, repeats=1) -> Run:
    if method == AUTOREGRESSIVE:
        return Run(int(tokens), repeats=int(repeats))
    return _drafted(num_drafts, draft_length, tokens, repeats)


def generate_runs(run: RunRequest) -> list[Run] | None:
    return [_run(run.method, run.num_drafts, run.draft_length, run.max_new_tokens)] if _needs_model(run.pair_key) else None


def set_size(run: RunRequest) -> int:
    """How many prompts a Compare or Sweep runs over: its prompt set's size, as the handlers resolve it.

    An unknown name raises (the request then asks for the minimum and the handler refuses it)."""
    # Imported here, not at the top: serving is imported before the wiring (and before gradio), and the set's
    # prompts are the wiring's (a pair's examples, the suite); by the time ZeroGPU asks, both are loaded.
    from components.wiring.prompt_set_choice import check_set_name
    from components.wiring.prompt_set_choice import set_size as prompts_in_set

    return prompts_in_set(check_set_name(run.prompt_set), run.pair_key)


def _over_set(runs: list[Run], run: RunRequest) -> list[Run]:
    """`runs` once per prompt of the request's set (every run, AR included, is made for each prompt)."""
    size = set_size(run)
    return [dataclasses.replace(each, repeats=each.repeats * size) for each in runs]


def compare_runs(run: RunRequest) -> list[Run] | None:
    if not _needs_model(run.pair_key):
        return None
    repeats = int(run.repeats)  # seeds: every method (and the coupled pass) runs once per seed
    runs = [Run(int(run.max_new_tokens), repeats=2),  # AR, before and after the methods
            _drafted(run.num_drafts, run.draft_length, run.max_new_tokens, len(run.methods) * repeats)]
    if run.coupled:  # one more pass per seed: shared drafts, which every method verifies
        runs.append(_drafted(run.num_drafts, run.draft_length, run.max_new_tokens, repeats))
    return _over_set(runs, run)


def sweep_runs(run: RunRequest) -> list[Run] | None:
    if not _needs_model(run.pair_key):
        return None
    # The values split as app.parse_values splits them (which also checks them, in the handler).
    swept = [float(part) for part in str(run.values or "").replace(";", ",").replace(" ", ",").split(",") if part]
    return _over_set([_drafted(value if run.axis == "K" else run.num_drafts,
                               value if run.axis == "L" else run.draft_length,
                               run.max_new_tokens, len(run.methods) * int(run.repeats)) for value in swept], run)


def fidelity_runs(run: RunRequest) -> list[Run] | None:
    if not _needs_model(run.pair_key):
        return None
    if int(run.num_runs) > LIMITS.fidelity_runs_llm:  # the handler refuses it at once: ask for no more than that
        raise ValueError("over the limit on runs")
    return [_run(run.method, run.num_drafts, run.draft_length, run.num_tokens, run.num_runs)]


def grid_runs(run: RunRequest) -> list[Run] | None:
    if not _needs_model(run.pair_key):
        return None
    # The values split as the Grid splits them (which also checks them, in the handler).
    drafts, lengths = ([int(float(part)) for part in (values if isinstance(values, (list, tuple))
                                                      else str(values or "").replace(",", " ").split())]
                       for values in (run.grid_drafts, run.grid_lengths))
    return [_drafted(k, length, run.grid_tokens, run.num_prompts) for k in drafts for length in lengths]


def _positional(inputs: Inputs, runs: Callable[[RunRequest], list[Run] | None]) -> Callable:
    """`runs` called with a handler's own arguments (what `on_gpu` and ZeroGPU's duration get)."""

    def cost(*args, **kwargs):
        return runs(inputs.request(args, kwargs))

    cost.__name__ = cost.__qualname__ = runs.__name__.replace("_runs", "_cost")
    cost.inputs, cost.runs = inputs, runs
    return cost


generate_cost = _positional(GENERATE, generate_runs)
compare_cost = _positional(COMPARE, compare_runs)
sweep_cost = _positional(SWEEP, sweep_runs)
fidelity_cost = _positional(FIDELITY, fidelity_runs)
grid_cost = _positional(GRID, grid_runs)


def request_seconds(cost: Callable, args: tuple, kwargs: dict) -> int | None:
    """`seconds` of the request's runs; None when it needs no GPU; MIN_SECONDS when its input is bad."""
    try:
        runs = cost(*args, **kwargs)
    except Exception:  # noqa: BLE001 - bad input: the handler refuses it at once
        return MIN_SECONDS
    return None if runs is None else seconds(runs)


# ---------------------------------------------------------------------------- decorators


def on_gpu(cost: Callable) -> Callable:
    """Decorator factory: on ZeroGPU, the handler under spaces.GPU(duration from `cost`); elsewhere unchanged."""

    def decorate(fn):
        return under_gpu(fn, cost, spaces.GPU) if ON_ZEROGPU else fn

    return decorate


def under_gpu(fn: Callable, cost: Callable, gpu_decorator: Callable) -> Callable:
    """`fn` under `gpu_decorator(duration=...)`, its Budget inside the duration; no GPU when `cost` says none.

    `gpu_decorator` is `spaces.GPU` on ZeroGPU (tests pass a stand-in). The duration is
    worked out twice from the same arguments: by ZeroGPU before the call, and in the worker
    when the call starts, where it bounds the Budget."""

    def duration(*args, **kwargs) -> int:
        return request_seconds(cost, args, kwargs) or MIN_SECONDS

    if inspect.isgeneratorfunction(fn):
        @functools.wraps(fn)
        def in_worker(*args, **kwargs):
            asked, started = duration(*args, **kwargs), time.monotonic()
            # Each step under the call's deadline: a Budget may be made in any step.
            yield from each_step(fn(*args, **kwargs), lambda: gpu_call(asked, started))

        on_the_gpu = gpu_decorator(duration=duration)(in_worker)

        @functools.wraps(fn)
        def route(*args, **kwargs):
            if request_seconds(cost, args, kwargs) is None:
                yield from fn(*args, **kwargs)
            else:
                yield from on_the_gpu(*args, **kwargs)

        return route

    @functools.wraps(fn)
    def in_worker(*args, **kwargs):
        with gpu_call(duration(*args, **kwargs), time.monotonic()):
            return fn(*args, **kwargs)

    on_the_gpu = gpu_decorator(duration=duration)(in_worker)

    @functools.wraps(fn)
    def route(*args, **kwargs):
        if request_seconds(cost, args, kwargs) is None:
            return fn(*args, **kwargs)
        return on_the_gpu(*args, **kwargs)

    return route


def at_start(load: Callable[[], object]) -> None:
    """On ZeroGPU, call `load` now (it places models on cuda for ZeroGPU to pack); elsewhere nothing.

    A failure is logged, not raised: the teaching pairs still serve, and a request for the
    failed pair gets the same error as a message."""
    if not ON_ZEROGPU:
        return
    try:
        load()
    except Exception:  # noqa: BLE001 - the app serves what it can
        LOG.exception("could not load the default pair at start; requests for it will report why")
