"""What the teaching pairs remember between runs: node laws (`replays.Recent`) and each context's
checked law (`FunctionModel`'s `context_key`). Remembering saves work only: a run's tokens are the
ones the same seed gives with nothing remembered."""

from __future__ import annotations

import pytest
import torch

from spectr_gbv import METHODS, generate
from spectr_gbv.models import FunctionModel
from spectr_gbv.pairs import TEACHING_LAWS, get_pair
from spectr_gbv.replays import Recent, remembered, remembering
from spectr_gbv.toy import WORDS, _target_probs, previous_word, toy_pair

pytestmark = pytest.mark.unit


def test_recent_forgets_the_least_recently_used_first():
    memory = Recent(2)
    memory["a"], memory["b"] = 1, 2
    assert memory.get("a") == 1  # "a" is now the more recent
    memory["c"] = 3
    assert (memory.get("a"), memory.get("b"), memory.get("c"), len(memory)) == (1, None, 3, 2)


def test_a_given_memory_keeps_answers_after_its_scope_and_a_new_one_does_not():
    memory, calls = Recent(8), []

    def ask():
        return remembered(lambda: "key", lambda: calls.append(1) or len(calls))

    for _ in range(2):
        with remembering(memory):
            assert ask() == 1
    with remembering():
        assert ask() == 2 and ask() == 2  # its own dict: remembered inside, from scratch
    assert ask() == 3  # outside any scope nothing is kept
    assert memory.get("key") == 1


def test_a_context_key_asks_the_function_once_per_key_and_gives_the_same_law():
    asked = []

    def probs(context):
        asked.append(context)
        return _target_probs(context)

    keyed = FunctionModel(probs, len(WORDS), context_key=previous_word)
    plain = FunctionModel(_target_probs, len(WORDS))
    contexts = [(0,), (1, 0), (2, 1, 0), (0, 1), ()]
    for context in contexts:
        assert torch.equal(keyed.next_token_probs(context), plain.next_token_probs(context))
    assert asked == [(0,), (0, 1), ()]  # contexts ending in the same word share one law


@pytest.mark.parametrize("method", [m for m, s in METHODS.items() if s.exact and s.multi_draft])
def test_the_apps_toy_pair_remembers_laws_and_decodes_the_tokens_of_a_fresh_pair(method):
    pair = get_pair("toy")
    assert pair.target.node_laws is TEACHING_LAWS
    fresh_target, fresh_draft = toy_pair()  # nothing remembered, nothing shared
    assert fresh_target.node_laws is None
    prompt = pair.encode("the cat")
    for seed in range(3):
        settings = dict(method=method, num_drafts=2, draft_length=4, temperature=0.7, max_new_tokens=24, seed=seed)
        remembered_run = generate(pair.target, pair.draft, prompt, **settings)
        fresh_run = generate(fresh_target, fresh_draft, prompt, **settings)
        assert remembered_run.tokens == fresh_run.tokens
        assert [it.expected_accepted for it in remembered_run.iterations] == \
            [it.expected_accepted for it in fresh_run.iterations]
