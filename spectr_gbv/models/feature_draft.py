"""A feature-conditioned draft (the EAGLE family: Li et al. 2024) behind the engine's interface.

The draft reads the target's own last hidden state ("feature": the output of the target's
final norm, the vector its output head reads) instead of re-encoding the text:

    entry t:   x_t = fc([norm_f(f_t); norm_e(E[token_{t+1}])])      f_t: feature at position t
               h_t = one decoder layer over entries <= t (its own KV cache, RoPE at position t)
               g_t = norm(h_t)                                    the predicted feature f_{t+1}
               p(token_{t+2} | ...) = softmax(g_t @ W_head[restricted].T)

E is the target's (tied) embedding and W_head its output head restricted to the draft's
token list (FR-Spec-style; zero probability elsewhere). For the first draft position the
feature is the target's own (the engine hands the draft the features of the committed
positions from the scoring forward it already runs); deeper positions feed back g, the
draft's prediction of the next feature. The training (`spectr_gbv.training.feature_distill`) unrolls
exactly this feedback ("training-time test", EAGLE-3), so each depth sees what inference
feeds it.

Exactness does not depend on any of this: the engine samples the K drafts from exactly
the distributions it hands the verifier, whatever features produced them.

The cache is preallocated (`branch_cache.BranchKVCache`, [K, KV, capacity, D], doubled when
outgrown): the committed entries (true features) fill its first positions in every row, and
each branch's drafted entries follow in its own row, written at their position; attention
reads each row's prefix as a view, so a drafting step copies nothing that grows with the
context. Drafted entries are dropped at commit, because they were built from predicted
features: only the committed length counts, and the next iteration writes the entries of the
newly committed positions over them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F

from ..probs import restricted_head_logits
from .branch_cache import BranchKVCache

WEIGHTS_FILE = "feature_draft.safetensors"
META_FILE = "feature_draft.json"


@dataclass(frozen=True)
class FeatureDraftShape:
    hidden_size: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int
    rope_theta: float
    rms_norm_eps: float
    # The target layers whose outputs the head fuses (EAGLE-3: low, middle, high); empty: it
    # reads the target's final-norm output, as the first feature drafts did.
    feature_layers: tuple[int, ...] = ()

    @classmethod
    def of_target(cls, config, feature_layers=()) -> "FeatureDraftShape":
        last = getattr(config, "num_hidden_layers", 0) - 1
        if feature_layers and any(not 0 <= i < last for i in feature_layers):
            # transformers hands out the last layer's output after the final norm: not what was trained on
            raise ValueError(f"feature layers {tuple(feature_layers)} must lie in 0..{last - 1} of the target's "
                             f"{config.num_hidden_layers} layers")
        rope = (getattr(config, "rope_parameters", None) or {}).get("rope_theta", getattr(config, "rope_theta", 10000.0))
        return cls(config.hidden_size, config.num_attention_heads, config.num_key_value_heads,
                   getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads,
                   config.intermediate_size, float(rope), float(config.rms_norm_eps), tuple(feature_layers))


def target_features(outputs, feature_layers: Sequence[int]) -> torch.Tensor:
    """The features a draft reads from a transformers forward's `outputs` [rows, n, F]: the fused
    layers' outputs side by side (`hidden_states[i + 1]` is the output of layer i; the forward
    must ask for `output_hidden_states`), or with no layers the final norm's output."""
    if not feature_layers:
        return outputs.last_hidden_state
    return torch.cat([outputs.hidden_states[i + 1] for i in feature_layers], dim=-1)


def tokenizer_fingerprint(tokenizer) -> str:
    """A short hash of the vocabulary (token -> id) and the special tokens: equal iff the drafts' ids mean the same."""
    vocab = sorted(tokenizer.get_vocab().items())
    special = [tokenizer.eos_token_id, tokenizer.bos_token_id]
    return hashlib.sha256(json.dumps([vocab, special]).encode()).hexdigest()[:16]


class RMSNorm(torch.nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


def _rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


class FeatureDraftHead(torch.nn.Module):
    """The trained part: fc, one Llama-style decoder layer and a final norm (the head and the
    embedding are the target's, passed in, never copied into the draft's file)."""

    def __init__(self, shape: FeatureDraftShape):
        super().__init__()
        self.shape = shape
        h, a, kv, d, m = shape.hidden_size, shape.num_heads, shape.num_kv_heads, shape.head_dim, shape.intermediate_size
        if shape.feature_layers:  # EAGLE-3: each layer's output normed, then fused into one feature
            self.norm_layers = torch.nn.ModuleList(RMSNorm(h, shape.rms_norm_eps) for _ in shape.feature_layers)
            self.fuse = torch.nn.Linear(len(shape.feature_layers) * h, h, bias=False)
        self.norm_feature = RMSNorm(h, shape.rms_norm_eps)
        self.norm_embedding = RMSNorm(h, shape.rms_norm_eps)
        self.fc = torch.nn.Linear(2 * h, h, bias=False)
        self.input_norm = RMSNorm(h, shape.rms_norm_eps)
        self.q_proj = torch.nn.Linear(h, a * d, bias=False)
        self.k_proj = torch.nn.Linear(h, kv * d, bias=False)
        self.v_proj = torch.nn.Linear(h, kv * d, bias=False)
        self.o_proj = torch.nn.Linear(a * d, h, bias=False)
        self.post_attention_norm = RMSNorm(h, shape.rms_norm_eps)
        self.gate_proj = torch.nn.Linear(h, m, bias=False)
        self.up_proj = torch.nn.Linear(h, m, bias=False)
        self.down_proj = torch.nn.Linear(m, h, bias=False)
        self.norm = RMSNorm(h, shape.rms_norm_eps)
        # Not a buffer: `.to(bfloat16)` must not round the rotary frequencies (angles at position
        # 500 would be off by radians); it follows the module's device in `rope`.
        self.inv_freq = (1.0 / (shape.rope_theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d))).float()

    def init_from_target_layer(self, layer, final_norm) -> None:
        """Start the decoder layer as a copy of a target layer (a trained block is a better start than noise)."""
        pairs = [(self.q_proj, layer.self_attn.q_proj), (self.k_proj, layer.self_attn.k_proj),
                 (self.v_proj, layer.self_attn.v_proj), (self.o_proj, layer.self_attn.o_proj),
                 (self.gate_proj, layer.mlp.gate_proj), (self.up_proj, layer.mlp.up_proj),
                 (self.down_proj, layer.mlp.down_proj), (self.input_norm, layer.input_layernorm),
                 (self.post_attention_norm, layer.post_attention_layernorm), (self.norm, final_norm)]
        with torch.no_grad():
            for mine, theirs in pairs:
                mine.weight.copy_(theirs.weight)

    # -- the pieces of one entry
    def rope(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        if self.inv_freq.device != positions.device:
            self.inv_freq = self.inv_freq.to(positions.device)
        freqs = positions.float()[:, None] * self.inv_freq[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def fused(self, features: torch.Tensor) -> torch.Tensor:
        """The target's features [..., F * H] (F fused layers) -> [..., H]; a predicted feature g is already [..., H]."""
        h = self.shape.hidden_size
        if not self.shape.feature_layers or features.shape[-1] == h:
            return features
        parts = features.split(h, dim=-1)
        return self.fuse(torch.cat([norm(part) for norm, part in zip(self.norm_layers, parts)], dim=-1))

    def entry_inputs(self, features: torch.Tensor, embeddings: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.cat([self.norm_feature(self.fused(features)), self.norm_embedding(embeddings)], dim=-1))

    def qkv(self, x: torch.Tensor, positions: torch.Tensor):
        """x [B, S, H] -> q [B, A, S, D], k, v [B, KV, S, D] with RoPE at `positions` [S]."""
        b, s, _ = x.shape
        d = self.shape.head_dim
        y = self.input_norm(x)
        q = self.q_proj(y).view(b, s, -1, d).transpose(1, 2)
        k = self.k_proj(y).view(b, s, -1, d).transpose(1, 2)
        v = self.v_proj(y).view(b, s, -1, d).transpose(1, 2)
        cos, sin = self.rope(positions, x.dtype)
        q = q * cos + _rotate_half(q) * sin
        k = k * cos + _rotate_half(k) * sin
        return q, k, v

    def finish(self, x: torch.Tensor, attended: torch.Tensor) -> torch.Tensor:
        """Attention output [B, A, S, D] -> the predicted feature g [B, S, H]."""
        b, _, s, _ = attended.shape
        h = x + self.o_proj(attended.transpose(1, 2).reshape(b, s, -1))
        y = self.post_attention_norm(h)
        h = h + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))
        return self.norm(h)

    @staticmethod
    def attend(q, k, v, mask: torch.Tensor | None) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)

    # -- training: the feedback unrolled to `depth` levels in parallel over a sequence
    def unrolled(self, features: torch.Tensor, embeddings: torch.Tensor, depth: int, start: int = 0) -> list[torch.Tensor]:
        """features [S, H] (f_0..f_{S-1}), embeddings [S, H] (E[token_1..token_S]) -> for each depth
        d = 1..depth, g^(d) [S - start, H]: at index s - start, depth d's output for the entry at
        position s, whose input is the target's feature at d = 1 and g^(d-1) at s - 1 otherwise.

        The entry of depth d at s attends to the true entries at positions <= s - d + 1 and to
        the entries of depths j = 2..d at positions s - d + j: the draft's KV cache at inference
        when it drafts position d from a committed context ending at s - d + 1. Positions before
        `start` are context only: their true entries' keys and values are computed, nothing else
        (a training caller reads outputs from `start + depth - 1` on)."""
        length = features.shape[0]
        positions = torch.arange(length, device=features.device)
        rows = positions[start:]
        x = self.entry_inputs(features, embeddings)[None]
        q, k, v = self.qkv(x, positions)
        keys, values, outputs = [k], [v], []
        q, x = q[:, :, start:], x[:, start:]
        embeddings = embeddings[start:]
        for d in range(1, depth + 1):
            if d > 1:
                x = self.entry_inputs(inputs, embeddings)[None]
                q, k, v = self.qkv(x, rows)
                keys.append(k)
                values.append(v)
            query = rows[:, None]
            blocks = [positions[None, :] <= query - d + 1]  # true entries
            blocks += [rows[None, :] == query - d + j for j in range(2, d + 1)]
            mask = torch.cat(blocks, dim=1)
            mask[:, 0] |= ~mask.any(dim=1)  # rows with no valid key (s < d - 1) are ignored by the loss
            g = self.finish(x, self.attend(q, torch.cat(keys, 2), torch.cat(values, 2), mask))[0]
            outputs.append(g)
            inputs = torch.cat([torch.zeros_like(g[:1]), g[:-1]], dim=0)
        return outputs


def save_feature_draft(head: FeatureDraftHead, out: Path, meta: dict, dtype: torch.dtype = torch.float16,
                       int8: bool = False) -> None:
    """The head's weights in `dtype` (or int8 rows, `weight_store`) and its run record."""
    from . import weight_store

    out.mkdir(parents=True, exist_ok=True)
    weight_store.save(head.state_dict(), out / WEIGHTS_FILE, int8=int8, dtype=dtype)
    (out / META_FILE).write_text(json.dumps(meta, indent=2))


def rebuild_hint(folder: Path) -> str:
    return f"rebuild it with: python -m spectr_gbv.training.feature_distill --out {folder}"


def load_feature_draft_head(folder: Path, target_config, target_tokenizer, target_name: str) -> tuple[FeatureDraftHead, dict]:
    """The head stored in `folder`, checked against the target it will read features from.

    A missing or truncated file, or a head whose hidden size, vocabulary or tokenizer does
    not match the target, is a ValueError naming both and how to rebuild; nothing is left
    initialised at random."""
    from safetensors import SafetensorError
    from . import weight_store

    folder = Path(folder)
    weights, meta_path = folder / WEIGHTS_FILE, folder / META_FILE
    if not weights.is_file() or not meta_path.is_file():
        raise ValueError(f"the feature-conditioned draft is missing ({weights} or {meta_path}); {rebuild_hint(folder)}")
    try:
        meta = json.loads(meta_path.read_text())
        tensors = weight_store.load(weights)
    except (SafetensorError, OSError, ValueError) as error:
        raise ValueError(f"the feature-conditioned draft {weights} is unreadable or truncated ({error}); "
                         f"{rebuild_hint(folder)}") from error
    shape = FeatureDraftShape.of_target(target_config, meta.get("feature_layers", ()))
    checks = [("hidden size", meta.get("hidden_size"), shape.hidden_size),
              ("vocabulary size", meta.get("vocab_size"), len(target_tokenizer)),
              ("tokenizer", meta.get("tokenizer"), tokenizer_fingerprint(target_tokenizer))]
    for what, draft_value, target_value in checks:
        if draft_value != target_value:
            raise ValueError(f"the feature-conditioned draft in {folder} does not fit target {target_name!r}: "
                             f"{what} {draft_value!r} (draft) vs {target_value!r} (target)")
    head = FeatureDraftHead(shape)
    expected = set(head.state_dict())
    if set(tensors) != expected:
        missing, extra = sorted(expected - set(tensors)), sorted(set(tensors) - expected)
        raise ValueError(f"the feature-conditioned draft {weights} has the wrong tensors (missing {missing[:4]}, "
                         f"unexpected {extra[:4]}); {rebuild_hint(folder)}")
    try:
        head.load_state_dict({k: v.float() for k, v in tensors.items()})
    except RuntimeError as error:  # a tensor of the wrong shape
        raise ValueError(f"the feature-conditioned draft {weights} does not fit target {target_name!r}: "
                         f"{str(error).splitlines()[0]}") from error
    return head.eval(), meta


# ---------------------------------------------------------------------------- engine adapter


class FeatureDraftModel:
    """The head as the engine's `LanguageModel`; its sessions need the target's features
    (`needs_features`, of the layers `feature_layers`): the engine hands them over after every commit."""

    needs_features = True

    def __init__(self, head: FeatureDraftHead, embedding: torch.Tensor, output_weight: torch.Tensor,
                 output_token_ids: Sequence[int], vocab_size: int, eos_token_id: int | None, name: str,
                 max_positions: int | None = None, dtype: torch.dtype | None = None):
        """`dtype`: what the head computes in (default: the embedding's). The embedding stays the
        target's, shared: its looked-up rows and the target's features are cast to `dtype`."""
        self.head = head
        self.device = embedding.device
        dtype = dtype or embedding.dtype
        self.dtype = dtype
        self.head.to(self.device, dtype)
        self.embedding = embedding  # the target's, shared
        self.output_token_ids = torch.tensor(list(output_token_ids), dtype=torch.long, device=self.device)
        self.output_head = output_weight[self.output_token_ids].detach().to(dtype).contiguous()
        self.vocab_size = vocab_size
        self.eos_token_id = eos_token_id
        self.name = name
        self.max_positions = max_positions
        self.feature_layers = head.shape.feature_layers
        self.kernel = str(dtype).removeprefix("torch.")  # "float32", "bfloat16" or, after use_fp16_weights, "fp16-weights"

    def use_fp16_weights(self) -> "FeatureDraftModel":
        """Run the head's matrices and the restricted output head as fbgemm fp16-weight Linears
        (fp32 products). A draft step is memory-bound: this halves the bytes it reads, as the
        fp16-weight target does. The draft is not the target, so this changes only its proposals."""
        from .cpu_kernel import fp16_weight_linears
        from .fused_linear import fuse_sibling_linears

        projection = torch.nn.Linear(self.output_head.shape[1], self.output_head.shape[0], bias=False)
        projection.weight.data = self.output_head.float()
        fuse_sibling_linears(self.head)  # q/k/v and gate/up as one GEMM each: the same products
        self.head = fp16_weight_linears(self.head)
        self.output_head = fp16_weight_linears(torch.nn.Sequential(projection))
        self.kernel = "fp16-weights"
        return self

    def use_packed_weights(self) -> "FeatureDraftModel":
        """Run the head's matrices and the restricted output head as oneDNN pre-packed Linears in
        the draft's dtype (bf16 beside a bf16 target): the same products as unpacked, without
        re-packing the weights at every step."""
        from .cpu_kernel import packed_linears

        projection = torch.nn.Linear(self.output_head.shape[1], self.output_head.shape[0], bias=False,
                                     dtype=self.output_head.dtype)
        projection.weight.data = self.output_head
        self.head = packed_linears(self.head)
        self.output_head = packed_linears(torch.nn.Sequential(projection))
        self.kernel += " (packed)"
        return self

    def logits(self, g: torch.Tensor) -> torch.Tensor:
        """Predicted features [..., H] -> logits over the full vocabulary (restricted head)."""
        return restricted_head_logits(g, self.output_head, self.output_token_ids, self.vocab_size)

    def start(self, prompt_ids: Sequence[int]) -> "FeatureDraftSession":
        return FeatureDraftSession(self, list(prompt_ids))


class FeatureDraftSession:
    def __init__(self, model: FeatureDraftModel, prompt_ids: list[int]):
        self.model = model
        self.tokens = list(prompt_ids)  # committed tokens
        self.features: list[torch.Tensor] = []  # target features of committed positions, in order, not yet entries
        self.feature_count = 0  # features received so far (positions 0 .. feature_count - 1)
        self.entries = 0  # committed entries in the cache (positions 0 .. entries - 1)
        self.kv = BranchKVCache()  # the committed entries, then this iteration's drafted ones per branch
        self.last_feature: torch.Tensor | None = None  # [K, H]: the predicted feature after the newest entry
        self.forward_calls = 0

    def add_features(self, features: torch.Tensor) -> None:
        """The target's features of the next committed positions (from its scoring forward)."""
        if features.shape[0]:
            self.features.append(features.to(self.model.device, self.model.dtype))
            self.feature_count += features.shape[0]

    @torch.inference_mode()
    def branch_logits(self, num_branches: int) -> torch.Tensor:
        model, head = self.model, self.model.head
        first, last = self.entries, len(self.tokens) - 2  # the entries that are now buildable
        if self.feature_count < len(self.tokens) - 1:
            raise RuntimeError(
                f"the feature-conditioned draft needs the target's features of positions 0..{len(self.tokens) - 2}, "
                f"has {self.feature_count}: the engine must hand them over (add_features) after each commit")
        if last < first:
            raise RuntimeError("the feature-conditioned draft needs at least two tokens of context")
        features = torch.cat(self.features, dim=0) if len(self.features) > 1 else self.features[0]
        self.features = [features]
        offset = self.feature_count - features.shape[0]  # position of features[0]
        new = features[first - offset : last + 1 - offset]
        tokens = torch.tensor(self.tokens[first + 1 : last + 2], device=model.device)
        x = head.entry_inputs(new, model.embedding[tokens].to(model.dtype))[None]
        positions = torch.arange(first, last + 1, device=model.device)
        q, k, v = head.qkv(x, positions)
        self.kv.append_committed(k, v)  # over the last iteration's drafted entries: they are dropped
        self.kv.reserve_rows(num_branches)
        # A single layer: an entry's keys and values depend on its input only, so the earlier
        # new entries need no attention; only the newest one's output is read.
        g = head.finish(x[:, -1:], head.attend(q[:, :, -1:], *self.kv.view(1), None))[0]
        self.entries = last + 1
        self.features = [features[last + 1 - offset :]]
        self.forward_calls += 1
        self.last_feature = g.expand(num_branches, -1)
        return self.model.logits(g).expand(num_branches, -1)

    @torch.inference_mode()
    def extend_branches(self, tokens: torch.Tensor) -> torch.Tensor:
        model, head = self.model, self.model.head
        rows = tokens.shape[0]
        x = head.entry_inputs(self.last_feature[:, None], model.embedding[tokens.to(model.device)][:, None].to(model.dtype))
        q, k, v = head.qkv(x, torch.tensor([self.kv.length], device=model.device))
        self.kv.append_branch(k, v)
        # each row attends to the committed entries and its own drafted ones: views of the cache, no copy
        g = head.finish(x, head.attend(q, *self.kv.view(rows), None))[:, 0]
        self.last_feature = g
        self.forward_calls += 1
        return self.model.logits(g)

    def score(self, blocks: torch.Tensor, rows: list[list[int]] | None = None) -> torch.Tensor:
        raise NotImplementedError("a feature-conditioned draft only drafts; the target scores")

    def commit(self, branch: int, tokens: Sequence[int], drafted: Sequence[int] | None = None) -> None:
        # Drafted entries were built from predicted features: dropped. The target's features
        # of the committed positions arrive through add_features.
        self.tokens += list(tokens)
        self.kv.drop_branches()
        self.last_feature = None
