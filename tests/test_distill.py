"""The draft-distillation pipeline (spectr_gbv/training/distill.py), on a tiny model.

The shipped draft's training takes most of an hour, so the suite checks the pieces it is
made of: the prompts, the teacher data taken from generate's own forwards (left-padded
batches must give the same distributions as one unpadded forward), the hidden states of the
reused layers from a forward cut short, and that training lowers the loss on held-out data.
"""

from __future__ import annotations

import pytest
import torch

from spectr_gbv.training import distill
from spectr_gbv.models import hf
from spectr_gbv.models.hf import load_model
from tiny_models import save_tiny_llama

pytestmark = pytest.mark.model


def test_prompts_are_seeded_cycle_the_four_kinds_and_are_varied():
    prompts = distill.make_prompts(distill.SEQUENCES, seed=0)
    assert prompts == distill.make_prompts(distill.SEQUENCES, seed=0)
    assert prompts != distill.make_prompts(distill.SEQUENCES, seed=1)
    assert [kind for kind, _ in prompts[:8]] == ["code", "math", "story", "instructions"] * 2
    first_round = {text for _, text in prompts}
    assert len(first_round) > 1500
    assert not first_round & distill.HELD_OUT_TEXTS


def test_later_rounds_add_prompts_and_the_measured_prompts_are_dropped_from_training():
    second = distill.make_prompts(distill.SEQUENCES, seed=1)
    texts = {text for _, text in second}
    assert texts - {text for _, text in distill.make_prompts(distill.SEQUENCES, seed=0)}  # new prompts
    assert texts & distill.HELD_OUT_TEXTS  # round 1 writes the leap-year bench prompt by chance
    samples = [{"row": i} for i in range(len(second))]  # stand-ins, aligned with the prompts
    kept = distill.drop_held_out(second, samples)
    kept_texts = {second[s["row"]][1] for s in kept}
    assert not kept_texts & distill.HELD_OUT_TEXTS
    assert len(kept) == len(second) - sum(text in distill.HELD_OUT_TEXTS for _, text in second)


def tiny_target(tmp_path):
    model = load_model(str(save_tiny_llama(tmp_path / "target", vocab_size=80, seed=3, init_range=0.5)), device="cpu",
                       dtype=torch.float32).model
    for p in model.parameters():
        p.requires_grad_(False)
    return model


def test_teacher_data_from_a_padded_batch_equals_an_unpadded_forward(tmp_path):
    target = tiny_target(tmp_path)
    tokenizer = load_model(str(tmp_path / "target"), device="cpu").tokenizer
    samples = distill.sample_continuations(target, tokenizer, ["w3 w4", "w5 w6 w7 w8 w9", "w10"], seed=0, batch=3)
    assert [s["prompt_length"] for s in samples] == [2, 5, 1]
    for s in samples:
        ids, n = s["ids"], s["prompt_length"]
        with torch.inference_mode():
            out = target(torch.tensor([ids]), output_hidden_states=True)
        probs = torch.softmax(out.logits[0, n - 1 : -1].float(), -1)  # predicts every continuation token
        assert s["top_ids"].shape == (len(ids) - n, distill.TEACHER_TOP)
        assert torch.allclose(probs.gather(-1, s["top_ids"]), s["top_probs"], atol=1e-5)
        assert torch.equal(s["top_ids"][:, 0], probs.argmax(-1))
        hidden = distill.reused_hidden_states(target, ids[:-1], reused=2)
        assert torch.allclose(hidden, out.hidden_states[2][0, :-1], rtol=1e-4, atol=1e-4)


def test_by_default_the_new_layers_start_as_the_target_layers_after_the_reused_ones(tmp_path):
    target = tiny_target(tmp_path)
    draft = distill.DraftHead(target, reused=1, new_layers=2)
    for j in range(2):
        copied = dict(target.model.layers[1 + j].named_parameters())
        for name, parameter in draft.layers[j].named_parameters():
            assert torch.equal(parameter, copied[name]) and parameter.requires_grad
    assert draft.init_layer == 2  # recorded in draft.json
    assert draft.layers[1].self_attn.layer_idx == 2  # its place in the assembled draft


def test_training_the_new_layer_lowers_the_held_out_loss(tmp_path):
    target = tiny_target(tmp_path)
    tokenizer = load_model(str(tmp_path / "target"), device="cpu").tokenizer
    prompts = [f"w{i} w{i + 1}" for i in range(2, 40)]
    samples = distill.sample_continuations(target, tokenizer, prompts, seed=0, batch=16)
    records = distill.teacher_records(target, samples, reused=1)
    head = target.get_output_embeddings().weight.detach()
    token_index = torch.arange(head.shape[0])
    draft = distill.DraftHead(target, init_layer=2, reused=1, new_layers=1)  # skips layer 1: not the target itself
    with torch.no_grad():
        before = sum(distill.record_loss(draft, head, r, token_index).item() for r in records[-6:]) / 6
    _, validation = distill.train(draft, head, records[:-6], token_index, epochs=3, seed=0, lr=3e-3,
                                  validation=records[-6:])
    assert validation[-1] < before


@pytest.mark.parametrize("new_layers, dtype", [(1, torch.float32), (2, torch.float16)])
def test_the_assembled_draft_computes_what_was_trained(tmp_path, monkeypatch, new_layers, dtype):
    """distill.save + models.hf.default_draft_dir: the ordinary model folder they make gives
    the same restricted distribution as the DraftHead that training optimised."""
    target_folder = hf.default_target_dir()
    target = load_model("default", device="cpu", dtype=torch.float32).model
    torch.manual_seed(0)
    draft = distill.DraftHead(target, init_layer=29, reused=6, new_layers=new_layers)
    with torch.no_grad():
        for p in draft.parameters():
            p.add_(0.01 * torch.randn_like(p))  # trained weights differ from the target's
            p.copy_(p.to(dtype).float())  # what a float16 copy keeps
    output_ids = sorted(set(range(0, 20000, 3)) | {2})
    assets = tmp_path / "assets"
    distill.save(draft, output_ids, assets, {"reused_layers": 6, "new_layers": new_layers, "output_tokens": len(output_ids)},
                 dtype)
    monkeypatch.setattr(hf, "DRAFT_ASSETS", assets)
    monkeypatch.setattr(hf, "cache_dir", lambda: tmp_path / "cache")
    monkeypatch.setattr(hf, "default_target_dir", lambda: target_folder)
    loaded = load_model(hf.DEFAULT_DRAFT, device="cpu", dtype=torch.float32)
    assert loaded.model.config.num_hidden_layers == 6 + new_layers and loaded.output_token_ids == output_ids
    ids = [1, 504, 3458, 314, 260, 1345, 30, 2]
    head = target.get_output_embeddings().weight[output_ids]
    with torch.no_grad():
        trained = draft(distill.reused_hidden_states(target, ids, 6).unsqueeze(0), head)[0]
        assembled = torch.log_softmax(loaded.model(torch.tensor([ids])).logits[0][:, output_ids].float(), -1)
    assert torch.allclose(trained, assembled, atol=1e-4)
