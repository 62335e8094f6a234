"""Tiny random-weight Llama-style models with word-level tokenizers, saved like real ones."""

from __future__ import annotations

from pathlib import Path

import torch


def save_tiny_llama(folder: Path, vocab_size: int = 24, seed: int = 0, shuffle_vocab: bool = False, init_range: float = 0.2) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    words = ["<unk>", "</s>"] + [f"w{i}" for i in range(vocab_size - 2)]
    if shuffle_vocab:
        words = words[:2] + list(reversed(words[2:]))
    backend = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", eos_token="</s>")
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256, initializer_range=init_range, eos_token_id=1,
        bos_token_id=None, pad_token_id=None, tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def draft_steps(draft, prompt: list[int], features, tokens):
    """A feature draft's logits over four steps after `prompt` given the target's `features`: the
    first branch step (three branches), then three extensions by `tokens`, stacked [4, 3, V]."""
    import torch

    session = draft.start(prompt)
    session.add_features(features)
    return torch.stack([session.branch_logits(3)] + [session.extend_branches(tokens) for _ in range(3)])
