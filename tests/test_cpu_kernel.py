"""The default target's CPU kernel (spectr_gbv.models.cpu_kernel): what is probed, what is chosen, and that
every kernel is one target for AR and every method alike (so exactness holds with respect to it).

No timing is asserted: the choice is tested on given costs, and the probe only for its shape."""

from __future__ import annotations

import pytest
import torch

from spectr_gbv import METHODS, generate
from spectr_gbv.models import cpu_kernel
from spectr_gbv.models.compiled import TOLERANCE
from spectr_gbv.models.cpu_kernel import KernelChoice, KernelCost
from spectr_gbv.models.fused_linear import FusedMember
from spectr_gbv.models.hf import HFModel, load_model
from tiny_models import save_tiny_llama

pytestmark = pytest.mark.model

AVX2 = {"avx", "avx2", "fma", "f16c"}
AVX512_BF16 = AVX2 | {"avx512f", "avx512bw", "avx512_bf16"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return load_model(str(save_tiny_llama(tmp_path_factory.mktemp("kernel") / "target", seed=1)), device="cpu",
                      dtype=torch.float32)


@pytest.fixture(scope="module")
def tiny_draft(tmp_path_factory):
    return HFModel(load_model(str(save_tiny_llama(tmp_path_factory.mktemp("kernel") / "draft", seed=2)), device="cpu",
                              dtype=torch.float32))


def test_cpu_classes_and_their_candidates():
    assert cpu_kernel.cpu_class(AVX2) == "AVX2" and cpu_kernel.cpu_class(AVX512_BF16) == "AVX512-BF16"
    assert cpu_kernel.cpu_class(AVX2 | {"amx_bf16"}) == "AMX-BF16" and cpu_kernel.cpu_class(set()) == "other"
    assert "bfloat16" not in cpu_kernel.candidates(AVX2)  # emulated bf16 is several times slower: never probed
    assert "bfloat16" in cpu_kernel.candidates(AVX512_BF16)
    assert cpu_kernel.candidates(set()) == ["float32"]  # no F16C: no fp16 weights


def test_the_choice_maximises_predicted_speculative_tokens_per_second():
    # The AVX2 machine: fp32 scoring 4 positions = 1.67 steps; fp16 weights 1.54, and 1.6x faster steps.
    fp32, fp16 = KernelCost("float32", 107.0, 178.7), KernelCost("fp16-weights", 67.0, 103.2)
    assert cpu_kernel.best([fp32, fp16]) is fp16
    assert fp16.predicted_speedup() > fp32.predicted_speedup()
    # A kernel with a cheaper ratio but much slower steps loses: the user gets tokens per second.
    slow = KernelCost("bfloat16", 400.0, 400.0)
    assert slow.ratio < fp16.ratio and cpu_kernel.best([fp16, slow]) is fp16
    # Speedup against AR with the same kernel, from the theory's tokens per iteration.
    alpha, length = cpu_kernel.PREDICTION_ALPHA, cpu_kernel.PREDICTION_DRAFT_LENGTH
    tokens = (1 - alpha ** (length + 1)) / (1 - alpha)
    assert fp32.predicted_speedup() == pytest.approx(tokens / (fp32.ratio + length * cpu_kernel.PREDICTION_DRAFT_COST))
    # With the default iteration's forward timed, the choice is made on it: this project's EPYC, where
    # packed bf16 scores 4 positions at about fp16 weights' cost but 9 positions far cheaper.
    fp16 = KernelCost("fp16-weights", 27.5, 34.4, 50.8)
    bf16 = KernelCost("bfloat16", 38.9, 36.5, 44.7)
    assert cpu_kernel.best([fp16, bf16]) is bf16
    assert cpu_kernel.best([fp16, KernelCost("bfloat16", 38.9, 36.5, 60.0)]).kernel == "fp16-weights"


def test_the_note_says_the_class_the_kernel_and_the_ratio():
    choice = KernelChoice("fp16-weights", "AVX2", "some CPU", (KernelCost("fp16-weights", 60.0, 90.0),))
    assert choice.note() == "this server: AVX2, fp16 weights (fbgemm); scoring 4 positions costs 1.50 one-token steps"
    assert choice.summary()["costs"][0]["ratio"] == 1.5
    timed = KernelChoice("bfloat16", "AVX512-BF16", "some CPU", (KernelCost("bfloat16", 40.0, 38.0, 46.0),))
    assert timed.note() == ("this server: AVX512-BF16, bf16 (oneDNN, packed); scoring 4 positions costs 0.95 one-token "
                            "steps, 9 positions (K = 2, L = 4) 1.15")
    # the theory's g, each extra scored position's cost: fitted through both forwards, never negative
    cost = KernelCost("fp16-weights", 30.0, 45.0, 60.0)  # 1.5 steps at 4 positions, 2.0 at 9
    assert cost.position_cost == pytest.approx((3 * 0.5 + 8 * 1.0) / (3**2 + 8**2))
    assert KernelCost("bfloat16", 40.0, 38.0, 39.0).position_cost == 0.0
    assert KernelCost("float32", 50.0, 80.0).position_cost == pytest.approx(0.6 / 3)
    forced = KernelChoice("float32", "AVX2", "some CPU", reason="$SPECTR_GBV_CPU_KERNEL=float32")
    assert forced.note() == "this server: AVX2, fp32 ($SPECTR_GBV_CPU_KERNEL=float32)"


def test_the_environment_overrides_the_probe(monkeypatch, tiny):
    monkeypatch.setenv(cpu_kernel.KERNEL_ENV, "fp16-weights")
    monkeypatch.setattr(cpu_kernel, "PROBE_REPEATS", 2)
    choice = cpu_kernel.choose(tiny.model, tiny.name)
    # only the forced kernel is timed, so the note still says what scoring costs there
    assert choice.kernel == "fp16-weights" and [c.kernel for c in choice.costs] == ["fp16-weights"]
    assert "SPECTR_GBV_CPU_KERNEL" in choice.reason and "one-token steps" in choice.note()
    monkeypatch.setenv(cpu_kernel.KERNEL_ENV, "int8")
    with pytest.raises(ValueError, match="float32, fp16-weights, bfloat16, int4"):
        cpu_kernel.choose(tiny.model, tiny.name)
    monkeypatch.setenv(cpu_kernel.KERNEL_ENV, "int4")  # known, but only the default target has its Q4_1 file
    with pytest.raises(ValueError, match="Q4_1 GGUF file"):
        cpu_kernel.choose(tiny.model, tiny.name)
    monkeypatch.delenv(cpu_kernel.KERNEL_ENV)
    monkeypatch.setenv(cpu_kernel.DTYPE_ENV, "float32")  # the older variable: the stand-in for a CPU without bf16
    assert cpu_kernel.choose(tiny.model, tiny.name).kernel == "float32"


def test_a_probe_times_each_candidate_and_is_cached(monkeypatch, tmp_path, tiny):
    monkeypatch.delenv(cpu_kernel.KERNEL_ENV, raising=False)
    monkeypatch.delenv(cpu_kernel.DTYPE_ENV, raising=False)
    monkeypatch.setattr(cpu_kernel, "PROBE_REPEATS", 2)
    first = cpu_kernel.choose(tiny.model, tiny.name, tmp_path)
    assert [c.kernel for c in first.costs] == cpu_kernel.candidates(cpu_kernel.cpu_flags())
    assert all(c.step_ms > 0 and c.score_ms > 0 for c in first.costs) and first.reason == "measured"
    monkeypatch.setattr(cpu_kernel, "probe", lambda *args: pytest.fail("a cached probe ran again"))
    again = cpu_kernel.choose(tiny.model, tiny.name, tmp_path)
    assert again.costs == first.costs and again.kernel == first.kernel


def test_fp16_weights_swap_every_linear_and_the_output_head_but_keep_the_embedding_in_fp32(tiny):
    model = cpu_kernel.apply_kernel(load_model(tiny.name, device="cpu", dtype=torch.float32).model, "fp16-weights")
    swapped = [m for m in model.modules() if isinstance(m, cpu_kernel.Fp16WeightLinear)]
    fused = [m for m in model.modules() if isinstance(m, FusedMember)]  # q/k/v and gate/up: one GEMM each
    assert len(swapped) == 3 * 2 + 1 and len(fused) == 3 * 5  # 7 Linears a layer
    assert not any(isinstance(m, torch.nn.Linear) for m in model.modules())
    assert model.get_output_embeddings() in swapped
    assert model.get_input_embeddings().weight.dtype == torch.float32  # a lookup: no bytes saved by packing it
    # the feature draft takes its head rows from output_weight: the fp32 head rounded to fp16
    fp32_head = tiny.model.get_output_embeddings().weight.detach()
    torch.testing.assert_close(cpu_kernel.output_weight(model), fp32_head.half().float(), atol=0, rtol=0)
    assert cpu_kernel.output_weight(tiny.model) is not None and cpu_kernel.output_weight(tiny.model).dtype == torch.float32
    ids = torch.tensor([[2, 3, 4, 5]])
    with torch.inference_mode():
        assert torch.allclose(model(ids).logits, tiny.model(ids).logits, atol=1e-2)


@pytest.mark.parametrize("kernel", ["fp16-weights", "float32", "bfloat16"])
@pytest.mark.parametrize("method", ["sd", "gbv", "spectr_gbv", "as_bv_handoff"])
def test_every_method_decodes_the_same_target_as_ar_in_each_kernel(tiny, tiny_draft, kernel, method):
    """Greedy speculative decoding equals greedy AR of the same converted model, token for token:
    the verifier scores with the very target AR samples from."""
    model = cpu_kernel.apply_kernel(load_model(tiny.name, device="cpu", dtype=torch.float32).model, kernel)
    target = HFModel(type(tiny)(tiny.name, model, tiny.tokenizer))
    assert METHODS[method].exact
    run = generate(target, tiny_draft, [3, 4, 5], method=method, num_drafts=2, draft_length=3, temperature=0,
                   max_new_tokens=12)
    ar = generate(target, None, [3, 4, 5], method="ar", temperature=0, max_new_tokens=12)
    assert run.tokens == ar.tokens


@pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="oneDNN has no bf16 on this CPU")
def test_bf16_linears_are_packed_once_and_give_the_same_products_bit_for_bit(tiny):
    """The bf16 kernel's Linears hold oneDNN pre-packed weights (F.linear re-packs them on every
    call); the logits are those of the plain bf16 model, bit for bit, and the feature draft still
    reads the head's rows."""
    plain = load_model(tiny.name, device="cpu", dtype=torch.float32).model.to(torch.bfloat16)
    model = cpu_kernel.apply_kernel(load_model(tiny.name, device="cpu", dtype=torch.float32).model, "bfloat16")
    packed = [m for m in model.modules() if isinstance(m, cpu_kernel.PackedLinear)]
    assert len(packed) == 3 * 7 + 1 and not any(isinstance(m, torch.nn.Linear) for m in model.modules())
    ids = torch.tensor([[2, 3, 4, 5], [6, 7, 8, 9]])
    with torch.inference_mode():
        assert torch.equal(model(ids).logits, plain(ids).logits)
    assert torch.equal(cpu_kernel.output_weight(model), plain.get_output_embeddings().weight)


@pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="oneDNN has no bf16 on this CPU")
def test_bf16_packed_linears_compile_without_a_graph_break_and_keep_their_products(tiny):
    """Under torch.compile the packed product is one custom op: inductor's lowering of oneDNN's
    linear asserted on a weight it had not packed itself, which left the bf16 target eager. A
    packed Linear compiled alone is the same op (the same bits); the whole model agrees with its
    eager self to bf16's rounding (inductor fuses the elementwise work in fp32)."""
    torch.manual_seed(0)
    for bias in (True, False):
        packed = cpu_kernel.PackedLinear(torch.nn.Linear(64, 96, bias=bias).to(torch.bfloat16))
        x = torch.randn(3, 64, dtype=torch.bfloat16)
        with torch.inference_mode():
            assert torch.equal(torch.compile(packed, dynamic=False)(x), packed(x))
    model = cpu_kernel.apply_kernel(load_model(tiny.name, device="cpu", dtype=torch.float32).model, "bfloat16")
    ids = torch.tensor([[2, 3, 4, 5]])
    explained = torch._dynamo.explain(lambda i: model(i).logits)(ids)
    assert explained.graph_break_count == 0, explained.break_reasons
    with torch.inference_mode():
        eager = model(ids).logits.float()
        got = torch.compile(lambda i: model(i).logits, dynamic=False)(ids).float()
    assert (got - eager).abs().max() <= TOLERANCE[torch.bfloat16] * max(1.0, eager.abs().max().item())


def test_fp16_weight_linear_is_torch_aos_dynamic_fp16_linear_bit_for_bit_and_compiles_without_a_graph_break(tiny):
    """The same fbgemm kernel as torch.ao's dynamic fp16 Linear, so the fp16-weight target is the model it was;
    but traceable: ao's module keeps its weight in a TorchScript object, at which torch.compile breaks the graph."""
    import warnings

    from torch.ao.quantization import quantize_dynamic

    torch.manual_seed(0)
    for bias in (True, False):
        linear = torch.nn.Linear(64, 96, bias=bias)
        ours = cpu_kernel.Fp16WeightLinear(linear)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = quantize_dynamic(torch.nn.Sequential(linear), {torch.nn.Linear}, dtype=torch.float16)
        for x in (torch.randn(1, 64), torch.randn(2, 5, 64)):
            assert torch.equal(ours(x), theirs(x))
    model = cpu_kernel.apply_kernel(load_model(tiny.name, device="cpu", dtype=torch.float32).model, "fp16-weights")
    ids = torch.tensor([[2, 3, 4, 5]])
    explained = torch._dynamo.explain(lambda i: model(i).logits)(ids)
    assert explained.graph_break_count == 0, explained.break_reasons
    with torch.inference_mode():
        compiled = torch.compile(lambda i: model(i).logits, dynamic=False)
        torch.testing.assert_close(compiled(ids), model(ids).logits, atol=1e-4, rtol=1e-4)
