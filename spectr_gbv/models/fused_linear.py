"""Sibling fp16-weight Linears that read the same input, computed as one GEMM.

A Llama-family layer projects its input three times for attention (`q_proj`, `k_proj`,
`v_proj`) and twice for the MLP (`gate_proj`, `up_proj`). With fbgemm's fp16-weight kernel
each projection is one call, seven a layer with `o_proj` and `down_proj`, and each an opaque
op that a compiled graph calls as it is (a kernel launch, on a GPU's terms). Packing the
siblings' weights side by side makes them one call of the same kernel whose output is their
outputs side by side, bit for bit (fbgemm computes every output column over the same reduction;
`tests/test_fused_linear.py` checks it on the default target's shapes). What reads a slice may
round differently: on an AMX Xeon torch's SiLU takes another loop for a strided slice and differs
in the last bit, so there the fused feature draft's logits equal the unfused ones to float32
rounding only (the fused model is the one AR and every method use alike). Five calls a layer
become two: the compiled one-token step of the default target makes 332 op calls where it made
480 (`assets/results/cpu_avx2/fp16-weights/ops_compiled.md`), and a scoring forward of several
positions reads its input once for five products.

transformers' modeling code is kept as it is: the siblings stay modules under their own names,
and the first one called with an input computes the fused product for all of them and hands each
its slice (`FusedGroup.part`). A sibling called with another input recomputes, so the order of
the calls does not matter, only that they are made; once every sibling has taken its slice the
group lets go of the tensors, so nothing outlives the layer's forward (and under torch.compile
nothing becomes an extra graph output).
"""

from __future__ import annotations

import torch

from .cpu_kernel import Fp16WeightLinear

# The sibling projections a Llama-family layer (Llama, Mistral, Qwen2, SmolLM, ...) makes of one input.
SIBLINGS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


class FusedGroup:
    """The packed weights of sibling Linears, and the last input's product while its slices are taken.

    `product` computes the siblings' outputs side by side; by default their fp16-weight GEMM (the
    `int4` kernel hands in its own, `int4_linear.Int4Linear` of the stacked Q4_1 blocks).

    One model serves several visitors' threads at once, so the last product is one record,
    `(input, slices, taken)`, read once and replaced whole: a thread never pairs its input with
    another thread's slices, and two threads in one layer at once cost a recomputation, never a
    wrong slice (the record holds its input, so no other tensor can take that input's identity).
    After such a collision a record may stay until the group's next product (one per group)."""

    def __init__(self, linears: list[torch.nn.Linear], product: torch.nn.Module | None = None):
        self.sizes = [linear.out_features for linear in linears]
        self.product = Fp16WeightLinear.side_by_side(linears) if product is None else product
        self.done = (1 << len(linears)) - 1
        self.last: tuple[torch.Tensor, tuple[torch.Tensor, ...], int] | None = None
        # What torch.compile traces reads and writes its own record: a compiled graph guards on the
        # record being empty, and an eager forward in another thread (a prefill, a wide scoring
        # forward) leaves `last` set mid-layer, which would fail the guard and recompile.
        self.traced_last: tuple[torch.Tensor, tuple[torch.Tensor, ...], int] | None = None

    def part(self, x: torch.Tensor, index: int) -> torch.Tensor:
        tracing = torch.compiler.is_compiling()
        last = self.traced_last if tracing else self.last
        if last is None or last[0] is not x:
            slices, taken = self.product(x).split(self.sizes, dim=-1), 0
        else:
            _, slices, taken = last
        taken |= 1 << index
        record = None if taken == self.done else (x, slices, taken)  # all slices taken: hold nothing past the layer
        if tracing:
            self.traced_last = record
        else:
            self.last = record
        return slices[index]


class FusedMember(torch.nn.Module):
    """One sibling of a `FusedGroup`, in its Linear's place: its slice of the group's product."""

    def __init__(self, group: FusedGroup, index: int, in_features: int):
        super().__init__()
        self.group, self.index = group, index
        self.in_features, self.out_features = in_features, group.sizes[index]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.group.part(x, self.index)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, slice {self.index} of one "
                f"{type(self.group.product).__name__} of {self.group.product.out_features}")


def fuse_sibling_linears(model: torch.nn.Module) -> int:
    """Fuse, in place, every group of `SIBLINGS` that are all plain fp32-or-lower Linears of one
    input size into one fp16-weight GEMM (before `fp16_weight_linears` swaps the other Linears);
    returns how many groups were fused."""
    fused = 0
    for module in list(model.modules()):
        for names in SIBLINGS:
            linears = [getattr(module, name, None) for name in names]
            if not all(type(linear) is torch.nn.Linear for linear in linears):
                continue
            if len({linear.in_features for linear in linears}) != 1:
                continue
            group = FusedGroup(linears)
            for index, name in enumerate(names):
                setattr(module, name, FusedMember(group, index, linears[index].in_features))
            fused += 1
    return fused
