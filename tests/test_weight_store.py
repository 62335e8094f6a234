"""The drafts' weight storage: float16 or int8 rows, read back by the loaders that ship them."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from spectr_gbv.models import weight_store

pytestmark = pytest.mark.unit


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 16), cols=st.integers(1, 64), seed=st.integers(0, 2**16), spread=st.floats(1e-4, 1e3))
def test_int8_rows_are_within_half_a_step_of_the_weight(tmp_path_factory, rows, cols, seed, spread):
    weight = torch.randn(rows, cols, generator=torch.Generator().manual_seed(seed)) * spread
    weight[0] = 0.0  # an all-zero row must not divide by zero
    path = tmp_path_factory.mktemp("store") / "w.safetensors"
    weight_store.save({"w": weight, "norm": torch.ones(cols)}, path, int8=True)
    back = weight_store.load(path)
    assert weight_store.is_int8(path) and set(back) == {"w", "norm"}
    step = weight.abs().amax(dim=1, keepdim=True) / 127
    assert ((back["w"] - weight).abs() <= step * (0.5 + 1e-5)).all()  # half a step, and float32's rounding
    assert torch.equal(back["norm"], torch.ones(cols, dtype=torch.float16))


def test_int8_halves_the_bytes_and_float16_reads_back_bit_for_bit(tmp_path):
    weight = torch.randn(256, 512)
    half, int8 = tmp_path / "half.safetensors", tmp_path / "int8.safetensors"
    weight_store.save({"w": weight}, half)
    weight_store.save({"w": weight}, int8, int8=True)
    assert int8.stat().st_size < 0.52 * half.stat().st_size
    assert not weight_store.is_int8(half)
    assert torch.equal(weight_store.load(half)["w"], weight.half())
