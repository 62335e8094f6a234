"""Sibling Linears as one fp16-weight GEMM (spectr_gbv/models/fused_linear.py): the fused product is
the separate products side by side, bit for bit, so the fp16-weight target is the same model, logit
for logit, with two calls a layer where it made five; the order of the siblings' calls does not
matter; and nothing is held once every sibling has its slice."""

from __future__ import annotations

import pytest
import torch

from spectr_gbv.models import cpu_kernel
from spectr_gbv.models.fused_linear import FusedGroup, FusedMember, fuse_sibling_linears
from spectr_gbv.models.hf import load_model
from helpers import in_threads_switching_often
from tiny_models import draft_steps, save_tiny_llama

pytestmark = [pytest.mark.model,
              pytest.mark.skipif("fbgemm" not in torch.backends.quantized.supported_engines, reason="needs fbgemm (x86)")]


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory):
    return str(save_tiny_llama(tmp_path_factory.mktemp("fused") / "target", seed=3))


def fp32(path):
    return load_model(path, device="cpu", dtype=torch.float32).model


# The default target's (SmolLM2-135M) sibling shapes: q/k/v 576 -> 576/192/192, gate/up 576 -> 1536 each.
@pytest.mark.parametrize("sizes", [(576, 192, 192), (1536, 1536)])
@pytest.mark.parametrize("rows", [1, 9, 64])
def test_the_fused_product_is_the_separate_products_bit_for_bit(sizes, rows):
    torch.manual_seed(0)
    linears = [torch.nn.Linear(576, n, bias=False) for n in sizes]
    group = FusedGroup(linears)
    x = torch.randn(1, rows, 576)
    alone = [cpu_kernel.Fp16WeightLinear(linear)(x) for linear in linears]
    together = [group.part(x, i) for i in range(len(sizes))]
    assert all(torch.equal(a, b) for a, b in zip(alone, together))


def test_the_fused_target_gives_the_unfused_targets_logits_bit_for_bit_with_two_gemms_a_layer_where_it_made_five(
        tiny_path):
    fused = cpu_kernel.apply_kernel(fp32(tiny_path), "fp16-weights")
    unfused = cpu_kernel.fp16_weight_linears(fp32(tiny_path), keep_dense=())
    groups = {id(m.group) for m in fused.modules() if isinstance(m, FusedMember)}
    layers = fused.config.num_hidden_layers
    assert len(groups) == 2 * layers
    assert sum(isinstance(m, cpu_kernel.Fp16WeightLinear) for m in fused.modules()) == 2 * layers + 1
    ids = torch.tensor([[2, 3, 4, 5, 6], [7, 8, 9, 10, 11]])
    with torch.inference_mode():
        a, b = fused(ids, use_cache=True), unfused(ids, use_cache=True)
        assert torch.equal(a.logits, b.logits)
        step = torch.tensor([[12], [13]])  # and a cached one-token step after the prefill
        assert torch.equal(fused(step, past_key_values=a.past_key_values).logits,
                           unfused(step, past_key_values=b.past_key_values).logits)


def test_the_siblings_may_be_called_in_any_order_and_a_new_input_is_a_new_product():
    torch.manual_seed(1)
    parent = torch.nn.Module()
    for name, n in (("q_proj", 8), ("k_proj", 4), ("v_proj", 4)):
        setattr(parent, name, torch.nn.Linear(16, n))
    alone = {name: cpu_kernel.Fp16WeightLinear(getattr(parent, name)) for name in ("q_proj", "k_proj", "v_proj")}
    assert fuse_sibling_linears(parent) == 1
    x, y = torch.randn(3, 16), torch.randn(3, 16)
    assert torch.equal(parent.v_proj(x), alone["v_proj"](x))
    assert torch.equal(parent.k_proj(y), alone["k_proj"](y))  # another input before x's slices were all taken
    assert torch.equal(parent.q_proj(x), alone["q_proj"](x))


def test_threads_sharing_a_group_each_get_their_own_inputs_slices():
    """One model serves several visitors at once: siblings called from many threads, each with its
    own input, in any interleaving, each get their input's slice (a shared `parts` once crashed
    here, and could hand a thread another's slice)."""
    torch.manual_seed(2)
    linears = [torch.nn.Linear(32, n, bias=False) for n in (8, 4, 4)]
    alone = [cpu_kernel.Fp16WeightLinear(linear) for linear in linears]
    group = FusedGroup(linears)
    inputs = [torch.randn(2, 32) for _ in range(8)]
    expected = [[a(x) for a in alone] for x in inputs]
    wrong, errors = [], []

    def visitor(which):
        try:
            for round_ in range(300):
                order = (0, 1, 2) if (round_ + which) % 2 else (2, 0, 1)
                for index in order:
                    if not torch.equal(group.part(inputs[which], index), expected[which][index]):
                        wrong.append((which, index))
        except Exception as exc:  # noqa: BLE001 - the assertion below reports it
            errors.append(repr(exc))

    in_threads_switching_often(visitor, len(inputs))
    assert errors == [] and wrong == []


def test_a_compiled_forward_does_not_recompile_when_an_eager_forward_is_mid_layer():
    """Compiled and eager forwards of one target run in different threads at once (a compiled
    step beside a prefill): the compiled graph must not guard on the eager forwards' record."""
    from torch._dynamo.testing import CompileCounter

    torch.manual_seed(3)
    parent = torch.nn.Module()
    for name, n in (("q_proj", 8), ("k_proj", 4), ("v_proj", 4)):
        setattr(parent, name, torch.nn.Linear(16, n))
    fuse_sibling_linears(parent)
    counter = CompileCounter()
    torch._dynamo.reset()
    layer = torch.compile(lambda x: parent.q_proj(x).sum() + parent.k_proj(x).sum() + parent.v_proj(x).sum(),
                          backend=counter)
    x, y = torch.randn(2, 16), torch.randn(2, 16)
    first = layer(x)
    parent.q_proj(y)  # an eager forward in another thread, stopped after its first sibling
    assert parent.q_proj.group.last is not None
    again = layer(x)
    torch._dynamo.reset()
    assert counter.frame_count == 1 and torch.equal(first, again)
    assert parent.q_proj.group.traced_last is None


def test_the_group_holds_no_tensor_after_a_forward(tiny_path):
    model = cpu_kernel.apply_kernel(fp32(tiny_path), "fp16-weights")
    with torch.inference_mode():
        model(torch.tensor([[2, 3, 4]]))
    groups = {m.group for m in model.modules() if isinstance(m, FusedMember)}
    assert groups and all(g.last is None for g in groups)


def test_linears_of_other_kinds_or_input_sizes_are_left_alone():
    parent = torch.nn.Module()
    parent.gate_proj, parent.up_proj = torch.nn.Linear(16, 8), torch.nn.Linear(12, 8)  # two input sizes
    parent.q_proj, parent.k_proj = torch.nn.Linear(16, 8), torch.nn.Linear(16, 8)  # no v_proj: not the triple
    assert fuse_sibling_linears(parent) == 0
    assert all(type(m) is torch.nn.Linear for m in parent.children())


def test_the_fp16_weight_feature_draft_fuses_its_siblings_and_drafts_the_same_laws_to_rounding(monkeypatch):
    """The products are the same bits (above); what a slice of the group's product feeds may round in
    the last bit on some CPUs: on an AMX Xeon torch's SiLU of a strided slice (gate's) differs from
    the contiguous one by an ulp, so the draft's logits agree to float32 rounding there (bit for bit on
    the AVX2 EPYC), with -inf off the head in the same places. The draft is not the target: its laws
    are whatever it drafts from."""
    import copy

    from spectr_gbv.models import fused_linear
    from spectr_gbv.models.feature_draft import FeatureDraftHead, FeatureDraftModel, FeatureDraftShape

    shape = FeatureDraftShape(hidden_size=32, num_heads=4, num_kv_heads=2, head_dim=8, intermediate_size=48,
                              rope_theta=10000.0, rms_norm_eps=1e-6)
    torch.manual_seed(0)
    head = FeatureDraftHead(shape)
    model = FeatureDraftModel(head, torch.randn(40, 32), torch.randn(40, 32), list(range(0, 40, 2)), 40, None, "tiny")
    fused = copy.deepcopy(model).use_fp16_weights()
    monkeypatch.setattr(fused_linear, "fuse_sibling_linears", lambda module: 0)  # the draft as it was before fusing
    unfused = copy.deepcopy(model).use_fp16_weights()
    assert sum(isinstance(m, FusedMember) for m in fused.head.modules()) == 5
    assert not any(isinstance(m, FusedMember) for m in unfused.head.modules())
    prompt = list(range(3, 12))
    torch.manual_seed(2)
    features = torch.randn(len(prompt) - 1, shape.hidden_size)
    tokens = torch.tensor([5, 7, 9])
    got, expected = draft_steps(fused, prompt, features, tokens), draft_steps(unfused, prompt, features, tokens)
    assert torch.equal(torch.isinf(got), torch.isinf(expected))
    finite = torch.isfinite(expected)
    torch.testing.assert_close(got[finite], expected[finite], rtol=1e-5, atol=1e-5)
