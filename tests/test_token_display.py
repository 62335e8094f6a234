"""A character split over byte-level tokens is drawn whole, and a lone byte token shows its bytes, not "�"
(spectr_gbv/token_display.py), on a real byte-level BPE tokenizer: GPT-2's byte alphabet and no merges,
so every byte is one token and an emoji is four."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from components.render.text import output_text, provenance_html
from spectr_gbv.token_display import REPLACEMENT, spelled_by, token_texts_of

pytestmark = pytest.mark.unit

TEXT = "I like 🍎 and é!"


@pytest.fixture(scope="module")
def tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    vocabulary = {char: i for i, char in enumerate(bytes_to_unicode().values())}
    backend = Tokenizer(models.BPE(vocab=vocabulary, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(tokenizer_object=backend)


def test_an_output_spells_each_character_whole_on_the_token_that_starts_it(tokenizer):
    ids = tokenizer.encode(TEXT)
    assert len(ids) == len(TEXT.encode())  # one token a byte: the apple is four, é two
    alone = [tokenizer.decode([i]) for i in ids]
    assert alone.count(REPLACEMENT) == 6  # what the page drew before
    texts = spelled_by(tokenizer.decode)(ids)
    assert len(texts) == len(ids) and "".join(texts) == TEXT and REPLACEMENT not in "".join(texts)
    apple = texts.index("🍎")
    assert texts[apple + 1:apple + 4] == ["", "", ""]
    assert texts[texts.index("é") + 1] == ""


def test_a_lone_byte_token_shows_its_bytes(tokenizer):
    ids = tokenizer.encode("🍎")
    assert token_texts_of(tokenizer)(ids) == ["\\xf0", "\\x9f", "\\x8d", "\\x8e"]
    assert token_texts_of(tokenizer)(tokenizer.encode("a b")) == ["a", " ", "b"]  # whole characters as they are


def test_the_output_draws_a_character_whole_when_it_spans_two_iterations(tokenizer):
    ids = tokenizer.encode("A🍎")
    kinds = ["accepted"] * len(ids)
    iterations = [SimpleNamespace(index=0, emitted=ids[:3], token_kinds=kinds[:3]),
                  SimpleNamespace(index=1, emitted=ids[3:], token_kinds=kinds[3:])]
    drawn = provenance_html(SimpleNamespace(iterations=iterations), spelled_by(tokenizer.decode), legend=False)
    assert drawn.count('class="tok ') == len(ids) and "🍎" in drawn and REPLACEMENT not in drawn
    assert output_text(spelled_by(tokenizer.decode)(ids)) == "A🍎"
