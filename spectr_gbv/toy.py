"""The Toy world: a small-vocabulary target/draft pair whose distributions can be shown in full.

An eight-word bigram world. The target's next-word distribution depends on the previous
word through a fixed table of preferences; the draft is a blurred copy (70 % target, 30 %
uniform), so it agrees often but not always, which is what makes verification visible.
"""

from __future__ import annotations

import torch

from .models import FunctionModel

WORDS = ["the", "cat", "dog", "sat", "ran", "on", "mat", "."]

# PREFERENCES[previous word] = words it is likely to be followed by (weight 6, 3, 1 in order).
PREFERENCES = {
    "the": ["cat", "dog", "mat"],
    "cat": ["sat", "ran", "."],
    "dog": ["ran", "sat", "."],
    "sat": ["on", ".", "the"],
    "ran": ["on", ".", "the"],
    "on": ["the", "mat", "dog"],
    "mat": [".", "on", "the"],
    ".": ["the", "the", "dog"],
}
DRAFT_TARGET_WEIGHT = 0.7


def _target_probs(context: tuple[int, ...]) -> torch.Tensor:
    weights = torch.full((len(WORDS),), 0.2, dtype=torch.float64)
    previous = WORDS[context[-1]] if context else "."
    for weight, word in zip((6.0, 3.0, 1.0), PREFERENCES[previous]):
        weights[WORDS.index(word)] += weight
    return weights / weights.sum()


def _draft_probs(context: tuple[int, ...]) -> torch.Tensor:
    uniform = torch.full((len(WORDS),), 1 / len(WORDS), dtype=torch.float64)
    return DRAFT_TARGET_WEIGHT * _target_probs(context) + (1 - DRAFT_TARGET_WEIGHT) * uniform


def constant(values):
    """A context-free law: the same distribution after every context (the two-token example's form)."""
    vector = torch.tensor(values, dtype=torch.float64)
    return lambda context: vector


def toy_pair() -> tuple[FunctionModel, FunctionModel]:
    """(target, draft) of the Toy world."""
    return (FunctionModel(_target_probs, len(WORDS), name="toy target", context_key=previous_word),
            FunctionModel(_draft_probs, len(WORDS), name="toy draft", context_key=previous_word))


def previous_word(context: tuple[int, ...]) -> int | None:
    """All of the context a bigram world's law depends on."""
    return context[-1] if context else None


def words_of(text: str, vocabulary: list[str], case=str.lower) -> list[str]:
    """The prompt as words of a tiny vocabulary, as a reader would split it: any case ("The cat"),
    and the full stop a word of its own ("the cat sat.")."""
    return [case(w) for w in text.replace(".", " . ").split()] if "." in vocabulary else [case(w) for w in text.split()]


def unknown_words(text: str, words: list[str], vocabulary: list[str]) -> list[str]:
    """The prompt's words that are not in the vocabulary, as the user typed them (`words`: as read)."""
    typed = words_of(text, vocabulary, case=str)
    return [raw for raw, word in zip(typed, words) if word not in vocabulary]


def encode(text: str) -> list[int]:
    """Words of the Toy world to ids; unknown words raise ValueError naming them."""
    words = words_of(text, WORDS)
    unknown = unknown_words(text, words, WORDS)
    if unknown:
        raise ValueError(f"unknown word(s) {unknown}; the Toy world knows: {' '.join(WORDS)}")
    return [WORDS.index(w) for w in words]


def decode(ids: list[int]) -> list[str]:
    return [WORDS[i] for i in ids]


# The GBV paper's two-token example (docs/algorithms.md §2.7; `bench.exact_table`): a context-free
# target q = (1/3, 2/3) and draft p = (2/3, 1/3). Small enough to see everything, and the
# instance on which the released SpecTr-GBV rule's bias is largest (TV about 0.11 at K = 1).
TWO_TOKEN_WORDS = ["A", "B"]
TWO_TOKEN_TARGET = (1 / 3, 2 / 3)
TWO_TOKEN_DRAFT = (2 / 3, 1 / 3)


def two_token_pair() -> tuple[FunctionModel, FunctionModel]:
    """(target, draft) of the two-token example; its words are A and B."""
    q = torch.tensor(TWO_TOKEN_TARGET, dtype=torch.float64)
    p = torch.tensor(TWO_TOKEN_DRAFT, dtype=torch.float64)
    return (FunctionModel(lambda context: q, 2, name="two-token target", context_key=no_context),
            FunctionModel(lambda context: p, 2, name="two-token draft", context_key=no_context))


def no_context(context: tuple[int, ...]) -> None:
    """A constant law depends on nothing of the context."""
    return None
