"""The target's one-token step and scoring forwards under torch.compile, switched on only once
they are proven to agree.

A one-token step of a small model is bound by the host: most of its time goes to dispatching
hundreds of small ops, not to the products. torch.compile (inductor) fuses them; on CUDA,
`mode="reduce-overhead"` also replays the step as a CUDA graph. A compiled step needs shapes
that do not change from call to call, so a compiled session keeps its KV cache in transformers'
`StaticCache`, preallocated to `STATIC_CAPACITY` tokens and written at explicit positions
(`static_session.StaticHFSession`); a session that outgrows it goes on eagerly. The speculative
methods' scoring forward (the drafts' tree in one forward) is compiled too, one graph per width
bucket, its inputs padded to the bucket (`compiled_scoring`): AR and every method run on the
same compiled target.

`$SPECTR_GBV_COMPILE` decides whether to compile: `1`/`on`, `0`/`off`, or `auto` (the default):
on for the app on a CUDA GPU, off on the CPU (where it measured no faster, `compile_wanted`) and
for the library and the tests unless asked. Anything else is refused at start
with the accepted values named. On ZeroGPU it is always off (torch.compile is unsupported there;
ZeroGPU's ahead-of-time path is `spaces.aoti_*`).

`CompiledStep` is the switch a target `HFModel` carries. Until a compile of the step and of the
default settings' scoring bucket has finished and passed `check` (compiled against eager logits
on a fixed input, within the dtype's tolerance), every session starts eagerly; from then on new
sessions take the compiled step and the ready buckets, and a session never changes mode while it
runs. Other buckets are compiled in the background on first need (`CompiledScoring.want`). A
compile that fails or disagrees leaves the target (or that bucket's widths) eager, with one
logged line giving the reason. AR and every method start their sessions from the same target,
so exactness holds with respect to it, whichever mode served.

The app compiles in a background thread at low priority (`compile_in_background`), with
inductor's disk cache kept under the library's cache folder (`keep_inductor_cache`), so a
restart reuses the compiled kernels.
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from typing import Callable

import torch

from .cache import cache_dir

LOG = logging.getLogger("spectr_gbv.compile")

COMPILE_ENV = "SPECTR_GBV_COMPILE"
SETTINGS = {"1": True, "on": True, "0": False, "off": False, "auto": None}  # None: on for the app on CUDA, off elsewhere
EAGER, COMPILED = "eager", "compiled"
# Tokens a compiled session's cache holds (prompt, output and one iteration's drafts). The app's
# longest request fits; a longer library run goes on eagerly past it (`StaticHFSession`).
STATIC_CAPACITY = 1024
POOLED_CACHES = 4  # static caches kept for reuse: a CUDA graph replays on the addresses it recorded
INDUCTOR_CACHE_ENV = "TORCHINDUCTOR_CACHE_DIR"
# How far compiled logits may stray from eager ones, relative to the largest eager logit: a
# fused kernel sums in another order, which in fp32 moves logits by about 1e-6 of their size.
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-8, torch.bfloat16: 3e-2, torch.float16: 5e-3}
CHECK_TOKENS = 8  # the fixed prompt of the check: CHECK_TOKENS ids (`check_ids`), then three one-token steps
CHECK_STEPS = 3  # more than one: a CUDA graph is recorded on a later call than the first


def check_ids(indices: torch.Tensor, vocab: int) -> torch.Tensor:
    """The check's token ids for indices 0, 1, 2, ...: spread over the vocabulary from id 1000,
    not its first ids. Those are special and byte tokens, on which the default target in bf16 is
    far from its own fp32 self, so eager and compiled bf16 differed there by more than the dtype's
    tolerance; on ordinary tokens they agree to it, each as close to fp32 as the other."""
    return (1000 + 997 * indices) % vocab


def on_zerogpu() -> bool:
    """Whether this process serves on ZeroGPU (the variable its `spaces` package reads)."""
    return os.environ.get("SPACES_ZERO_GPU", "").lower() in ("1", "t", "true")


def compile_wanted(app: bool) -> bool:
    """Whether to compile, from $SPECTR_GBV_COMPILE; a ValueError naming the accepted values for
    anything else. Never on ZeroGPU.

    `auto` compiles for the app on CUDA only. On the two CPUs this project measured (an AVX2 EPYC
    with fbgemm fp16 weights and an AMX Xeon with packed bf16, 2 threads each; docs/space.md)
    compiled plain decoding was 1.13x-1.16x the eager one, but the methods, whose trees are
    padded up to their bucket, ran slower than eagerly, so there a compile costs minutes of CPU
    for nothing the app's default uses; `1` turns it on anyway."""
    raw = os.environ.get(COMPILE_ENV, "").strip().lower() or "auto"
    if raw not in SETTINGS:
        raise ValueError(f"${COMPILE_ENV}={raw!r} is not a setting; accepted values: {', '.join(SETTINGS)} "
                         "(auto: on for the app on a CUDA GPU, off on the CPU and for the library)")
    wanted = SETTINGS[raw]
    if wanted is None:
        wanted = app and torch.cuda.is_available()
    return wanted and not on_zerogpu()


def keep_inductor_cache() -> None:
    """Inductor's compiled kernels under the library's cache folder (kept across restarts),
    unless the operator chose a folder of their own."""
    os.environ.setdefault(INDUCTOR_CACHE_ENV, str(cache_dir() / "inductor"))


def lower_priority() -> None:
    """This thread (and the compile workers it starts) at the lowest CPU priority: a compile must
    not slow the requests being served beside it. Linux gives each thread its own nice value."""
    try:
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
    except (AttributeError, OSError):  # not Linux, or not allowed: compile at normal priority
        pass


def eager_step(base: torch.nn.Module) -> Callable:
    """The one-token step: the base model's last hidden states for `input_ids` [1, 1], writing
    its keys and values into `cache` (a StaticCache) at the cache's current length."""

    def step(input_ids: torch.Tensor, cache) -> torch.Tensor:
        return base(input_ids=input_ids, past_key_values=cache, use_cache=True).last_hidden_state

    return step


def compile_step(base: torch.nn.Module) -> Callable:
    """`eager_step` under torch.compile (inductor; on CUDA replayed as a CUDA graph). Compiling
    happens on the first call, which `CompiledStep.check` makes."""
    device = next(base.parameters()).device
    if device.type != "cuda":
        return torch.compile(eager_step(base), dynamic=False)
    return one_replay_at_a_time(torch.compile(eager_step(base), mode="reduce-overhead", dynamic=False))


# CUDA graphs recorded by torch.compile share one memory pool and one tree of recordings per
# device, driven without a lock: a replay in one visitor's thread may overwrite the outputs of
# another's before that thread read them. So replays take turns, and each hands back copies.
CUDA_GRAPH_REPLAY = threading.Lock()


def one_replay_at_a_time(graphed: Callable) -> Callable:
    """`graphed` (a CUDA-graph compiled callable) called as one new step at a time, under
    `CUDA_GRAPH_REPLAY`, returning copies of its tensor outputs (a tensor or a tuple of them):
    the next replay, in any thread, reuses the graph's output memory.

    The first call compiles (seconds to minutes, in the compile thread's check, before any
    session uses this callable) and is made outside the lock: a scoring bucket compiled in the
    background must not hold up the replays of the graphs sessions already use."""
    first_call_made = False

    def call(args):
        torch.compiler.cudagraph_mark_step_begin()
        out = graphed(*args)
        return tuple(t.clone() for t in out) if isinstance(out, tuple) else out.clone()

    def replay(*args):
        nonlocal first_call_made
        if not first_call_made:
            out = call(args)
            first_call_made = True
            return out
        with CUDA_GRAPH_REPLAY:
            return call(args)

    return replay


def _reason(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:200] if lines else ''}".rstrip(": ")


class CompiledStep:
    """A target's switch between eager decoding and its compiled one-token step and scoring buckets.

    `step` is None (eager) until `compile_now` has compiled and checked one; `mode` says which,
    and `reason` why a compile was given up. `scoring` holds the compiled scoring buckets.
    Sessions read `step` and the ready buckets once, when they start."""

    def __init__(self, model: torch.nn.Module, capacity: int = STATIC_CAPACITY):
        from .compiled_scoring import CompiledScoring

        self.model = model  # the causal LM: its base model is stepped, its head reads the check's logits
        self.capacity = capacity
        self.step: Callable | None = None
        self.scoring = CompiledScoring(self)  # the scoring forwards, one per width bucket
        self.reason: str | None = None
        self.compiling = False
        self._pool: list = []
        # Reentrant: `_give_back` runs from a weakref finalizer, which garbage collection may call
        # in a thread that holds the lock already.
        self._pool_lock = threading.RLock()

    @property
    def mode(self) -> str:
        return COMPILED if self.step is not None else EAGER

    # ------------------------------------------------------------------ static caches

    def new_cache(self):
        """An empty StaticCache of `capacity` tokens for one row, from the pool when one is free."""
        from transformers import StaticCache

        with self._pool_lock:
            cache = self._pool.pop() if self._pool else None
        if cache is None:
            return StaticCache(config=self.model.config, max_cache_len=self.capacity)
        with torch.inference_mode():  # the cache's tensors were made under it
            for layer in cache.layers:
                if layer.is_initialized:
                    layer.cumulative_length.zero_()  # old entries stay, masked, until overwritten
        return cache

    def lend_cache(self, session: object):
        """A cache for `session`, returned to the pool when the session is gone."""
        cache = self.new_cache()
        weakref.finalize(session, self._give_back, cache)
        return cache

    def _give_back(self, cache) -> None:
        with self._pool_lock:
            if len(self._pool) < POOLED_CACHES:
                self._pool.append(cache)

    # ------------------------------------------------------------------ compiling

    def check(self, step: Callable) -> str | None:
        """None when `step` gives the eager step's logits on a fixed input within the dtype's
        tolerance; else what differed."""
        base, head = self.model.base_model, self.model.get_output_embeddings()
        dtype = self.model.get_input_embeddings().weight.dtype
        device = next(self.model.parameters()).device
        vocab = self.model.config.vocab_size
        # Made outside inference mode, as a session's input ids are (`HFSession._ids`): a compiled
        # function guards on its inputs' dispatch keys, and an inference tensor here would leave
        # a graph that the first real step recompiles, seconds inside a visitor's request.
        ids = check_ids(torch.arange(CHECK_TOKENS + CHECK_STEPS, device=device)[None], vocab)
        # each as `_ids` makes a session's token (a compiled function guards on strides too)
        fed = [torch.tensor([[i]], dtype=torch.long, device=device) for i in ids[0, CHECK_TOKENS:].tolist()]
        with torch.inference_mode():
            return self._agrees(step, ids, fed, base, head, dtype)

    def _agrees(self, step: Callable, ids: torch.Tensor, fed: list[torch.Tensor], base, head, dtype) -> str | None:
        caches = []
        for _ in range(2):
            cache = self.new_cache()
            base(input_ids=ids[:, :CHECK_TOKENS], past_key_values=cache, use_cache=True)
            caches.append(cache)
        eager = eager_step(base)
        tolerance = TOLERANCE.get(dtype, 1e-4)
        for token in fed:
            expected = head(eager(token, caches[0])).float()
            got = head(step(token, caches[1])).float()
            if got.shape != expected.shape:
                return f"compiled logits have shape {tuple(got.shape)}, eager {tuple(expected.shape)}"
            error = (got - expected).abs().max().item()
            allowed = tolerance * max(1.0, expected.abs().max().item())
            if not error <= allowed:  # NaN fails too
                return f"compiled logits differ from eager by {error:.3g} (allowed {allowed:.3g} in {dtype})"
        for cache in caches:
            self._give_back(cache)
        return None

    def compile_now(self, compiler: Callable[[torch.nn.Module], Callable] | None = None,
                    scoring_layers: tuple[int, ...] = ()) -> str:
        """Compile the step and the default settings' scoring bucket, check them, and switch to
        them together (AR and the methods change at once); or stay eager, logging one line that
        says why. A bucket that fails leaves its widths scored eagerly, with its own line; other
        buckets compile on first need (`compiled_scoring`; its compiler is `scoring.compiler`).
        `scoring_layers`: the target layers the pair's draft reads (its `feature_layers`).
        Never raises: a failure is the eager mode. Returns the mode."""
        from .compiled_scoring import default_bucket

        self.compiling = True
        try:
            keep_inductor_cache()
            step = (compiler or compile_step)(self.model.base_model)
            problem = self.check(step)
            if problem is None:
                self.scoring.compile(default_bucket(), tuple(scoring_layers))
        except Exception as error:  # noqa: BLE001 - any failure of the compiler means: serve eagerly
            problem = _reason(error)
        finally:
            self.compiling = False
        if problem is not None:
            self.reason = problem
            LOG.warning("torch.compile of the target's one-token step given up, serving eagerly: %s", problem)
            return self.mode
        self.step = step  # one assignment: a session starting now sees the old value or the new, both whole
        LOG.info("the target's one-token step is compiled and agrees with eager: new runs use it")
        return self.mode

    def give_up(self, error: BaseException) -> None:
        """A compiled step that raised in a run (it passed the check): eager from now on, one logged line."""
        if self.step is None:
            return
        self.step, self.reason = None, _reason(error)
        LOG.warning("the compiled one-token step failed in a run, serving eagerly from now on: %s", self.reason)


def attach(hf_model, capacity: int = STATIC_CAPACITY) -> CompiledStep:
    """The switch of an `HFModel` target, made on first call (eager until it compiles)."""
    switch = getattr(hf_model, "compiled", None)
    if switch is None:
        switch = CompiledStep(hf_model.model, capacity)
        hf_model.compiled = switch
    return switch


def compile_in_background(load_target: Callable[[], object], compiler: Callable | None = None,
                          scoring_layers: Callable[[], tuple[int, ...]] | None = None) -> threading.Thread:
    """A daemon thread that loads the target (at normal priority: a request may be waiting for
    the same load), then compiles its step and its default scoring bucket at the lowest priority
    and switches to them when ready. `scoring_layers`: the target layers the pair's draft reads
    (loaded with the target). Requests never wait for it: until then their sessions start eagerly."""

    def run() -> None:
        try:
            target = load_target()
            layers = tuple(scoring_layers()) if scoring_layers is not None else ()
        except Exception as error:  # noqa: BLE001 - requests for the pair will report why
            LOG.warning("torch.compile not started, serving eagerly: the target did not load (%s)", _reason(error))
            return
        lower_priority()
        attach(target).compile_now(compiler, scoring_layers=layers)

    thread = threading.Thread(target=run, name="spectr-gbv-compile", daemon=True)
    thread.start()
    return thread


def serving_mode(model) -> str | None:
    """"eager" or "compiled" for a transformers target; None for a model that runs no forward
    (the teaching pairs' tables)."""
    if not hasattr(model, "loaded"):
        return None
    switch = getattr(model, "compiled", None)
    return switch.mode if switch is not None else EAGER
