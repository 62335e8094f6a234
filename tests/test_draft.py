"""The distilled default draft and the restricted-output-head mechanism it uses.

The restricted head is checked on a tiny model: the distribution is zero outside the
listed tokens and normalised, and decoding with such a draft still equals greedy target
decoding at T = 0. The shipped draft is checked as the issue asks: it loads through the
ordinary loading code, shares the target's tokenizer, gives normalised distributions, and a
short seeded decode with it is reproducible.
"""

from __future__ import annotations

import json

import pytest
import torch

from spectr_gbv import generate
from spectr_gbv.models.hf import DEFAULT_DRAFT, DRAFT_ASSETS, DRAFT_WEIGHTS, OUTPUT_TOKEN_IDS_FILE, chat_prompt_ids, load_model, load_pair
from spectr_gbv.probs import logits_to_probs
from helpers import greedy
from tiny_models import save_tiny_llama

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def restricted_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("restricted")
    target_dir = save_tiny_llama(root / "target", seed=1)
    draft_dir = save_tiny_llama(root / "draft", seed=2)
    (draft_dir / OUTPUT_TOKEN_IDS_FILE).write_text(json.dumps([1, 3, 4, 5, 6, 7, 8, 9, 10, 12]))
    return load_pair(str(target_dir), str(draft_dir), device="cpu")


def test_restricted_head_gives_a_proper_distribution_over_the_full_vocabulary(restricted_pair):
    _, draft, _ = restricted_pair
    logits = draft.start([3, 4]).score(torch.tensor([[5, 6]]))
    probs = logits_to_probs(logits, 1.0)
    allowed = torch.zeros(draft.vocab_size, dtype=torch.bool)
    allowed[[1, 3, 4, 5, 6, 7, 8, 9, 10, 12]] = True
    assert probs.shape[-1] == draft.vocab_size
    assert torch.allclose(probs.sum(-1), torch.ones(1, 3))
    assert (probs[..., ~allowed] == 0).all() and (probs[..., allowed] > 0).all()


@pytest.mark.parametrize("method", ["sd", "spectr", "gbv", "spectr_gbv"])
def test_a_restricted_draft_keeps_greedy_equality(restricted_pair, method):
    target, draft, _ = restricted_pair
    run = generate(target, draft, [3, 4, 5], method=method, num_drafts=3, draft_length=3, temperature=0, max_new_tokens=15)
    assert run.tokens == greedy(target, [3, 4, 5], 15)






def test_every_shipped_draft_fits_in_25_mb_together_and_the_previous_ones_are_int8():
    from spectr_gbv.models import weight_store
    from spectr_gbv.models.feature_draft import WEIGHTS_FILE
    from spectr_gbv.models.hf import FEATURE_DRAFT_ASSETS, FIRST_FEATURE_DRAFT_ASSETS, FIRST_FUSED_DRAFT_ASSETS

    assert sum(f.stat().st_size for f in DRAFT_ASSETS.rglob("*") if f.is_file()) <= 25 * 2**20
    for weights in (DRAFT_ASSETS / DRAFT_WEIGHTS, FIRST_FEATURE_DRAFT_ASSETS / WEIGHTS_FILE,
                    FIRST_FUSED_DRAFT_ASSETS / WEIGHTS_FILE, FEATURE_DRAFT_ASSETS / WEIGHTS_FILE):
        assert weight_store.is_int8(weights), weights  # the default too: int8 rows cost it 0.0003 of alpha


def test_the_shipped_draft_is_small_and_loads_as_an_ordinary_model():
    loaded = load_model(DEFAULT_DRAFT, device="cpu")
    assert type(loaded.model).__name__ == "LlamaForCausalLM"
    assert loaded.output_token_ids is not None and len(loaded.output_token_ids) == 8192



def test_the_default_pair_uses_the_feature_conditioned_draft_on_the_targets_features():
    from spectr_gbv.models.feature_draft import WEIGHTS_FILE
    from spectr_gbv.models.hf import FEATURE_DRAFT_ASSETS

    assert sum(f.stat().st_size for f in FEATURE_DRAFT_ASSETS.iterdir()) <= 25 * 2**20
    assert (FEATURE_DRAFT_ASSETS / WEIGHTS_FILE).is_file()
    target, draft, tokenizer = load_pair("default", device="cpu")
    assert draft.name.startswith("feature-conditioned draft") and draft.needs_features
    assert draft.vocab_size == target.vocab_size
    # it shares the target's embedding rather than carrying a copy, and beside an fp16-weight target it runs in
    # fbgemm fp16 weights too (models.hf._draft_in_fp16_weights: its step is memory-bound)
    assert draft.embedding.data_ptr() == target.model.get_input_embeddings().weight.data_ptr()
    if target.loaded.kernel is not None and target.loaded.kernel.kernel == "fp16-weights":
        assert draft.kernel == "fp16-weights"
    prompt = chat_prompt_ids(tokenizer, "Write a haiku about rain.")
    runs = [generate(target, draft, prompt, method="spectr_gbv", num_drafts=3, draft_length=4, temperature=0.7,
                     max_new_tokens=12, seed=7) for _ in range(2)]
    assert runs[0].tokens == runs[1].tokens and len(runs[0].tokens) >= 1
    for it in runs[0].iterations:  # proper distributions over the full vocabulary, zero off the head
        assert all(0 < p <= 1 for row in it.draft_token_probs for p in row)
    greedy_run = generate(target, draft, prompt, method="sd", draft_length=4, temperature=0, max_new_tokens=12)
    assert greedy_run.tokens == generate(target, None, prompt, method="ar", temperature=0, max_new_tokens=12).tokens


def test_the_layered_draft_stays_selectable_and_shares_the_tokenizer():
    target, draft, tokenizer = load_pair("default", DEFAULT_DRAFT, device="cpu")
    assert draft.name.startswith("distilled draft")
    assert draft.tokenizer.get_vocab() == target.tokenizer.get_vocab() and draft.vocab_size == target.vocab_size
    prompt = chat_prompt_ids(tokenizer, "Write a haiku about rain.")
    probs = logits_to_probs(draft.start(prompt).branch_logits(2), 0.7)
    assert torch.allclose(probs.sum(-1), torch.ones(2), atol=1e-5)


def test_the_app_offers_every_draft_of_the_default_target_sharing_one_target():
    from spectr_gbv.pairs import DEFAULT_KEY, FIRST_FEATURE_KEY, FIRST_FUSED_KEY, LAYERED_KEY, get_pair

    feature, first, layered = get_pair(DEFAULT_KEY), get_pair(FIRST_FEATURE_KEY), get_pair(LAYERED_KEY)
    fused = get_pair(FIRST_FUSED_KEY)
    assert feature.target is layered.target is first.target is fused.target  # loaded once
    assert fused.draft.feature_layers == feature.draft.feature_layers and fused.draft.head is not feature.draft.head
    assert getattr(feature.draft, "needs_features", False) and not getattr(layered.draft, "needs_features", False)
    assert first.draft.needs_features and first.draft.feature_layers == () and "last hidden states" in first.draft.name
