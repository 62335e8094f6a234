"""The CUDA path, run only where a CUDA device is present (skipped elsewhere, CI included).

The same tiny Llama pair as `test_models_hf.py`, loaded on the GPU, must decode exactly as it
does on the CPU: greedy decoding at T=0 for every method, seeded reproducibility, the exact
first-two-token law (chi-square), verifiers on CUDA tensors equal to the CPU verifiers under
the same uniforms, and no host synchronisation inside the draft loop (the engine's promise:
drafted tokens stay on the device until commit).
"""

from __future__ import annotations

import warnings

import pytest
import torch

from spectr_gbv import METHODS, generate
from spectr_gbv.config import DecodeConfig
from spectr_gbv.engine import draft_blocks
from spectr_gbv.methods import VerifyInput
from spectr_gbv.models.hf import load_pair
from spectr_gbv.randomness import ScriptedRandomness
from helpers import assert_first_two_tokens_follow_the_target_law, greedy
from tiny_models import save_tiny_llama

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")

ALL_METHODS = ["ar", *METHODS]


@pytest.fixture(scope="module")
def cuda_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-cuda")
    return {
        "target": save_tiny_llama(root / "target", seed=1),
        "draft": save_tiny_llama(root / "draft", seed=2),
        "small": save_tiny_llama(root / "small", vocab_size=6, seed=4, init_range=1.0),
        "small_draft": save_tiny_llama(root / "small_draft", vocab_size=6, seed=5, init_range=1.0),
    }


@pytest.fixture(scope="module")
def cuda_pair(cuda_dirs):
    # float32 so that greedy argmaxes cannot flip against the reference recompute.
    target, draft, _ = load_pair(str(cuda_dirs["target"]), str(cuda_dirs["draft"]), device="cuda", dtype=torch.float32)
    assert target.device.type == "cuda" and draft.device.type == "cuda"
    return target, draft


@pytest.mark.model
def test_default_dtype_on_cuda_is_bfloat16(cuda_dirs):
    target, _, _ = load_pair(str(cuda_dirs["target"]), str(cuda_dirs["draft"]), device="cuda")
    assert next(target.model.parameters()).dtype == torch.bfloat16
    run = generate(target, None, [3, 4], method="ar", temperature=1.0, max_new_tokens=5)
    assert len(run.tokens) >= 1


@pytest.mark.model
@pytest.mark.parametrize("method", ALL_METHODS)
def test_temperature_zero_equals_greedy_target_decoding_on_cuda(cuda_pair, method):
    target, draft = cuda_pair
    run = generate(target, draft, [3, 4, 5], method=method, num_drafts=3, draft_length=4, temperature=0, max_new_tokens=20)
    assert run.tokens == greedy(target, [3, 4, 5], 20)


@pytest.mark.model
@pytest.mark.parametrize("method", ["sd", "spectr", "gbv", "spectr_gbv"])
def test_seeded_decoding_is_reproducible_on_cuda(cuda_pair, method):
    target, draft = cuda_pair
    runs = [generate(target, draft, [3, 4], method=method, num_drafts=4, draft_length=3, temperature=1.0,
                     max_new_tokens=24, seed=11).tokens for _ in range(2)]
    assert runs[0] == runs[1]


@pytest.mark.statistical
def test_first_two_tokens_follow_the_exact_target_law_on_cuda(cuda_dirs):
    target, draft, _ = load_pair(str(cuda_dirs["small"]), str(cuda_dirs["small_draft"]), device="cuda", dtype=torch.float32)
    assert_first_two_tokens_follow_the_target_law(target, draft)


@pytest.mark.model
@pytest.mark.parametrize("method", list(METHODS))
def test_verifiers_on_cuda_tensors_equal_the_cpu_verifiers(method):
    g = torch.Generator().manual_seed(3)
    K, L, V = 4, 5, 50
    target = torch.softmax(torch.randn(K, L + 1, V, generator=g, dtype=torch.float64) * 2, -1)
    draft = torch.softmax(torch.randn(K, L, V, generator=g, dtype=torch.float64) * 2, -1)
    tokens = torch.multinomial(draft.reshape(-1, V), 1, generator=g).reshape(K, L)
    uniforms = torch.rand(200, generator=g, dtype=torch.float64).tolist()
    results = []
    for device in ("cpu", "cuda"):
        inp = VerifyInput.build(tokens.to(device), draft.to(device), target.to(device))
        results.append(METHODS[method].verify(inp, ScriptedRandomness(uniforms)))
    cpu, gpu = results
    assert (gpu.num_accepted, gpu.winning_draft, gpu.final_token) == (cpu.num_accepted, cpu.winning_draft, cpu.final_token)
    assert torch.allclose(gpu.final_distribution.cpu(), cpu.final_distribution, atol=1e-12)


def _host_syncs(fn) -> list[str]:
    """The host synchronisations that torch's sync debug mode reports while fn runs."""
    torch.cuda.synchronize()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    # (The first use also warns that the mode is a prototype; that notice is not a sync.)
    return [str(w.message) for w in caught if "called a synchronizing" in str(w.message)]


@pytest.mark.model
def test_the_draft_loop_does_not_synchronise_per_token(cuda_pair):
    """Copying the pending context in may synchronise once per iteration; the L drafting steps
    after it must not, so the count is the same for L = 2 and L = 8."""
    _, draft = cuda_pair
    counts = {}
    for L in (2, 8):
        config = DecodeConfig(method="spectr_gbv", num_drafts=4, draft_length=L, temperature=0.8, top_k=20, top_p=0.9)
        session = draft.start([3, 4, 5])
        generator = torch.Generator(device="cuda").manual_seed(0)
        out = {}
        counts[L] = _host_syncs(lambda: out.update(zip(("tokens", "probs"), draft_blocks(session, config, 4, generator))))
        assert out["tokens"].shape == (4, L) and out["tokens"].device.type == "cuda"
        assert torch.allclose(out["probs"].sum(-1), torch.ones(4, L, device="cuda"), atol=1e-5)
    assert len(counts[8]) == len(counts[2]) <= 1, counts
