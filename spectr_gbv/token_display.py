"""What a token of a byte-level tokenizer shows on the page.

A byte-level BPE tokenizer (GPT-2's, SmolLM2's) can split one character over several tokens: an
emoji's four UTF-8 bytes are often two to four tokens, and each decoded alone is U+FFFD, "�". So:

* a run of consecutive tokens (an output, a race lane) is `spelled`: a character whose bytes span
  several tokens is drawn whole on the token that starts it, and the tokens after it show "";
* a token shown alone (a draft cell, a chart tick) that holds only part of a character shows its
  bytes, as Python writes them (" \\xf0\\x9f"), never "�".
"""

from __future__ import annotations

from typing import Callable

REPLACEMENT = "\ufffd"
MAX_TOKENS_A_CHARACTER = 4  # a UTF-8 character is at most 4 bytes, so at most 4 byte-level tokens


def spelled_by(decode: Callable[[list[int]], str]) -> Callable[[list[int]], list[str]]:
    """`spelled(ids)`: one display string per id of a run of consecutive tokens (module docstring)."""

    def spelled(ids: list[int]) -> list[str]:
        ids = list(ids)
        texts = [decode([i]) for i in ids]
        i = 0
        while i < len(ids):
            if REPLACEMENT in texts[i]:
                for end in range(i + 2, min(i + MAX_TOKENS_A_CHARACTER, len(ids)) + 1):
                    whole = decode(ids[i:end])
                    if REPLACEMENT not in whole:
                        texts[i:end] = [whole] + [""] * (end - i - 1)
                        i = end - 1
                        break
            i += 1
        return texts

    return spelled


def byte_level_alphabet() -> dict[str, int]:
    """The printable character GPT-2's byte-level BPE writes for each byte, mapped back to the byte."""
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    return {char: byte for byte, char in bytes_to_unicode().items()}


def token_texts_of(tokenizer) -> Callable[[list[int]], list[str]]:
    """`token_text(ids)`: one display string per id, each token on its own; a token holding part of a
    character shows its bytes (module docstring). Tokenizers that are not byte-level keep decode's text."""
    alphabet = byte_level_alphabet()

    def shown_alone(i: int) -> str:
        text = tokenizer.decode([i])
        if REPLACEMENT not in text:
            return text
        raw = tokenizer.convert_ids_to_tokens(i)
        if not isinstance(raw, str) or any(char not in alphabet for char in raw):
            return text
        return bytes(alphabet[char] for char in raw).decode("utf-8", errors="backslashreplace")

    return lambda ids: [shown_alone(i) for i in ids]
