"""The default target in its file's own format: Q4_1 blocks as 4-bit weights (the `int4` CPU kernel).

The default file (`default_file`) stores every projection of the 30 transformer blocks as Q4_1:
groups of 32 weights along the input dimension, each group with an fp16 scale d and an fp16
minimum m, and a 4-bit q in 0..15 per weight, so w = d * q + m. The other kernels dequantise
that to fp32 (and may round it to bf16 or fp16); a one-token step then reads about 270 MB of bf16
weights where the file holds under 100 MB.

Here the blocks stay 4-bit. torch's own CPU weight-only kernel, `aten._weight_int4pack_mm_for_cpu`
(packed by `aten._convert_weight_to_int4pack_for_cpu`; the kernel torchao and gpt-fast use for
int4 weight-only on the CPU), computes per group w = (q - 8) * scale + zero from
`scales_and_zeros` of shape [K / group, N, 2], with fp32 accumulation. Q4_1 maps onto it exactly:
scale = d and zero = m + 8 d give (q - 8) d + m + 8 d = d q + m. No weight is re-quantised.

The one rounding: the kernel is vectorised (AVX2, AVX-512) only for bf16 activations, scales and
zeros (fp32 and fp16 take a scalar loop, a hundred times slower here), so d and m + 8 d are
rounded to bf16, as the bf16 kernel rounds every dequantised weight to bf16. The weight the kernel
multiplies by is then (q - 8) bf16(d) + bf16(m + 8 d), within (|q - 8| |d| + |m + 8 d|) 2^-8 of
the file's d q + m (bf16 keeps 8 significant bits) (`max_weight_error` measures it; tests/test_int4_linear.py reports it on the
default file). The rest of the model is the bf16 kernel's: bf16 activations, norms and
embedding, and the Q8_0 output head (tied to the embedding) dequantised and rounded to bf16, in
oneDNN's pre-packed form where the CPU has native bf16. The head stays bf16 because Q8_0 has one
scale per 32 weights and `aten._weight_int8pack_mm` only one per output row: it cannot hold Q8_0
as it is, and re-quantising it is not done here.

As with every kernel, AR and every method decode with this one converted model, so exactness is
with respect to it. Siblings that read one input (q/k/v, gate/up) are one int4 product each, as
`fused_linear` does for fp16 weights (`FusedGroup`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

GROUP = 32  # Q4_1's block: 32 weights along the input dimension share d and m
Q4_1_BLOCK_BYTES = 20  # fp16 d, fp16 m, 16 bytes of packed 4-bit values
SCALE_DTYPE = torch.bfloat16  # the dtype the kernel's vectorised loop reads scales and zeros in
# (GGUF name, the transformers Llama module) of each projection of a block
PROJECTIONS = {"attn_q": ("self_attn", "q_proj"), "attn_k": ("self_attn", "k_proj"), "attn_v": ("self_attn", "v_proj"),
               "attn_output": ("self_attn", "o_proj"), "ffn_gate": ("mlp", "gate_proj"), "ffn_up": ("mlp", "up_proj"),
               "ffn_down": ("mlp", "down_proj")}


def available() -> bool:
    """Whether this torch has the CPU int4 weight-only kernel."""
    return hasattr(torch.ops.aten, "_weight_int4pack_mm_for_cpu") and hasattr(torch.ops.aten,
                                                                              "_convert_weight_to_int4pack_for_cpu")


@dataclass
class Q4_1:
    """One Q4_1 matrix [N, K] as the file holds it: q (uint8, 0..15) [N, K], d and m (fp16) [N, K / 32]."""

    q: torch.Tensor
    d: torch.Tensor
    m: torch.Tensor

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.q.shape)

    @classmethod
    def from_blocks(cls, raw: np.ndarray, in_features: int) -> "Q4_1":
        """From the raw bytes of a GGUF Q4_1 tensor, [N, K / 32 * 20] uint8 (ggml's block_q4_1:
        d, m, then 16 bytes whose low nibbles are weights 0..15 of the group and high nibbles 16..31)."""
        rows = raw.shape[0]
        blocks = np.ascontiguousarray(raw).reshape(rows, in_features // GROUP, Q4_1_BLOCK_BYTES)
        d = torch.from_numpy(blocks[..., 0:2].copy().view(np.float16)[..., 0])
        m = torch.from_numpy(blocks[..., 2:4].copy().view(np.float16)[..., 0])
        packed = torch.from_numpy(blocks[..., 4:].copy())  # [N, K / 32, 16]
        q = torch.cat([packed & 0x0F, packed >> 4], dim=-1).reshape(rows, in_features)
        return cls(q, d, m)

    def rows(self, order: torch.Tensor) -> "Q4_1":
        """The same matrix with its rows (output features) in `order`."""
        return Q4_1(self.q[order], self.d[order], self.m[order])

    @staticmethod
    def stacked(parts: list["Q4_1"]) -> "Q4_1":
        """The matrices' rows one after another: the weight of their outputs side by side."""
        return Q4_1(*(torch.cat([getattr(p, f) for p in parts]) for f in ("q", "d", "m")))

    def dequantised(self) -> torch.Tensor:
        """The file's exact values in fp32, d * q + m, computed as gguf's dequantiser does (so equal,
        bit for bit, to the weights transformers loads from the file)."""
        n, k = self.shape
        values = self.d.float()[..., None] * self.q.reshape(n, k // GROUP, GROUP).float() + self.m.float()[..., None]
        return values.reshape(n, k)

    def scales_and_zeros(self) -> torch.Tensor:
        """[K / 32, N, 2]: scale = d and zero = m + 8 d per group (the kernel's w = (q - 8) scale + zero),
        computed in fp32 from the fp16 values and rounded once to bf16 (SCALE_DTYPE)."""
        d, m = self.d.float(), self.m.float()
        return torch.stack([d, m + 8 * d], dim=-1).transpose(0, 1).contiguous().to(SCALE_DTYPE)

    def kernel_weight(self) -> torch.Tensor:
        """The weight the int4 kernel multiplies by, in fp32: (q - 8) bf16(d) + bf16(m + 8 d)."""
        n, k = self.shape
        sz = self.scales_and_zeros().float().transpose(0, 1)  # [N, K / 32, 2]
        q = self.q.reshape(n, k // GROUP, GROUP).float() - 8
        return (q * sz[..., 0:1] + sz[..., 1:2]).reshape(n, k)


def max_weight_error(matrix: Q4_1) -> float:
    """Largest |kernel weight - file weight| over the matrix: what rounding d and m + 8 d to bf16 costs."""
    return (matrix.kernel_weight() - matrix.dequantised()).abs().max().item()


class Int4Linear(torch.nn.Module):
    """A bias-free Linear whose weight is a Q4_1 matrix kept in 4 bits, packed once for
    `aten._weight_int4pack_mm_for_cpu`; bf16 in, bf16 out (fp32 accumulation), any number of rows.
    The packed layout is the one of the CPU capability torch runs with (AVX-512 and AVX2 differ), so
    it is made at load and never stored."""

    def __init__(self, matrix: Q4_1):
        super().__init__()
        self.out_features, self.in_features = matrix.shape
        # not parameters or buffers: Module.to() must not cast the packed bytes or the bf16 scales
        self.packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(matrix.q.to(torch.int32).contiguous(), 1)
        self.scales_and_zeros = matrix.scales_and_zeros()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(-1, self.in_features)
        if rows.dtype != SCALE_DTYPE:
            rows = rows.to(SCALE_DTYPE)
        out = torch.ops.aten._weight_int4pack_mm_for_cpu(rows.contiguous(), self.packed, GROUP, self.scales_and_zeros)
        return out.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, Q4_1 in 4 bits "
                f"(group {GROUP}, bf16 scale and zero)")


# ---------------------------------------------------------------------------------- the file


def read_q4_1(gguf_path: Path, config) -> dict[tuple[int, str], Q4_1]:
    """Every Q4_1 projection of the file, by (layer, GGUF name), with q and k in transformers' row
    order: llama.cpp's converter interleaves the rotary halves of each head's rows, and transformers
    undoes it on load (`LlamaTensorProcessor`); the same permutation of whole rows applies here
    (a row's groups run along the input dimension, so they move with it)."""
    from gguf import GGMLQuantizationType, GGUFReader

    reader = GGUFReader(str(gguf_path))
    heads = {"attn_q": config.num_attention_heads, "attn_k": config.num_key_value_heads}
    found = {}
    for tensor in reader.tensors:
        parts = tensor.name.split(".")  # blk.<i>.<name>.weight
        if len(parts) != 4 or parts[0] != "blk" or parts[2] not in PROJECTIONS:
            continue
        if tensor.tensor_type != GGMLQuantizationType.Q4_1:
            raise ValueError(f"{tensor.name} in {gguf_path} is {tensor.tensor_type.name}, not Q4_1: the int4 kernel "
                             "takes a Q4_1 file only")
        in_features = int(tensor.shape[0])  # ggml's order: the row length first
        matrix = Q4_1.from_blocks(tensor.data, in_features)
        if parts[2] in heads:
            matrix = matrix.rows(_unpermute_rows(matrix.shape[0], heads[parts[2]]))
        found[(int(parts[1]), parts[2])] = matrix
    return found


def _unpermute_rows(rows: int, heads: int) -> torch.Tensor:
    """The row order transformers' GGUF loader gives q (or k) with `heads` heads: row j of the loaded
    matrix is row order[j] of the file's."""
    half = rows // heads // 2
    return torch.arange(rows).reshape(heads, half, 2).transpose(1, 2).reshape(rows)


def int4_linears(model: torch.nn.Module, gguf_path: Path) -> torch.nn.Module:
    """`model` (the fp32 Llama transformers loaded from `gguf_path`) with every Q4_1 projection kept
    in 4 bits (`Int4Linear`; q/k/v and gate/up fused as `fused_linear` does), the rest in bf16 and
    the output head packed for oneDNN where the CPU has native bf16 (the bf16 kernel's). Refused,
    naming the first difference, unless every replaced weight equals the file's dequantised values
    bit for bit: the model must be the one in the file."""
    from .cpu_kernel import packed_linears
    from .fused_linear import SIBLINGS, FusedGroup, FusedMember

    if not available():
        raise ValueError(f"torch {torch.__version__} has no CPU int4 kernel (aten._weight_int4pack_mm_for_cpu)")
    matrices = read_q4_1(gguf_path, model.config)
    layers = model.model.layers
    if {layer for layer, _ in matrices} != set(range(len(layers))):
        raise ValueError(f"{gguf_path} holds Q4_1 blocks for {len({l for l, _ in matrices})} layers, the model has "
                         f"{len(layers)}: not the model of this file")
    by_module = {names: gguf for gguf, names in PROJECTIONS.items()}
    for index, layer in enumerate(layers):
        for (parent_name, name), gguf_name in by_module.items():
            linear = getattr(getattr(layer, parent_name), name)
            matrix = matrices[(index, gguf_name)]
            if linear.bias is not None or not torch.equal(linear.weight.detach().float(), matrix.dequantised()):
                raise ValueError(f"layer {index} {name} is not blk.{index}.{gguf_name} of {gguf_path} as the file "
                                 "holds it: the int4 kernel takes the default target as loaded from its file")
        for parent_name in ("self_attn", "mlp"):
            parent = getattr(layer, parent_name)
            for group_names in SIBLINGS:
                if not all(isinstance(getattr(parent, n, None), torch.nn.Linear) for n in group_names):
                    continue
                linears = [getattr(parent, n) for n in group_names]
                product = Int4Linear(Q4_1.stacked([matrices[(index, by_module[(parent_name, n)])] for n in group_names]))
                group = FusedGroup(linears, product=product)
                for position, n in enumerate(group_names):
                    setattr(parent, n, FusedMember(group, position, linears[position].in_features))
            for n in ("o_proj", "down_proj"):
                if isinstance(getattr(parent, n, None), torch.nn.Linear):
                    setattr(parent, n, Int4Linear(matrices[(index, by_module[(parent_name, n)])]))
    model = model.to(torch.bfloat16)
    if torch.ops.mkldnn._is_mkldnn_bf16_supported():
        packed_linears(model, keep_dense=(model.get_output_embeddings(),))  # the head: the only Linear left
    return model
