"""The profiler's op count (`bench.counts.ProfiledOpCounter`), which sees into a compiled target
where a dispatch mode cannot: an op is counted once however it is carried out, it agrees with the
dispatch mode's count on an eager tiny Llama's decoding loop, and under torch.compile (with
inductor's kernel profiling on) it counts the generated kernel in place of the ops it fused."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from spectr_gbv.bench.counts import OpCounter, ProfiledOpCounter, count_loop
from spectr_gbv.models.hf import load_pair
from tiny_models import save_tiny_llama


@pytest.mark.unit
def test_an_op_is_counted_once_and_what_runs_inside_it_is_not():
    x, w = torch.randn(3, 8), torch.randn(5, 8)
    with ProfiledOpCounter() as ops:
        y = F.linear(x, w)  # aten::linear calls aten::t and aten::mm inside
        z = y + 1
        z.relu_()
    assert ops.by_op == {"aten::linear": 1, "aten::add": 1, "aten::relu_": 1}
    assert ops.total == 3


@pytest.mark.unit
def test_names_that_are_ops():
    assert ProfiledOpCounter.is_op("aten::mm")
    assert ProfiledOpCounter.is_op("spectr_gbv::linear_fp16_weight")
    assert ProfiledOpCounter.is_op("graph_0_cpp_fused_add_mean_mul_pow_rsqrt_10")
    assert ProfiledOpCounter.is_op("triton_poi_fused_add_0")
    assert not ProfiledOpCounter.is_op("Torch-Compiled Region: 0/0")
    assert not ProfiledOpCounter.is_op("## Call CompiledFxGraph ##")


@pytest.mark.model
def test_the_profiler_and_the_dispatch_mode_agree_on_an_eager_decoding_loop(tmp_path):
    target, draft, _ = load_pair(str(save_tiny_llama(tmp_path / "t", vocab_size=40, seed=1)),
                                 str(save_tiny_llama(tmp_path / "d", vocab_size=40, seed=2)), device="cpu", compile=False)
    prompt = [3, 4, 5, 6]
    for method, K in [("ar", 1), ("sd", 1), ("spectr_gbv", 2)]:
        dispatched = count_loop(target, draft, prompt, method, K, 3, 0.8, 12)
        profiled = count_loop(target, draft, prompt, method, K, 3, 0.8, 12, profiled=True)
        assert profiled.tokens == dispatched.tokens and profiled.iterations == dispatched.iterations
        # the same loop, seen before (profiler) and after (dispatch mode) composite ops decompose
        assert abs(profiled.aten_ops - dispatched.aten_ops) <= 0.1 * dispatched.aten_ops, (method, profiled, dispatched)


@pytest.mark.slow
def test_a_compiled_function_counts_its_generated_kernel_not_the_ops_it_fused():
    import torch._dynamo
    import torch._inductor.config as inductor_config

    def f(x):
        return (x * 2 + 1).relu().sum(-1)

    x = torch.randn(4, 16)
    with ProfiledOpCounter() as eager:
        f(x)
    assert eager.total == 4  # mul, add, relu, sum
    torch._dynamo.reset()
    with inductor_config.patch({"cpp.enable_kernel_profile": True, "fx_graph_cache": False}):
        compiled = torch.compile(f, dynamic=False)
        expected = compiled(x)  # the compile
        with ProfiledOpCounter() as ops:
            got = compiled(x)
    torch.testing.assert_close(got, expected)
    kernels = [name for name in ops.by_op if "cpp_fused" in name]
    assert kernels, ops.by_op
    assert not {"aten::mul", "aten::add", "aten::relu", "aten::sum"} & set(ops.by_op), ops.by_op
    assert ops.total < eager.total
