"""The target's scoring forward (the drafts' tree in one forward) under torch.compile, per width bucket.

A compiled graph needs fixed shapes, and a scoring forward's width (the pending tokens plus the
trie's distinct nodes) changes from call to call. So widths are padded up to a few buckets
(`BUCKETS`: 2, 4, ... 128, which hold every K x L the app allows, plus the pending token), and
each bucket is one graph under `torch.compile(dynamic=False)`.

The padding is inert (`padded_inputs`): a pad token sees only itself, so its keys and values stay
finite, and no real row sees a pad, so the real rows' outputs are the unpadded forward's. The
pads' cache entries land just past the real ones; the cache's length is moved back over them
right after the forward (`padded_score`), so the length counts real entries only, and the mask
hides the pads' slots until a later forward overwrites them.

`CompiledScoring` is the per-target set of buckets a `compiled.CompiledStep` carries. A bucket
is compiled, then checked against the eager forward on a fixed tree that needs padding (the
dtype's tolerance, as for the one-token step), before any session uses it; one that fails or
disagrees stays eager, with one logged line. The start compiles the default settings' bucket;
any other bucket is compiled in a background thread at the lowest priority the first time a
session needs it, and that session scores eagerly meanwhile. A session reads the ready buckets
once, when it starts, so it never changes mode while it runs.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Callable

import torch

from ..trie import DraftTrie, ScoringLayout

LOG = logging.getLogger("spectr_gbv.compile")

BUCKETS = (2, 4, 8, 16, 32, 64, 128)  # K x L <= 64 (the app's limit) drafted nodes, plus the pending tokens
DEFAULT_DRAFTS, DEFAULT_LENGTH = 2, 4  # the app's default (K, L): its bucket is compiled at start
# Dynamo keeps one graph per bucket (and feature layers) for the same code: room for all of them.
RECOMPILE_LIMIT = 4 * len(BUCKETS)

Key = tuple[int, tuple[int, ...]]  # (bucket width, target layers whose outputs the draft reads: () for the last)


def bucket_for(width: int) -> int | None:
    """The smallest bucket holding `width` fed positions; None past the largest (scored eagerly)."""
    return next((bucket for bucket in BUCKETS if bucket >= width), None)


def default_bucket() -> int:
    """The bucket of the default settings' widest scoring forward: one pending token and K x L nodes."""
    return bucket_for(1 + DEFAULT_DRAFTS * DEFAULT_LENGTH)


def eager_scorer(base: torch.nn.Module, layers: tuple[int, ...]) -> Callable:
    """The scoring forward: (last hidden states, the features a draft reads) [1, n, .] of `ids`
    [1, n] at `positions` under the 4-D additive `mask` [1, 1, n, cache width], written into
    `cache` (a StaticCache) at its current length."""
    from .feature_draft import target_features

    def score(ids: torch.Tensor, mask: torch.Tensor, positions: torch.Tensor, cache) -> tuple[torch.Tensor, torch.Tensor]:
        out = base(input_ids=ids, attention_mask=mask, position_ids=positions, past_key_values=cache, use_cache=True,
                   output_hidden_states=bool(layers) or None)
        return out.last_hidden_state, target_features(out, layers)

    return score


def compile_scorer(base: torch.nn.Module, width: int, layers: tuple[int, ...]) -> Callable:
    """`eager_scorer` under torch.compile (inductor; on CUDA replayed as a CUDA graph), for inputs
    of one `width`. Compiling happens on the first call, which `CompiledScoring.check` makes."""
    import torch._dynamo.config as dynamo_config

    for name in ("recompile_limit", "cache_size_limit"):  # the name changed across torch versions
        if hasattr(dynamo_config, name):
            setattr(dynamo_config, name, max(getattr(dynamo_config, name), RECOMPILE_LIMIT))
    device = next(base.parameters()).device
    if device.type != "cuda":
        return torch.compile(eager_scorer(base, layers), dynamic=False)
    from .compiled import one_replay_at_a_time

    return one_replay_at_a_time(torch.compile(eager_scorer(base, layers), mode="reduce-overhead", dynamic=False))


def padded_inputs(ids: torch.Tensor, positions: torch.Tensor, recent_mask: torch.Tensor, past: int, width: int,
                  capacity: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """`ids` and `positions` [1, r] and the recent block's mask [r, r] after `past` cached entries,
    padded to `width` fed positions, in a scorer's order: (ids, mask [1, 1, width, capacity],
    positions [1, width]).

    Real rows see the context and the recent block as unpadded; every pad column is hidden from
    them. A pad row sees only its own slot (a row seeing nothing would be a softmax over nothing,
    and its NaNs would reach the cache). Pads are token 0 at the first fed position."""
    real = ids.shape[1]
    pads = width - real
    hidden = torch.finfo(recent_mask.dtype).min
    mask = recent_mask.new_full((width, capacity), hidden)
    mask[:real, :past] = 0
    mask[:real, past : past + real] = recent_mask
    if pads:
        own = torch.arange(real, width, device=mask.device)
        mask[own, past + own] = 0
        ids = torch.cat([ids, ids.new_zeros(1, pads)], dim=1)
        positions = torch.cat([positions, positions.new_full((1, pads), past)], dim=1)
    return ids, mask[None, None], positions


@torch.inference_mode()  # the cache's tensors were made under it
def padded_score(scorer: Callable, cache, ids: torch.Tensor, positions: torch.Tensor, recent_mask: torch.Tensor,
                 past: int, width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Run `scorer` over the inputs padded to `width` and move the cache's length back over the
    pads: (hidden, features) of the real rows only."""
    real = ids.shape[1]
    capacity = cache.layers[0].max_cache_len
    padded = padded_inputs(ids, positions, recent_mask, past, width, capacity)
    hidden, features = scorer(*padded, cache)
    if width > real:
        for layer in cache.layers:
            if layer.is_initialized:
                layer.cumulative_length.sub_(width - real)  # the pads' slots: hidden, and overwritten later
    return hidden[:, :real], features[:, :real]


def _reason(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0][:200] if lines else ''}".rstrip(": ")


class CompiledScoring:
    """A target's compiled scoring forwards, one per (bucket, feature layers): `ready` holds the
    checked ones, `failed` why the others stay eager; `want` asks for one in the background."""

    def __init__(self, switch, compiler: Callable | None = None):
        self.switch = switch  # the target's `compiled.CompiledStep`: its model, its static caches
        self.compiler = compiler or compile_scorer  # (base, width, layers) -> scorer
        self.ready: dict[Key, Callable] = {}
        self.failed: dict[Key, str] = {}
        self._wanted: set[Key] = set()
        self._queue: queue.Queue[Key] = queue.Queue()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)  # notified when a bucket asked for is done, its line logged
        self._pending = 0  # buckets asked for by `want` and not yet done
        self.worker: threading.Thread | None = None
        self.on_need = True  # compile a bucket a session needs (off: only those compiled by hand; tests of one bucket)

    def want(self, key: Key) -> None:
        """Compile `key` in the background unless it is ready, failed or already asked for. Never waits."""
        with self._lock:
            if not self.on_need or key in self.ready or key in self.failed or key in self._wanted:
                return
            self._wanted.add(key)
            self._pending += 1
            self._queue.put(key)
            if self.worker is None or not self.worker.is_alive():
                self.worker = threading.Thread(target=self._work, name="spectr-gbv-compile-scoring", daemon=True)
                self.worker.start()

    def _work(self) -> None:
        from .compiled import lower_priority

        lower_priority()
        while True:
            try:
                key = self._queue.get(timeout=1)
            except queue.Empty:
                with self._lock:  # nothing asked while this thread was ending: a later `want` starts another
                    if self._queue.empty():
                        self.worker = None
                        return
                continue
            try:
                self.compile(*key)
            finally:
                with self._lock:
                    self._pending -= 1
                    self._idle.notify_all()

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until every bucket asked for in the background is compiled or given up, its line
        logged. True when nothing is pending (False: `timeout` seconds passed first)."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def compile(self, width: int, layers: tuple[int, ...] = ()) -> bool:
        """Compile and check the bucket, then offer it to new sessions; or keep it eager with one
        logged line. Never raises. True when it is ready."""
        key = (width, tuple(layers))
        base = self.switch.model.base_model
        try:
            scorer = self.compiler(base, width, key[1])
            problem = self.check(scorer, width, key[1])
        except Exception as error:  # noqa: BLE001 - any failure of the compiler means: score eagerly
            problem = _reason(error)
        with self._lock:
            self._wanted.discard(key)
            if problem is None:
                self.ready = {**self.ready, key: scorer}  # a new dict: a session copying it sees it whole
            else:
                self.failed[key] = problem
        if problem is None:
            LOG.info("the target's scoring forward of width %d is compiled and agrees with eager", width)
        else:
            LOG.warning("torch.compile of the target's scoring forward of width %d given up, scoring it eagerly: %s",
                        width, problem)
        return problem is None

    def give_up(self, key: Key, error: BaseException) -> None:
        """A compiled bucket that raised in a run (it passed the check): eager from now on, one logged line."""
        with self._lock:
            if key not in self.ready:
                return
            self.ready = {k: scorer for k, scorer in self.ready.items() if k != key}
            self.failed[key] = _reason(error)
        LOG.warning("the compiled scoring forward of width %d failed in a run, scoring it eagerly from now on: %s",
                    key[0], self.failed[key])

    @torch.inference_mode()
    def check(self, scorer: Callable, width: int, layers: tuple[int, ...]) -> str | None:
        """None when `scorer`, padded to `width`, gives the eager unpadded forward's logits (and
        leaves the cache as long) on a fixed tree within the dtype's tolerance; else what differed.
        Two calls: a CUDA graph is recorded on a later call than the first."""
        from .compiled import CHECK_TOKENS, TOLERANCE, check_ids

        model, switch = self.switch.model, self.switch
        head = model.get_output_embeddings()
        dtype = model.get_input_embeddings().weight.dtype
        device = next(model.parameters()).device
        vocab = model.config.vocab_size
        length = max(1, (width - 2) // 2)  # two drafts sharing their first token: 2 x length nodes, so padded
        blocks = [[1 + 2 * i for i in range(length)], [1] + [2 + 2 * i for i in range(1, length)]]
        trie = DraftTrie.of_blocks(blocks[:1] if width < 4 else blocks)
        layout = ScoringLayout.of(trie, 1, dtype, device)
        ids = check_ids(torch.tensor([[CHECK_TOKENS] + trie.tokens], device=device), vocab)
        positions = (CHECK_TOKENS - 1 + layout.offsets)[None]
        caches = []
        for _ in range(2):
            cache = switch.new_cache()
            model.base_model(input_ids=check_ids(torch.arange(CHECK_TOKENS - 1, device=device)[None], vocab),
                             past_key_values=cache, use_cache=True)
            caches.append(cache)
        past = CHECK_TOKENS - 1
        eager = eager_scorer(model.base_model, layers)
        mask = layout.attention_mask(past, switch.capacity)[None, None]
        expected = head(eager(ids, mask, positions, caches[0])[0]).float()
        tolerance = TOLERANCE.get(dtype, 1e-4)
        allowed = tolerance * max(1.0, expected.abs().max().item())
        for _ in range(2):
            for layer in caches[1].layers:
                layer.cumulative_length.fill_(past)
            got = head(padded_score(scorer, caches[1], ids, positions, layout.recent_mask, past, width)[0]).float()
            if got.shape != expected.shape:
                return f"compiled logits have shape {tuple(got.shape)}, eager {tuple(expected.shape)}"
            error = (got - expected).abs().max().item()
            if not error <= allowed:  # NaN fails too
                return f"compiled logits differ from eager by {error:.3g} (allowed {allowed:.3g} in {dtype})"
            lengths = {int(layer.cumulative_length) for layer in caches[1].layers}
            if lengths != {past + ids.shape[1]}:
                return f"the cache holds {sorted(lengths)} entries after scoring, not {past + ids.shape[1]}"
        for cache in caches:
            switch._give_back(cache)
        return None
