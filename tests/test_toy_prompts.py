"""The teaching pairs read prompts as a reader writes them: any case, the full stop its own word."""

from __future__ import annotations

import pytest

from spectr_gbv.pairs import get_pair
from spectr_gbv.toy import WORDS, encode

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("text, words", [
    ("the cat", ["the", "cat"]),
    ("The cat", ["the", "cat"]),
    ("THE CAT SAT.", ["the", "cat", "sat", "."]),
    ("the cat sat . the dog", ["the", "cat", "sat", ".", "the", "dog"]),
    ("  the   mat.", ["the", "mat", "."]),
])
def test_the_toy_world_reads_any_case_and_a_trailing_full_stop(text, words):
    assert encode(text) == [WORDS.index(w) for w in words]


def test_unknown_words_are_named_as_the_user_typed_them():
    with pytest.raises(ValueError, match=r"unknown word\(s\) \['bird'\]"):
        encode("The bird")
    with pytest.raises(ValueError, match=r"unknown word\(s\) \['Bird'\]"):
        encode("THE Bird")
    with pytest.raises(ValueError, match=r"unknown word\(s\) \['Write', 'Python', 'function'\]"):
        get_pair("two-token").encode("Write a Python function")


def test_the_two_token_example_reads_either_case():
    pair = get_pair("two-token")
    assert pair.encode("a B a") == pair.encode("A B A") == [0, 1, 0]
    with pytest.raises(ValueError, match="knows: A B"):
        pair.encode("A C")
