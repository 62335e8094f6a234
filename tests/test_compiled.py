"""torch.compile of the target's one-token step, for real, on a tiny random-weight Llama.

Slow: inductor compiles the step once for the module (about a minute on a busy 2-core machine).
Checks: the compiled step passes its own check and gives eager's logits within fp32's
tolerance, step after step; greedy speculative decoding with the compiled target equals greedy
plain decoding with it, and both equal the eager target's tokens."""

from __future__ import annotations

import pytest
import torch

from spectr_gbv import generate
from spectr_gbv.models import compiled
from spectr_gbv.models.hf import load_pair
from spectr_gbv.models.hf_session import HFSession
from spectr_gbv.models.static_session import StaticHFSession
from helpers import one_torch_thread
from tiny_models import save_tiny_llama

pytestmark = pytest.mark.slow

PROMPT = [3, 4, 5, 6, 7]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def compiled_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-compiled")
    target, draft, _ = load_pair(str(save_tiny_llama(root / "target", seed=1)), str(save_tiny_llama(root / "draft", seed=2)),
                                 device="cpu", compile=True)
    return target, draft


def test_the_compile_passes_its_check_and_the_target_switches(compiled_pair):
    target, _ = compiled_pair
    assert target.compiled.reason is None
    assert compiled.serving_mode(target) == compiled.COMPILED
    assert isinstance(target.start(PROMPT), StaticHFSession)


def test_compiled_and_eager_logits_agree_within_fp32_tolerance(compiled_pair):
    target, _ = compiled_pair
    eager, fast = HFSession(target, PROMPT), target.start(PROMPT)
    calls_before = fast.forward_calls
    for token in (8, 9, 10, 11, 12, 13):
        expected, got = eager.branch_logits(1), fast.branch_logits(1)
        scale = expected.abs().max().item()
        assert (got - expected).abs().max().item() <= compiled.TOLERANCE[torch.float32] * max(1.0, scale)
        for session in (eager, fast):
            session.commit(0, [token])
    assert fast.static and fast.forward_calls - calls_before == 6  # the prompt, then five compiled steps


@pytest.mark.parametrize("method", ["sd", "spectr_gbv", "as_bv_handoff"])
def test_greedy_speculative_decoding_equals_greedy_ar_when_compiled(compiled_pair, method):
    target, draft = compiled_pair
    ar = generate(target, None, PROMPT, method="ar", temperature=0, max_new_tokens=20, detail=False).tokens
    run = generate(target, draft, PROMPT, method=method, num_drafts=2, draft_length=3, temperature=0,
                   max_new_tokens=20, detail=False).tokens
    assert run == ar
    eager_ar = []  # the same target, eagerly: the compiled step changes no greedy token here
    session = HFSession(target, PROMPT)
    for _ in range(20):
        token = int(session.branch_logits(1)[0].argmax())
        eager_ar.append(token)
        if token == target.eos_token_id:
            break
        session.commit(0, [token])
    assert ar == eager_ar
