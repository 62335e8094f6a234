"""The `int4` CPU kernel (spectr_gbv/models/int4_linear.py): the default target's Q4_1 blocks kept in
4 bits for torch's CPU int4 weight-only kernel.

Checks: Q4_1 blocks are read as gguf's own dequantiser reads them; the packed product equals
x @ W^T with W the file's exact d q + m, computed in fp32, within bf16's rounding (the one rounding:
d and m + 8 d to bf16), for one row and scoring widths; q and k rows are reordered as transformers'
GGUF loader reorders them; on the real default file every replaced weight equals the loaded
model's, the weight error is bounded and the next-token logits are as close to the fp32 target's
as the bf16 kernel's are; and greedy speculative decoding with the int4 target equals greedy plain
decoding with it, as with every kernel.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
import torch

from spectr_gbv import generate
from spectr_gbv.models import cpu_kernel, int4_linear
from spectr_gbv.models.fused_linear import FusedMember
from spectr_gbv.models.int4_linear import GROUP, Int4Linear, Q4_1

pytestmark = [pytest.mark.model,
              pytest.mark.skipif(not int4_linear.available(), reason="this torch has no CPU int4 kernel")]

BF16_EPS = 2.0 ** -8  # bf16's unit roundoff: 8 significant bits, so rounding to nearest moves x by at most |x| 2^-8


def random_q4_1_bytes(rows: int, in_features: int, seed: int) -> np.ndarray:
    """Raw GGUF Q4_1 bytes [rows, in_features / 32 * 20]: random d, m (fp16) and 4-bit q per block."""
    rng = np.random.default_rng(seed)
    blocks = rows * in_features // GROUP
    d = (rng.uniform(0.001, 0.05, blocks) * rng.choice([-1, 1], blocks)).astype(np.float16)
    m = rng.uniform(-0.5, 0.3, blocks).astype(np.float16)
    qs = rng.integers(0, 256, (blocks, 16), dtype=np.uint8)
    raw = np.concatenate([d.view(np.uint8).reshape(blocks, 2), m.view(np.uint8).reshape(blocks, 2), qs], axis=1)
    return raw.reshape(rows, in_features // GROUP * 20)


def test_q4_1_blocks_are_read_as_gguf_dequantises_them():
    from gguf import GGMLQuantizationType, dequantize

    raw = random_q4_1_bytes(64, 128, seed=0)
    matrix = Q4_1.from_blocks(raw, 128)
    assert matrix.q.dtype == torch.uint8 and int(matrix.q.max()) <= 15 and matrix.d.shape == (64, 4)
    theirs = torch.from_numpy(dequantize(raw, GGMLQuantizationType.Q4_1))
    assert torch.equal(matrix.dequantised(), theirs)  # the same values, bit for bit


@pytest.mark.parametrize("rows", [1, 3, 9, 40])
def test_the_packed_product_is_x_times_the_files_exact_weights_within_bf16_rounding(rows):
    """(q - 8) bf16(d) + bf16(m + 8 d) is d q + m with d and m + 8 d rounded to bf16; the product
    equals the fp32 product with those weights to bf16 output rounding, and the fp32 product with
    the file's exact weights within that plus what the weight rounding can move it."""
    matrix = Q4_1.from_blocks(random_q4_1_bytes(192, 256, seed=rows), 256)
    exact = matrix.dequantised()
    d, m = matrix.d.float(), matrix.m.float()
    weight_bound = ((matrix.q.float().reshape(192, -1, GROUP) - 8).abs() * d.abs()[..., None]
                    + (m + 8 * d).abs()[..., None]) * BF16_EPS
    assert ((matrix.kernel_weight() - exact).abs() <= weight_bound.reshape(192, 256)).all()
    assert int4_linear.max_weight_error(matrix) <= weight_bound.max()
    x = torch.randn(2, rows, 256, generator=torch.Generator().manual_seed(rows)).bfloat16()
    with torch.inference_mode():
        got = Int4Linear(matrix)(x)
    assert got.shape == (2, rows, 192) and got.dtype == torch.bfloat16
    got = got.float()
    as_kernel = x.float() @ matrix.kernel_weight().T
    scale = x.float().abs() @ exact.abs().T  # |x| |W|: bounds both products and their rounding
    assert ((got - as_kernel).abs() <= BF16_EPS * as_kernel.abs() + 1e-5 * scale).all()
    as_file = x.float() @ exact.T
    moved = x.float().abs() @ weight_bound.reshape(192, 256).T
    assert ((got - as_file).abs() <= BF16_EPS * as_file.abs() + moved + 1e-5 * scale).all()


def test_q_and_k_rows_are_reordered_as_transformers_gguf_loader_does():
    from transformers.modeling_gguf_pytorch_utils import LlamaTensorProcessor

    weights = np.arange(576 * 4, dtype=np.float32).reshape(576, 4)
    for heads in (9, 3):
        processor = LlamaTensorProcessor(config={"num_attention_heads": heads, "num_key_value_heads": heads})
        theirs = processor.process(weights, "blk.0.attn_q.weight").weights
        ours = weights[int4_linear._unpermute_rows(576, heads).numpy()]
        assert np.array_equal(ours, theirs)


def test_int4_is_refused_for_a_model_without_its_q4_1_file():
    assert "int4" not in cpu_kernel.candidates({"avx512f", "avx512_bf16", "f16c"}, torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="Q4_1 GGUF file"):
        cpu_kernel.apply_kernel(torch.nn.Linear(2, 2), "int4")


# ------------------------------------------------------------------------ the real default file


@pytest.fixture(scope="module")
def default_fp32():
    from spectr_gbv.models.hf import load_model

    return load_model("default", device="cpu", dtype=torch.float32)


@pytest.fixture(scope="module")
def default_int4(default_fp32):
    return cpu_kernel.apply_kernel(copy.deepcopy(default_fp32.model), "int4")


def test_int4_is_probed_only_for_the_default_file_and_only_where_bf16_is_native(default_fp32):
    native = {"avx2", "fma", "f16c", "avx512f", "avx512_bf16"}
    assert cpu_kernel.candidates(native, default_fp32.model)[-1] == "int4"
    assert "int4" not in cpu_kernel.candidates(native) and "int4" not in cpu_kernel.candidates({"avx2", "fma", "f16c"},
                                                                                                default_fp32.model)


def test_the_default_files_blocks_are_its_weights_and_stay_four_bit(default_fp32, default_int4):
    from spectr_gbv.models.default_file import default_gguf_path

    alone = [m for m in default_int4.modules() if isinstance(m, Int4Linear)]
    fused = {id(m.group.product): m.group.product for m in default_int4.modules() if isinstance(m, FusedMember)}
    assert len(alone) == 2 * 30 and len(fused) == 2 * 30  # o/down alone; q/k/v and gate/up one product each
    assert all(isinstance(product, Int4Linear) for product in fused.values())
    dense = [m for m in default_int4.modules() if isinstance(m, (torch.nn.Linear, cpu_kernel.PackedLinear))]
    assert dense == [default_int4.get_output_embeddings()]  # only the Q8_0 head, in bf16
    assert default_int4.get_input_embeddings().weight.dtype == torch.bfloat16
    matrices = int4_linear.read_q4_1(default_gguf_path(), default_fp32.model.config)
    error = max(int4_linear.max_weight_error(m) for m in matrices.values())
    rounded = max((m.dequantised().bfloat16().float() - m.dequantised()).abs().max().item() for m in matrices.values())
    print(f"\nmax |weight - file| over the 210 Q4_1 matrices: int4 {error:.4g}, bf16 kernel {rounded:.4g}")
    assert error <= 2 * rounded  # the same order as the bf16 kernel's rounding of the same weights
    int4_bytes = sum(m.packed.numel() + 2 * m.scales_and_zeros.numel() for m in [*alone, *fused.values()])
    bf16_bytes = sum(2 * m.q.numel() for m in matrices.values())
    print(f"the Q4_1 matrices: {int4_bytes / 1e6:.1f} MB in 4 bits, {bf16_bytes / 1e6:.1f} MB in bf16")
    assert int4_bytes <= 0.32 * bf16_bytes  # half a byte a weight, and 4 bytes of scale and zero a group of 32


def test_int4_logits_are_as_close_to_the_fp32_targets_as_the_bf16_kernels_are(default_fp32, default_int4):
    from spectr_gbv.models.hf import chat_prompt_ids

    bf16 = cpu_kernel.apply_kernel(copy.deepcopy(default_fp32.model), "bfloat16")
    for text in ("Name a colour.", "What is the capital of France?", "Write a haiku about the sea."):
        ids = torch.tensor([chat_prompt_ids(default_fp32.tokenizer, text)])
        with torch.inference_mode():
            exact = default_fp32.model(ids).logits[0].float()
            rounded = bf16(ids).logits[0].float()
            four_bit = default_int4(ids).logits[0].float()
        int4_error, bf16_error = (four_bit - exact).abs().max().item(), (rounded - exact).abs().max().item()
        against_bf16 = (four_bit - rounded).abs().max().item()
        agree = (four_bit.argmax(-1) == rounded.argmax(-1)).float().mean().item()
        agree_fp32 = (four_bit.argmax(-1) == exact.argmax(-1)).float().mean().item()
        print(f"\n{text!r} ({ids.shape[1]} positions): max |int4 - bf16| {against_bf16:.3f}, |int4 - fp32| "
              f"{int4_error:.3f}, |bf16 - fp32| {bf16_error:.3f}; top-1 agreement with bf16 {agree:.3f}, fp32 {agree_fp32:.3f}")
        assert int4_error <= 1.5 * bf16_error + 0.25
        assert agree >= 0.9 and agree_fp32 >= 0.9
        assert four_bit[-1].argmax() == rounded[-1].argmax() == exact[-1].argmax()


def test_greedy_speculative_decoding_with_the_int4_target_equals_its_greedy_plain_decoding(default_fp32, default_int4):
    """The default pair as `load_pair` makes it with the int4 kernel (its feature draft reading the
    int4 target's features): the verifier scores with the target plain decoding samples from."""
    from spectr_gbv.models.hf import FEATURE_DRAFT_ASSETS, HFModel, chat_prompt_ids, feature_draft_model

    choice = cpu_kernel.KernelChoice("int4", "test", "test", reason="test")
    loaded = dataclasses.replace(default_fp32, model=default_int4, kernel=choice)
    target = HFModel(loaded, len(loaded.tokenizer))
    draft = feature_draft_model(loaded, FEATURE_DRAFT_ASSETS)
    prompt = chat_prompt_ids(loaded.tokenizer, "Name three colours.")
    plain = generate(target, None, prompt, method="ar", temperature=0, max_new_tokens=10)
    assert len(plain.tokens) > 0
    for method in ("sd", "spectr_gbv"):
        run = generate(target, draft, prompt, method=method, num_drafts=2, draft_length=3, temperature=0,
                       max_new_tokens=10)
        assert run.tokens == plain.tokens, method
