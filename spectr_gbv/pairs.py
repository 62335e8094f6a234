"""The model pairs the app offers: two teaching pairs, the offline default, and curated hub pairs.

A `Pair` bundles a target, a draft and the text <-> token id mapping of that pair. Loaded
pairs are cached and shared read-only between sessions (the engine never mutates a model;
sessions keep their own caches), with at most `MAX_LOADED_HUB_PAIRS` hub pairs in memory.

Hub pairs load only when the Hugging Face Hub is reachable (or already in the local hub
cache); otherwise they fail at once with a clear message instead of transformers' minute
of retries.
"""

from __future__ import annotations

import os
import socket
import threading
from collections import OrderedDict
from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

from .models.base import LanguageModel
from .replays import Recent
from .token_display import spelled_by, token_texts_of
from .toy import TWO_TOKEN_WORDS, WORDS, decode, encode, toy_pair, two_token_pair, unknown_words, words_of

MAX_LOADED_HUB_PAIRS = int(os.environ.get("SPECTR_GBV_MAX_HUB_PAIRS", "1"))


# A pair's kind: what the app decides from it (its line, its GPU time, its caps, whether its times mean anything).
TEACHING = "teaching"  # lookup-table "models": exact distributions, no model run, untimed
OFFLINE = "offline"  # the default target with one of its shipped drafts: no download
HUB = "hub"  # curated pairs from the Hugging Face Hub
CUSTOM = "custom"  # an operator's "TARGET, DRAFT" (hub ids or local folders), loaded like a hub pair


@dataclass(frozen=True)
class PairInfo:
    key: str
    label: str
    target: str | None = None  # hub id (hub pairs only)
    draft: str | None = None
    note: str = ""
    kind: str = HUB
    vocabulary: int | None = None  # the whole vocabulary's size (teaching pairs only)

    @property
    def teaching(self) -> bool:
        return self.kind == TEACHING


@dataclass
class Pair:
    info: PairInfo
    target: LanguageModel
    draft: LanguageModel
    encode: Callable[[str], list[int]]  # prompt text -> prompt ids (chat template for chat models)
    token_text: Callable[[list[int]], list[str]]  # ids -> one display string per id, each token on its own
    words: list[str] | None = None  # the whole vocabulary, for the teaching pairs
    # a run of consecutive ids -> one display string per id, a character split over byte-level tokens drawn
    # whole (spectr_gbv.token_display); None: token_text, as for word pairs
    spell: Callable[[list[int]], list[str]] | None = None

    def spelled(self, ids: list[int]) -> list[str]:
        """Display strings of consecutive tokens (an output), one per token."""
        return (self.spell or self.token_text)(ids)

    def text(self, ids: list[int]) -> str:
        """Readable text of token ids (word pairs are joined with spaces)."""
        return (" " if self.words else "").join(self.spelled(ids))


DEFAULT_KEY, TOY_KEY, TWO_TOKEN_KEY = "default", "toy", "two-token"
LAYERED_KEY = "default-layers"  # the same target with the first default, the layered distilled draft
FIRST_FEATURE_KEY = "default-feature-v1"  # the same target with the first feature draft (final-norm features only)
FIRST_FUSED_KEY = "default-feature-v2"  # the same target with the first fused feature draft (the previous default)
PREVIOUS_DEFAULT_KEYS = (LAYERED_KEY, FIRST_FEATURE_KEY, FIRST_FUSED_KEY)
PAIRS: dict[str, PairInfo] = {
    p.key: p
    for p in [
        PairInfo(DEFAULT_KEY, "SmolLM2-135M-Instruct + feature-conditioned draft (offline default)", kind=OFFLINE,
                 note="Ships with the app: no download. The draft is one layer that reads the target's own "
                      "low, middle and high hidden states (EAGLE-3-style), so a draft step costs a few percent "
                      "of a target step."),
        PairInfo(FIRST_FUSED_KEY, "SmolLM2-135M-Instruct + first fused feature draft (offline, the previous default)",
                 kind=OFFLINE, note="Same target and the same kind of draft as the default, from its first training (less data, "
                      "cross-entropy only), stored in int8."),
        PairInfo(FIRST_FEATURE_KEY, "SmolLM2-135M-Instruct + first feature-conditioned draft (offline, an earlier default)",
                 kind=OFFLINE, note="Same target; the first feature draft reads only the target's last hidden states "
                      "(EAGLE-style), stored in int8."),
        PairInfo(LAYERED_KEY, "SmolLM2-135M-Instruct + layered distilled draft (offline, the first default)", kind=OFFLINE,
                 note="Same target; the draft re-reads the text with 5 of the target's layers and 2 trained ones."),
        PairInfo(TOY_KEY, "Toy world (8 words, exact distributions)", kind=TEACHING, vocabulary=len(WORDS),
                 note="A bigram world whose distributions are small enough to read; prompts use its words."),
        PairInfo(TWO_TOKEN_KEY, "Two-token example (GBV paper: q = (1/3, 2/3), p = (2/3, 1/3))", kind=TEACHING,
                 vocabulary=len(TWO_TOKEN_WORDS), note="Context-free; words A and B. The released SpecTr-GBV rule's bias is largest here."),
        PairInfo("smollm2-360m", "SmolLM2-360M-Instruct + SmolLM2-135M-Instruct (hub)",
                 "HuggingFaceTB/SmolLM2-360M-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"),
        PairInfo("smollm2-1.7b", "SmolLM2-1.7B-Instruct + SmolLM2-135M-Instruct (hub)",
                 "HuggingFaceTB/SmolLM2-1.7B-Instruct", "HuggingFaceTB/SmolLM2-135M-Instruct"),
        PairInfo("qwen2.5-1.5b", "Qwen2.5-1.5B-Instruct + Qwen2.5-0.5B-Instruct (hub)",
                 "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"),
        PairInfo("deepseek-coder-6.7b", "DeepSeek-Coder-6.7B-Instruct + 1.3B-Instruct (hub, the paper's pair; GPU)",
                 "deepseek-ai/deepseek-coder-6.7b-instruct", "deepseek-ai/deepseek-coder-1.3b-instruct"),
    ]
}


def pair_key_of(key_or_label):
    """The key of a pair given by key or label; anything else as given."""
    return {info.label: key for key, info in PAIRS.items()}.get(key_or_label, key_or_label)


def is_teaching(key_or_label) -> bool:
    """Whether a pair given by key or label is a teaching pair (False for anything not in PAIRS)."""
    info = PAIRS.get(pair_key_of(key_or_label))
    return info is not None and info.teaching


def hub_reachable(timeout: float = 2.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes"):
        return False
    try:
        socket.create_connection(("huggingface.co", 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _in_hub_cache(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache

        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except Exception:  # an unusual cache layout is simply "not cached"
        return False


def _chat_pair(info: PairInfo, target, draft, tokenizer) -> Pair:
    from .models.hf import chat_prompt_ids

    return Pair(info, target, draft, lambda text: chat_prompt_ids(tokenizer, text), token_texts_of(tokenizer),
                spell=spelled_by(tokenizer.decode))


# Requests run on several worker threads: one lock makes concurrent first requests for a pair
# wait for a single load instead of each loading its own copy.
_LOAD_LOCK = threading.RLock()


def _default_pair() -> Pair:
    with _LOAD_LOCK:
        return _load_default_pair()


@lru_cache(maxsize=1)
def _load_default_pair() -> Pair:
    from .models.hf import load_pair

    # compile=False: the app compiles its target in the background (models.compiled), never in a request
    return _chat_pair(PAIRS[DEFAULT_KEY], *load_pair("default", compile=False))


_hub_pairs: "OrderedDict[str, Pair]" = OrderedDict()


def _hub_pair(info: PairInfo) -> Pair:
    with _LOAD_LOCK:
        return _locked_hub_pair(info)


def _locked_hub_pair(info: PairInfo) -> Pair:
    if info.key in _hub_pairs:
        _hub_pairs.move_to_end(info.key)
        return _hub_pairs[info.key]
    if not (hub_reachable() or (_in_hub_cache(info.target) and _in_hub_cache(info.draft))):
        raise ValueError(
            f"{info.label} needs the Hugging Face Hub, which is not reachable from this server "
            "(and the models are not in its local cache). Choose the offline default or a teaching pair."
        )
    return _load_hub_pair(info)


def _load_hub_pair(info: PairInfo) -> Pair:
    import gc

    from .models.hf import load_pair

    while len(_hub_pairs) >= MAX_LOADED_HUB_PAIRS:  # drop the least recently used pair first
        _hub_pairs.popitem(last=False)
        gc.collect()
    pair = _chat_pair(info, *load_pair(info.target, info.draft, compile=False))
    _hub_pairs[info.key] = pair
    return pair


def custom_pair_info(text: str) -> PairInfo:
    """"TARGET, DRAFT" (hub ids or local folders) as a pair, for operators who allow any model."""
    parts = [part.strip() for part in text.split(",")]
    if len(parts) != 2 or not all(parts):
        raise ValueError(f"a custom pair is written 'TARGET, DRAFT' (hub ids or local folders), got {text!r}")
    return PairInfo(f"custom:{parts[0]},{parts[1]}", f"{parts[0]} + {parts[1]} (custom)", parts[0], parts[1], kind=CUSTOM)


def get_pair(key: str, allow_custom: bool = False) -> Pair:
    """The pair for a key of PAIRS (or its label); with allow_custom, also "TARGET, DRAFT".

    Anything else is a ValueError naming the choices. Custom pairs are loaded like hub pairs
    (same cache and bound; `trust_remote_code` stays off)."""
    key = pair_key_of(key)
    if allow_custom and isinstance(key, str) and "," in key:
        info = custom_pair_info(key.removeprefix("custom:"))
        with _LOAD_LOCK:
            return _custom_pair(info)
    return _curated_pair(key)


def _custom_pair(info: PairInfo) -> Pair:
    if info.key in _hub_pairs:
        _hub_pairs.move_to_end(info.key)
        return _hub_pairs[info.key]
    for path in (info.target, info.draft):
        if path.startswith(("/", ".", "~")) and not os.path.isdir(os.path.expanduser(path)):
            raise ValueError(f"could not load model {path!r}: no such local folder on this server")
    local = all(os.path.isdir(os.path.expanduser(path)) for path in (info.target, info.draft))
    return _load_hub_pair(info) if local else _locked_hub_pair(info)


# The node laws the teaching pairs' runs have worked out, kept across runs and visitors (`replays.Recent`):
# a class meets the same nodes of the same tables again and again. Keyed by a node's exact values, so one
# memory serves both pairs. 8,192 laws of a few-word vocabulary are a few MiB.
TEACHING_LAWS = Recent(8192)


def _remembering(models):
    target, draft = models
    target.node_laws = TEACHING_LAWS
    return target, draft


def _curated_pair(key: str) -> Pair:
    if key not in PAIRS:
        raise ValueError(f"unknown model pair {key!r}; choose one of: {', '.join(PAIRS)}")
    info = PAIRS[key]
    if key == TOY_KEY:
        return Pair(info, *_remembering(toy_pair()), encode, decode, list(WORDS))
    if key == TWO_TOKEN_KEY:
        def encode_two(text: str) -> list[int]:
            words = words_of(text, TWO_TOKEN_WORDS, case=str.upper)
            unknown = unknown_words(text, words, TWO_TOKEN_WORDS)
            if unknown:
                raise ValueError(f"unknown word(s) {unknown}; the two-token example knows: A B")
            return [TWO_TOKEN_WORDS.index(w) for w in words]

        return Pair(info, *_remembering(two_token_pair()), encode_two, lambda ids: [TWO_TOKEN_WORDS[i] for i in ids], list(TWO_TOKEN_WORDS))
    if key == DEFAULT_KEY:
        return _default_pair()
    if key in PREVIOUS_DEFAULT_KEYS:
        with _LOAD_LOCK:
            return _load_previous_default_pair(key)
    return _hub_pair(info)


@lru_cache(maxsize=None)
def _load_previous_default_pair(key: str) -> Pair:
    """The default target (shared, not loaded twice) with one of its previous drafts."""
    from .models.hf import (DEFAULT_DRAFT, FIRST_FEATURE_DRAFT_ASSETS, FIRST_FUSED_DRAFT_ASSETS, HFModel,
                            feature_draft_model, load_model)

    default = _default_pair()
    feature_folders = {FIRST_FEATURE_KEY: FIRST_FEATURE_DRAFT_ASSETS, FIRST_FUSED_KEY: FIRST_FUSED_DRAFT_ASSETS}
    if key in feature_folders:
        draft = feature_draft_model(default.target.loaded, feature_folders[key])
    else:
        draft = HFModel(load_model(DEFAULT_DRAFT, device=default.target.device, dtype=default.target.model.dtype),
                        default.target.vocab_size)
    return Pair(PAIRS[key], default.target, draft, default.encode, default.token_text, spell=default.spell)
