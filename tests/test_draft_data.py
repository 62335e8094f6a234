"""The draft's training data at scale (spectr_gbv.training.sharegpt, draft_data): the truncated ShareGPT
file read record by record, the split by conversation, held-out prompts never planned nor trained on,
and a sampled chunk's features and teacher distributions equal a full forward of the target."""

from __future__ import annotations

import io
import json
from collections import Counter

import pytest
import torch

from spectr_gbv.training import draft_data, feature_distill, sharegpt
from spectr_gbv.training.distill import HELD_OUT_TEXTS
from spectr_gbv.training.sharegpt import Conversation
from tiny_models import save_tiny_llama

pytestmark = pytest.mark.model


def record(id_, prompt, reply="ok", first="human"):
    return {"id": id_, "conversations": [{"from": first, "value": prompt}, {"from": "gpt", "value": reply}]}


def test_a_truncated_file_gives_every_complete_record_and_stops_at_the_cut():
    records = [record(f"c{i}_0", f"question {i}?") for i in range(3)]
    text = json.dumps(records, indent=1)
    cut = text[: text.rindex('"question 2?"')]  # the third record is cut inside
    assert [r["id"] for r in sharegpt.iter_records(io.StringIO(cut))] == ["c0_0", "c1_0"]
    assert [r["id"] for r in sharegpt.iter_records(io.BytesIO(text.encode()))] == ["c0_0", "c1_0", "c2_0"]


def test_first_human_turns_deduplicated_and_mostly_ascii():
    records = [record("a_0", "How do I sort a list?"), record("b_0", "how do I   sort a LIST?"),  # a duplicate
               record("c_0", "你好，请介绍一下你自己。"), record("d_0", "Hi", ), record("e_0", "Write a poem.", first="gpt"),
               record("f_0", "Explain recursion with an example.")]
    kept = list(sharegpt.conversations(records))
    assert [c.id for c in kept] == ["a_0", "f_0"]
    assert kept[0].reply == "ok"


def test_the_split_keeps_every_piece_of_a_conversation_on_one_side():
    pieces = [Conversation(f"conv{i}_{j}", f"prompt {i} {j}", "") for i in range(400) for j in range(3)]
    train, held = sharegpt.split(pieces)
    held_ids = {c.conversation_id for c in held}
    assert not held_ids & {c.conversation_id for c in train}
    assert all(Counter(c.conversation_id for c in held)[cid] == 3 for cid in held_ids)
    assert 0.02 < len(held_ids) / 400 < 0.09  # one conversation in HELD_OUT_EVERY = 20


class WordTokenizer:
    """Enough of a tokenizer for the plan: no chat template, one id per word."""
    chat_template = None

    def __call__(self, text, **kwargs):
        return {"input_ids": [hash(w) % 97 for w in text.split()]}


def test_the_plan_holds_no_held_out_conversation_nor_measured_prompt(monkeypatch):
    pieces = [Conversation(f"conv{i}_0", f"Tell me about topic number {i}.", "") for i in range(300)]
    measured = next(iter(HELD_OUT_TEXTS))
    pieces.append(Conversation("measured_0", measured, ""))
    monkeypatch.setattr(sharegpt, "load_conversations", lambda: pieces)
    plan = draft_data.prompt_plan(WordTokenizer(), seed=0)
    held = {c.conversation_id for c in sharegpt.split(pieces)[1]}
    assert held and not held & {Conversation(p.key, "", "").conversation_id for p in plan if p.source == "sharegpt"}
    assert measured not in {p.text for p in plan}
    sources = [p.source for p in plan[:40]]
    assert sources[:4] == ["sharegpt", "sharegpt", "sharegpt", "template"]  # three ShareGPT prompts to one template
    assert plan == draft_data.prompt_plan(WordTokenizer(), seed=0)  # the plan is fixed by its seed
    assert plan != draft_data.prompt_plan(WordTokenizer(), seed=1)


def test_training_refuses_a_held_out_conversation(tmp_path):
    held = next(f"x{i}_0" for i in range(1000) if sharegpt.is_held_out(f"x{i}"))
    sample = {"source": "sharegpt-heldout", "key": held, "prompt_text": "anything"}
    assert not draft_data.is_trainable(sample)
    assert not draft_data.is_trainable({"source": "template", "key": "t", "prompt_text": next(iter(HELD_OUT_TEXTS))})
    path = tmp_path / "chunk_0000.pt"
    torch.save([sample | {"features": torch.zeros(3, 4, 2), "top_ids": torch.zeros(1, 2, dtype=torch.int32),
                          "top_probs": torch.ones(1, 2, dtype=torch.float16) / 2}], path)
    with pytest.raises(SystemExit, match="held-out"):
        feature_distill.load_chunks([str(path)], fused=True)
    # validation reads the held-out chunks it is given; only training refuses them
    assert [s["key"] for s in feature_distill.load_chunks([str(path)], fused=True, training=False)] == [held]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    from spectr_gbv.models.hf import load_model

    return load_model(str(save_tiny_llama(tmp_path_factory.mktemp("data") / "target", seed=1)), device="cpu",
                      dtype=torch.float32)


def test_a_sampled_chunk_holds_the_targets_layer_outputs_and_distributions(tiny, monkeypatch):
    monkeypatch.setattr(draft_data, "CONTINUATION_TOKENS", 6)
    monkeypatch.setattr(draft_data, "BATCH", 2)
    monkeypatch.setattr(draft_data, "TEACHER_TOP", 5)
    prompts = [draft_data.PlannedPrompt("template", f"t{i}", "story", text)
               for i, text in enumerate(["w1 w2 w3", "w4 w5", "w6 w7 w8 w9 w10", "w3"])]
    records = draft_data.sample_chunk(tiny.model, tiny.tokenizer, prompts, seed=3, dtype_name="float32", layers=(0, 1))
    assert [r["key"] for r in records] == ["t0", "t1", "t2", "t3"]  # the plan's order, whatever the batching
    for r in records:
        ids = torch.tensor([r["ids"]])
        with torch.inference_mode():
            out = tiny.model(ids, output_hidden_states=True)
        states = out.hidden_states
        expected = torch.stack([states[1][0], states[2][0], states[-1][0]], dim=1)[:-1]  # layers 0, 1 and the final norm
        assert r["features"].shape == expected.shape and r["features"].dtype == torch.float16
        torch.testing.assert_close(r["features"].float(), expected, atol=2e-3, rtol=2e-3)
        start = r["prompt_length"]
        probs = torch.softmax(out.logits[0, start - 1 : -1].float(), -1)
        torch.testing.assert_close(probs.gather(-1, r["top_ids"].long()), r["top_probs"].float(), atol=1e-3, rtol=1e-3)
        trained = feature_distill.from_chunk(r, fused=True)
        assert trained["features"].shape == (len(r["ids"]) - 1, 2 * tiny.model.config.hidden_size)


def test_chunks_are_written_whole_and_a_run_skips_the_ones_there(tmp_path):
    path = tmp_path / "sampled" / "chunk_0007.pt"
    draft_data.save_atomically([{"ids": [1, 2]}], path)
    assert torch.load(path) == [{"ids": [1, 2]}] and not path.with_suffix(".partial").exists()
    assert [draft_data.chunk_kernel(i) for i in range(8)] == ["bfloat16"] * 3 + ["float32"] + ["bfloat16"] * 3 + ["fp16-weights"]


def test_the_report_counts_what_the_chunks_hold_and_names_the_licence(tmp_path):
    rows = [{"source": "sharegpt", "dtype": "bfloat16", "top_ids": torch.zeros(5, 2)},
            {"source": "template", "dtype": "float32", "top_ids": torch.zeros(7, 2)}]
    draft_data.save_atomically(rows, tmp_path / "sampled" / "chunk_0000.pt")
    text = draft_data.report(tmp_path)
    assert "| sampled | 1 | 2 | 12 | sharegpt 1, template 1 | bfloat16 1, float32 1 |" in text
    assert "no clear licence" in text and "OpenAI" in text
