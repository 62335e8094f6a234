"""The feature-conditioned draft: training's unrolled feedback equals what inference drafts,
the session consumes the features the target hands over, and bad files are refused."""

from __future__ import annotations

import dataclasses
import json
from types import SimpleNamespace

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from spectr_gbv.models.branch_cache import INITIAL_CAPACITY
from spectr_gbv.models.feature_draft import (
    FeatureDraftHead,
    FeatureDraftModel,
    FeatureDraftShape,
    load_feature_draft_head,
    save_feature_draft,
    tokenizer_fingerprint,
)
from tiny_models import draft_steps

pytestmark = pytest.mark.model

SHAPE = FeatureDraftShape(hidden_size=32, num_heads=4, num_kv_heads=2, head_dim=8, intermediate_size=48,
                          rope_theta=10000.0, rms_norm_eps=1e-6)
VOCAB = 40
FUSED = dataclasses.replace(SHAPE, feature_layers=(0, 1, 2))  # EAGLE-3: three target layers' outputs fused
SHAPES = pytest.mark.parametrize("shape", [SHAPE, FUSED], ids=["final-norm feature", "three fused layers"])


def feature_width(shape: FeatureDraftShape) -> int:
    return shape.hidden_size * max(len(shape.feature_layers), 1)


def tiny_draft(seed: int = 0, shape: FeatureDraftShape = SHAPE) -> tuple[FeatureDraftHead, FeatureDraftModel]:
    torch.manual_seed(seed)
    head = FeatureDraftHead(shape)
    with torch.no_grad():
        for p in head.parameters():
            p.add_(0.05 * torch.randn_like(p))  # norms away from 1, so a wrong norm shows
    embedding = torch.randn(VOCAB, SHAPE.hidden_size)
    output = torch.randn(VOCAB, SHAPE.hidden_size)
    model = FeatureDraftModel(head, embedding, output, list(range(0, VOCAB, 2)), VOCAB, None, "tiny feature draft")
    return head, model


@SHAPES
def test_unrolled_training_equals_inference_drafting(shape):
    head, model = tiny_draft(shape=shape)
    torch.manual_seed(1)
    length, context = 14, 7
    tokens = torch.randint(0, VOCAB, (length,))
    features = torch.randn(length, feature_width(shape))
    # training view: entries t = 0..length-2 with f_t and token t+1
    with torch.no_grad():
        for start in (0, 3):
            unrolled = head.unrolled(features[:-1], model.embedding[tokens[1:]], 3, start)
            session = model.start(tokens[:context].tolist())
            session.add_features(features[: context - 1])
            first = session.branch_logits(2)  # entry context-2: depth 1
            g1 = unrolled[0][context - 2 - start]
            expected = torch.full((VOCAB,), float("-inf"))
            expected[model.output_token_ids] = g1 @ model.output_head.T
            torch.testing.assert_close(first[0], expected)
            # depth 2 at position context-1 reads token `context`; row 1 drafts another token
            second = session.extend_branches(torch.tensor([tokens[context].item(), (tokens[context].item() + 1) % VOCAB]))
            g2 = unrolled[1][context - 1 - start]
            torch.testing.assert_close(second[0, model.output_token_ids], g2 @ model.output_head.T)
            assert not torch.allclose(second[1, model.output_token_ids], second[0, model.output_token_ids])
            third = session.extend_branches(torch.tensor([tokens[context + 1].item(), 0]))
            g3 = unrolled[2][context - start]
            torch.testing.assert_close(third[0, model.output_token_ids], g3 @ model.output_head.T, atol=1e-5, rtol=1e-5)


@SHAPES
def test_next_iteration_uses_the_committed_true_features(shape):
    head, model = tiny_draft(3, shape)
    torch.manual_seed(4)
    tokens = torch.randint(0, VOCAB, (16,))
    features = torch.randn(16, feature_width(shape))
    session = model.start(tokens[:5].tolist())
    session.add_features(features[:4])
    session.branch_logits(3)
    session.extend_branches(torch.tensor([1, 2, 3]))
    session.commit(1, tokens[5:8].tolist())  # three tokens emitted; the target hands over their features but the last
    session.add_features(features[4:7])
    logits = session.branch_logits(1)
    with torch.no_grad():
        g = head.unrolled(features[:15], model.embedding[tokens[1:16]], 1)[0][6]
    torch.testing.assert_close(logits[0, model.output_token_ids], g @ model.output_head.T)


def reference_logits(head, model, features, tokens, drafted):
    """From scratch (the training's unrolled feedback over the whole sequence, no cache): the
    logits of the draft's next token after the committed `tokens` and one branch's `drafted` tokens."""
    newest, depth = len(tokens) - 2, len(drafted) + 1  # the newest committed entry; the depth drafted next
    sequence = tokens + drafted
    # the true entries past the newest committed one are masked out at this depth: their features do not matter
    padded = torch.cat([features[: newest + 1], features.new_zeros(len(drafted), features.shape[1])])
    with torch.no_grad():
        g = head.unrolled(padded, model.embedding[torch.tensor(sequence[1:])], depth, start=newest)[depth - 1][depth - 1]
    return model.logits(g)


@SHAPES
def test_drafts_over_many_iterations_equal_a_recompute_from_scratch(shape):
    """The session's preallocated cache (committed entries written at their positions, each
    branch's drafted entries after them in its own row, dropped at commit by the length alone)
    drafts what the head computes on the whole sequence from scratch: for K = 1, 2 and 4
    branches of different tokens, commits of 1 to 6 tokens, past the cache's first capacity
    and with K = 4 first asked for only then (the cache grows in length and in rows)."""
    head, model = tiny_draft(5, shape)
    generator = torch.Generator().manual_seed(6)
    features = torch.randn(200, feature_width(shape), generator=generator)
    tokens = torch.randint(0, VOCAB, (6,), generator=generator).tolist()
    session = model.start(tokens)
    session.add_features(features[: len(tokens) - 1])
    for iteration in range(26):
        if iteration == 18:  # the cache has grown past its first capacity; 4 rows come only now
            assert session.kv.keys.shape[:3] == (2, shape.num_kv_heads, 2 * INITIAL_CAPACITY)
        rows = (1, 2, 4)[iteration % 3] if iteration >= 18 else (1, 2)[iteration % 2]
        drafted = [[] for _ in range(rows)]
        logits = session.branch_logits(rows)
        for depth in range(iteration % 5 + 1):
            for row in range(rows):
                torch.testing.assert_close(logits[row], reference_logits(head, model, features, tokens, drafted[row]),
                                           atol=1e-5, rtol=1e-5)
            step = torch.randint(0, VOCAB, (rows,), generator=generator)
            for row in range(rows):
                drafted[row].append(int(step[row]))
            logits = session.extend_branches(step)
        # emitted: some of a branch's drafted tokens and a correction, or tokens never drafted
        count = iteration % 6 + 1
        emitted = (drafted[-1] + [iteration % VOCAB] * count)[:count] if iteration % 2 else \
            torch.randint(0, VOCAB, (count,), generator=generator).tolist()
        session.commit(rows - 1, emitted)
        session.add_features(features[len(tokens) - 1 : len(tokens) - 1 + count])
        tokens += emitted
    assert session.kv.keys.shape[0] == 4


class CopiedSizes(TorchDispatchMode):
    """Every op dispatched that is not a view (a view moves no memory) nor the attention itself
    (it reads the keys by nature), with the shapes of the tensors it reads and writes."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view and "scaled_dot_product" not in str(func):
            shapes = [tuple(t.shape) for t in tree_flatten((args, kwargs, out))[0] if isinstance(t, torch.Tensor)]
            self.ops.append((str(func), shapes))
        return out


@pytest.mark.parametrize("rows", [1, 3])
def test_a_drafting_step_moves_no_memory_that_grows_with_the_context(rows):
    """A drafting step (extend_branches) reads the committed entries in place: apart from the
    attention reading them, every op it dispatches reads and writes tensors of the same sizes at
    20 committed tokens as at 200 (a copy or concatenation of the committed cache would not)."""
    _, model = tiny_draft()
    steps = []
    for length in (20, 200):
        session = model.start([t % VOCAB for t in range(length)])
        session.add_features(torch.randn(length - 1, SHAPE.hidden_size))
        session.branch_logits(rows)
        session.extend_branches(torch.arange(rows))
        with CopiedSizes() as recorded:
            session.extend_branches(torch.arange(rows) + 1)
        steps.append(recorded.ops)
    assert steps[0] == steps[1]
    assert not any("cat" in op and any(19 in shape or 199 in shape for shape in shapes) for op, shapes in steps[1])


def test_drafting_without_the_targets_features_is_an_error():
    _, model = tiny_draft()
    session = model.start([1, 2, 3])
    with pytest.raises(RuntimeError, match="needs the target's features"):
        session.branch_logits(1)


class FakeTokenizer:
    def __init__(self, size: int):
        self.vocab = {f"t{i}": i for i in range(size)}
        self.eos_token_id, self.bos_token_id = 1, 0

    def get_vocab(self):
        return dict(self.vocab)

    def __len__(self):
        return len(self.vocab)


def _target_config(hidden=SHAPE.hidden_size):
    return SimpleNamespace(hidden_size=hidden, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                           intermediate_size=48, rope_parameters={"rope_theta": 10000.0}, rms_norm_eps=1e-6)


def _saved(tmp_path, tokenizer):
    head, _ = tiny_draft()
    meta = {"hidden_size": SHAPE.hidden_size, "vocab_size": len(tokenizer), "tokenizer": tokenizer_fingerprint(tokenizer)}
    save_feature_draft(head, tmp_path, meta, dtype=torch.float32)
    return head


def test_a_saved_head_loads_back_exactly(tmp_path):
    tokenizer = FakeTokenizer(VOCAB)
    head = _saved(tmp_path, tokenizer)
    loaded, _ = load_feature_draft_head(tmp_path, _target_config(), tokenizer, "tiny")
    for key, value in head.state_dict().items():
        torch.testing.assert_close(loaded.state_dict()[key], value)


@pytest.mark.parametrize("change, words", [
    ("hidden", "hidden size 32 (draft) vs 64 (target)"),
    ("vocab", "vocabulary size"),
    ("tokenizer", "tokenizer"),
])
def test_a_head_for_another_target_is_refused_naming_both(tmp_path, change, words):
    tokenizer = FakeTokenizer(VOCAB)
    _saved(tmp_path, tokenizer)
    config, other = _target_config(), tokenizer
    if change == "hidden":
        config = _target_config(64)
    elif change == "vocab":
        other = FakeTokenizer(VOCAB + 1)
    else:
        other = FakeTokenizer(VOCAB)
        other.vocab = {f"u{i}": i for i in range(VOCAB)}
    with pytest.raises(ValueError, match="does not fit target 'the target'") as info:
        load_feature_draft_head(tmp_path, config, other, "the target")
    assert words in str(info.value)


def test_missing_or_truncated_files_say_how_to_rebuild(tmp_path):
    tokenizer = FakeTokenizer(VOCAB)
    with pytest.raises(ValueError, match="missing.*python -m spectr_gbv.training.feature_distill"):
        load_feature_draft_head(tmp_path, _target_config(), tokenizer, "t")
    _saved(tmp_path, tokenizer)
    weights = tmp_path / "feature_draft.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with pytest.raises(ValueError, match="unreadable or truncated.*python -m spectr_gbv.training.feature_distill"):
        load_feature_draft_head(tmp_path, _target_config(), tokenizer, "t")


def test_meta_without_a_tensor_is_refused(tmp_path):
    from safetensors.torch import load_file, save_file

    tokenizer = FakeTokenizer(VOCAB)
    _saved(tmp_path, tokenizer)
    weights = tmp_path / "feature_draft.safetensors"
    tensors = load_file(str(weights))
    tensors.pop("fc.weight")
    save_file(tensors, str(weights))
    with pytest.raises(ValueError, match="wrong tensors.*fc.weight"):
        load_feature_draft_head(tmp_path, _target_config(), tokenizer, "t")
    assert json.loads((tmp_path / "feature_draft.json").read_text())["hidden_size"] == SHAPE.hidden_size


def test_a_fused_head_reads_the_targets_layer_outputs_from_the_scoring_forward(tmp_path):
    """On a real (tiny) transformers target: the features the engine hands a fused head are the
    outputs of its layers, as a full forward computes them, position by position; and decoding
    with it stays exact (greedy speculative decoding equals greedy AR)."""
    from spectr_gbv import generate
    from spectr_gbv.models.hf import HFModel, load_model
    from helpers import recording_fused_draft
    from tiny_models import save_tiny_llama

    loaded = load_model(str(save_tiny_llama(tmp_path / "target", seed=1)), device="cpu", dtype=torch.float32)
    target = HFModel(loaded)
    config = loaded.model.config
    draft, handed = recording_fused_draft(loaded.model)
    prompt = [3, 4, 5, 6]
    run = generate(target, draft, prompt, method="sd", draft_length=3, temperature=0, max_new_tokens=10)
    assert run.tokens == generate(target, None, prompt, method="ar", temperature=0, max_new_tokens=10).tokens
    features = torch.cat(handed)  # every committed position but the last, in order
    with torch.inference_mode():
        states = loaded.model.model(torch.tensor([prompt + run.tokens]), output_hidden_states=True).hidden_states
    expected = torch.cat([states[1], states[2]], dim=-1)[0, : features.shape[0]]
    assert features.shape[-1] == 2 * config.hidden_size
    torch.testing.assert_close(features, expected, atol=1e-4, rtol=1e-4)


@pytest.mark.skipif("fbgemm" not in torch.backends.quantized.supported_engines, reason="needs fbgemm (x86)")
def test_the_fp16_weight_draft_drafts_what_the_fp32_draft_drafts_up_to_fp16_rounding():
    # Beside an fp16-weight target the draft runs in fbgemm fp16 weights too (models.hf.feature_draft_model): its
    # laws move only by the weights' fp16 rounding, and stay proper with zero mass off the head.
    import copy

    _, model = tiny_draft()
    fast = copy.deepcopy(model).use_fp16_weights()
    assert fast.kernel == "fp16-weights" and model.kernel == "float32"
    prompt = list(range(3, 12))
    torch.manual_seed(2)
    features = torch.randn(len(prompt) - 1, SHAPE.hidden_size)
    tokens = torch.tensor([5, 7, 9])
    laws = [torch.softmax(draft_steps(m, prompt, features, tokens), dim=-1) for m in (model, fast)]
    off_head = torch.ones(VOCAB, dtype=torch.bool)
    off_head[::2] = False
    assert (laws[1][..., off_head] == 0).all() and torch.allclose(laws[1].sum(-1), torch.ones(4, 3))
    assert (laws[0] - laws[1]).abs().max() < 1e-2


@pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(), reason="oneDNN has no bf16 on this CPU")
def test_the_packed_bf16_draft_drafts_what_the_plain_bf16_draft_drafts_bit_for_bit():
    # Beside a bf16 target the draft runs in bf16 with oneDNN pre-packed weights (models.hf.feature_draft_model):
    # the same products as the plain bf16 draft, so the same laws, exactly.
    import copy

    head, _ = tiny_draft()
    embedding = torch.randn(VOCAB, SHAPE.hidden_size).bfloat16()
    output = torch.randn(VOCAB, SHAPE.hidden_size).bfloat16()
    plain = FeatureDraftModel(head, embedding, output, list(range(0, VOCAB, 2)), VOCAB, None, "bf16 draft")
    packed = copy.deepcopy(plain).use_packed_weights()
    assert packed.kernel == "bfloat16 (packed)" and plain.kernel == "bfloat16"
    prompt = list(range(3, 12))
    features = torch.randn(len(prompt) - 1, SHAPE.hidden_size)
    tokens = torch.tensor([5, 7, 9])
    assert torch.equal(draft_steps(plain, prompt, features, tokens), draft_steps(packed, prompt, features, tokens))


def test_training_in_batches_learns_the_teacher_and_reports_every_epoch():
    """`feature_distill.train` with several sequences per optimiser step (and the math attention it
    trains with) lowers the validation loss and raises the acceptance estimate on a teacher the
    head can learn (the next token is the current one plus one, mostly), and hands every epoch to
    `on_epoch`, which the command uses to save the head as it goes."""
    from spectr_gbv.training import feature_distill

    torch.manual_seed(5)
    head = FeatureDraftHead(SHAPE)
    embedding, output = torch.randn(VOCAB, SHAPE.hidden_size), torch.randn(VOCAB, SHAPE.hidden_size)
    token_index = torch.arange(VOCAB)

    def sample(length: int = 16, prompt: int = 4) -> dict:
        ids = [int(torch.randint(0, VOCAB, ()))]
        for _ in range(length - 1):
            ids.append((ids[-1] + 1) % VOCAB)
        after = torch.tensor(ids[prompt - 1 : -1])  # the token before each continuation token
        return {"ids": ids, "prompt_length": prompt, "features": torch.randn(length - 1, SHAPE.hidden_size),
                "top_ids": torch.stack([(after + 1) % VOCAB, (after + 2) % VOCAB], dim=1),
                "top_probs": torch.tensor([[0.9, 0.1]]).expand(length - prompt, 2).clone()}

    records = [feature_distill.training_record(sample()) for _ in range(24)]
    validation = [feature_distill.training_record(sample()) for _ in range(6)]
    seen = []
    history = feature_distill.train(head, embedding, output, records, validation, token_index, epochs=3, depth=2,
                                    lr=1e-2, seed=0, batch=4, on_epoch=lambda h: seen.append(len(h)))
    assert seen == [1, 2, 3] and [h["epoch"] for h in history] == [1, 2, 3]
    losses = [h["validation_loss"][0] for h in history]
    assert losses[-1] < 0.5 * losses[0], losses
    assert history[-1]["validation_alpha_t07"] > history[0]["validation_alpha_t07"]


def test_a_resumed_head_keeps_its_own_token_list(tmp_path):
    from spectr_gbv.training.feature_distill import head_token_ids

    default = tmp_path / "default_ids.json"
    default.write_text(json.dumps([1, 2, 3]))
    resumed = tmp_path / "head"
    resumed.mkdir()
    (resumed / "output_token_ids.json").write_text(json.dumps([4, 5, 6]))
    assert head_token_ids(str(resumed), default) == [4, 5, 6]
    assert head_token_ids(None, default) == [1, 2, 3]
    assert head_token_ids(str(tmp_path / "no_list_here"), default) == [1, 2, 3]


def test_the_total_variation_term_adds_its_weight_times_one_minus_alpha():
    """--tv-weight adds w (1 - alpha) at T = 0.7 to each depth's loss, with alpha the same estimate
    the validation reports (`feature_distill.acceptance`), so training on it raises that number."""
    from spectr_gbv.training import feature_distill

    torch.manual_seed(8)
    head = FeatureDraftHead(SHAPE)
    embedding, output = torch.randn(VOCAB, SHAPE.hidden_size), torch.randn(VOCAB // 2, SHAPE.hidden_size)
    token_index = torch.full((VOCAB,), -1)
    token_index[::2] = torch.arange(VOCAB // 2)  # a head of every other token: some teacher mass falls outside
    ids = torch.randint(0, VOCAB, (14,)).tolist()
    teacher = torch.softmax(torch.randn(10, 6) * 2, -1)
    record = feature_distill.training_record({
        "ids": ids, "prompt_length": 4, "features": torch.randn(13, SHAPE.hidden_size),
        "top_ids": torch.randint(0, VOCAB, (10, 6)), "top_probs": teacher})
    with torch.no_grad():
        plain = feature_distill.record_losses(head, embedding, output, record, token_index, 2)
        with_tv = feature_distill.record_losses(head, embedding, output, record, token_index, 2, tv_weight=1.5)
        accepted, count = feature_distill.acceptance(head, embedding, output, record, token_index)
    assert with_tv[0].item() - plain[0].item() == pytest.approx(1.5 * (1 - accepted / count), rel=1e-4)
    assert with_tv[1].item() > plain[1].item()
