"""The transformers path on CPU, without downloads.

Tiny random-weight Llama models are built from a config, saved to a temp folder and loaded
through the same `load_model` / `load_pair` code as real models. Checks: the cached
incremental sessions give the same distributions as a full recompute; at temperature 0
every method equals plain greedy decoding of the target; the first two tokens' empirical
law through the real-model path matches the exact law computed from the model
(chi-square, seeded); tokenizer mismatches and unknown models fail clearly; and the
offline default pair loads from the installed package and generates.
"""

from __future__ import annotations

import pytest
import torch

from spectr_gbv import METHODS, generate
from spectr_gbv.models.hf import chat_prompt_ids, load_model, load_pair, truncated_draft
from helpers import assert_first_two_tokens_follow_the_target_law, full_logits, greedy
from tiny_models import save_tiny_llama

ALL_METHODS = ["ar", *METHODS]


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny")
    return {
        "target": save_tiny_llama(root / "target", seed=1),
        "draft": save_tiny_llama(root / "draft", seed=2),
        "other_vocab": save_tiny_llama(root / "other", seed=3, shuffle_vocab=True),
        "small": save_tiny_llama(root / "small", vocab_size=6, seed=4, init_range=1.0),
        "small_draft": save_tiny_llama(root / "small_draft", vocab_size=6, seed=5, init_range=1.0),
    }


@pytest.fixture(scope="module")
def tiny_pair(tiny_dirs):
    target, draft, tokenizer = load_pair(str(tiny_dirs["target"]), str(tiny_dirs["draft"]), device="cpu")
    return target, draft


@pytest.mark.model
def test_cached_scoring_and_drafting_equal_a_full_recompute(tiny_pair):
    target, _ = tiny_pair
    prompt = [3, 4, 5, 6]
    session = target.start(prompt)
    blocks = torch.tensor([[7, 8, 9], [7, 10, 11], [12, 13, 14]])
    scored = session.score(blocks)  # [3, 4, V]
    for k, block in enumerate(blocks.tolist()):
        expected = full_logits(target, prompt + block)[len(prompt) - 1 :]
        assert torch.allclose(scored[k], expected, atol=1e-4)
    # Commit draft 1's first token plus a correction token; the next scores continue from there.
    session.commit(1, [7, 15])
    context = prompt + [7, 15]
    scored = session.score(torch.tensor([[16, 17], [18, 19]]))
    for k, block in enumerate([[16, 17], [18, 19]]):
        assert torch.allclose(scored[k], full_logits(target, context + block)[len(context) - 1 :], atol=1e-4)
    # A winning draft whose trie nodes are not the first ones (its entries are moved into place).
    session.commit(1, [18, 19, 4])
    context += [18, 19, 4]
    blocks = torch.tensor([[5, 6, 7], [5, 8, 9], [10, 11, 12]])
    scored = session.score(blocks)
    for k, block in enumerate(blocks.tolist()):
        assert torch.allclose(scored[k], full_logits(target, context + block)[len(context) - 1 :], atol=1e-4)
    session.commit(1, [5, 8, 13])
    context += [5, 8, 13]
    scored = session.score(torch.tensor([[16, 17]]))
    assert torch.allclose(scored[0], full_logits(target, context + [16, 17])[len(context) - 1 :], atol=1e-4)
    session.commit(0, [16, 17])
    context += [16, 17]
    # Drafting: branch logits and one extension step per row.
    first = session.branch_logits(2)
    assert torch.allclose(first[1], full_logits(target, context)[-1], atol=1e-4)
    step = session.extend_branches(torch.tensor([8, 9]))
    assert torch.allclose(step[1], full_logits(target, context + [9])[-1], atol=1e-4)


@pytest.mark.model
@pytest.mark.parametrize("method", ALL_METHODS)
def test_temperature_zero_equals_greedy_target_decoding(tiny_pair, method):
    target, draft = tiny_pair
    run = generate(target, draft, [3, 4, 5], method=method, num_drafts=3, draft_length=4, temperature=0, max_new_tokens=20)
    assert run.tokens == greedy(target, [3, 4, 5], 20)


@pytest.mark.statistical
def test_first_two_tokens_follow_the_exact_target_law(tiny_dirs):
    target, draft, _ = load_pair(str(tiny_dirs["small"]), str(tiny_dirs["small_draft"]), device="cpu")
    assert_first_two_tokens_follow_the_target_law(target, draft)


@pytest.mark.model
def test_mismatched_tokenizers_are_a_clear_error_naming_both(tiny_dirs):
    with pytest.raises(ValueError, match=r"tokenizers of target .*target.* and draft .*other"):
        load_pair(str(tiny_dirs["target"]), str(tiny_dirs["other_vocab"]), device="cpu")


@pytest.mark.model
def test_unknown_model_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="could not load model"):
        load_model(str(tmp_path / "no-such-model"), device="cpu")


@pytest.mark.model
def test_truncated_draft_shares_weights_and_leaves_the_target_intact(tiny_dirs):
    loaded = load_model(str(tiny_dirs["target"]), device="cpu")
    draft = truncated_draft(loaded, 1)
    assert len(draft.model.model.layers) == 1 and len(loaded.model.model.layers) == 3
    assert draft.model.lm_head.weight is loaded.model.lm_head.weight


@pytest.mark.model
def test_offline_default_pair_loads_and_generates():
    target, draft, tokenizer = load_pair("default", device="cpu")
    assert target.vocab_size == draft.vocab_size == len(tokenizer) == 49152
    prompt = chat_prompt_ids(tokenizer, "Name a colour.")
    run = generate(target, draft, prompt, method="spectr_gbv", num_drafts=2, draft_length=3, temperature=0.7, max_new_tokens=8, seed=0)
    assert 1 <= len(run.tokens) <= 8
    assert isinstance(tokenizer.decode(run.tokens), str)
    greedy_run = generate(target, draft, prompt, method="sd", draft_length=3, temperature=0, max_new_tokens=6)
    ar_run = generate(target, None, prompt, method="ar", temperature=0, max_new_tokens=6)
    assert greedy_run.tokens == ar_run.tokens


@pytest.mark.model
def test_a_prompt_longer_than_the_context_is_a_clear_error(tiny_pair):
    target, draft = tiny_pair  # max_position_embeddings = 256
    with pytest.raises(ValueError, match="prompt too long"):
        generate(target, draft, [3] * 250, method="spectr_gbv", max_new_tokens=10)
