"""Grouped-query attention without copying the cache (`models.attention`), on a tiny random-weight
Llama with 4 query heads sharing 2 key/value heads: CPU models load with it; a scoring forward
of a drafts' tree (masked) gives transformers' SDPA logits bit for bit, without repeating a single
key/value head; plain decoding's steps keep transformers' own path; decoding gives the same tokens
for every rule; a model on another attention implementation is left alone."""

from __future__ import annotations

import pytest
import torch
import transformers.integrations.sdpa_attention as sdpa_module

from spectr_gbv import generate
from spectr_gbv.models import attention
from spectr_gbv.models.hf import load_model, load_pair
from tiny_models import save_tiny_llama

pytestmark = pytest.mark.model

PROMPT = [3, 4, 5, 6, 7, 8]
BLOCKS = torch.tensor([[9, 10, 11], [9, 12, 13], [14, 15, 16]])  # three drafts, two sharing a prefix


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("attention")
    return load_pair(str(save_tiny_llama(root / "t", vocab_size=40, seed=1)),
                     str(save_tiny_llama(root / "d", vocab_size=40, seed=2)), device="cpu", compile=False)


@pytest.fixture
def repeats(monkeypatch):
    """How often transformers copies key/value heads (`repeat_kv`) from now on."""
    calls = []
    original = sdpa_module.repeat_kv

    def counting(hidden, n_rep):
        calls.append(n_rep)
        return original(hidden, n_rep)

    monkeypatch.setattr(sdpa_module, "repeat_kv", counting)
    return calls


def scored(target, implementation: str) -> torch.Tensor:
    target.model.set_attn_implementation(implementation)
    try:
        session = target.start(PROMPT)
        return session.score(BLOCKS)
    finally:
        target.model.set_attn_implementation(attention.NAME)


def test_cpu_models_load_with_the_grouped_attention(tiny_pair):
    target, draft, _ = tiny_pair
    assert target.model.config._attn_implementation == attention.NAME
    assert target.model.config.num_key_value_heads < target.model.config.num_attention_heads  # heads to share


def test_a_tree_score_equals_transformers_sdpa_bit_for_bit_without_copying_a_head(tiny_pair, repeats):
    target, _, _ = tiny_pair
    reference = scored(target, "sdpa")
    assert repeats, "transformers' SDPA path repeats the key/value heads for a masked forward"
    repeats.clear()
    grouped = scored(target, attention.NAME)
    assert repeats == []
    assert torch.equal(grouped, reference)


def test_a_one_token_step_keeps_transformers_path(tiny_pair, repeats):
    target, _, _ = tiny_pair
    session = target.start(PROMPT)
    grouped = session.branch_logits(1)
    target.model.set_attn_implementation("sdpa")
    try:
        reference = target.start(PROMPT).branch_logits(1)
    finally:
        target.model.set_attn_implementation(attention.NAME)
    assert repeats == []
    assert torch.equal(grouped, reference)


@pytest.mark.parametrize("method, drafts", [("ar", 1), ("sd", 1), ("spectr_gbv", 3), ("as_bv_handoff", 2)])
def test_decoding_gives_the_same_tokens_as_with_transformers_sdpa(tiny_pair, method, drafts):
    target, draft, _ = tiny_pair
    kwargs = dict(method=method, num_drafts=drafts, draft_length=3, temperature=0.9, max_new_tokens=24, seed=5, detail=False)
    grouped = generate(target, draft, PROMPT, **kwargs).tokens
    target.model.set_attn_implementation("sdpa")
    try:
        reference = generate(target, draft, PROMPT, **kwargs).tokens
    finally:
        target.model.set_attn_implementation(attention.NAME)
    assert grouped == reference


def test_a_model_on_another_attention_implementation_is_left_alone(tmp_path):
    loaded = load_model(str(save_tiny_llama(tmp_path / "m", vocab_size=40, seed=3)), device="cpu")
    loaded.model.set_attn_implementation("eager")
    assert attention.use_grouped_sdpa(loaded.model) is False
    assert loaded.model.config._attn_implementation == "eager"
