"""The head-coverage measure: the target's mass outside a draft's restricted head, per temperature."""

from __future__ import annotations

import pytest
import torch

from spectr_gbv.training.head_coverage import coverage, mass_outside

pytestmark = pytest.mark.unit


def test_mass_outside_the_head_is_renormalised_at_each_temperature():
    in_head = torch.zeros(10, dtype=torch.bool)
    in_head[:5] = True
    ids = torch.tensor([[0, 7], [1, 2]])
    probs = torch.tensor([[0.8, 0.2], [0.6, 0.4]])
    assert mass_outside(ids, probs, in_head, 1.0).tolist() == pytest.approx([0.2, 0.0])
    # at T = 0.5 the law is squared then renormalised: 0.04 / (0.64 + 0.04)
    assert mass_outside(ids, probs, in_head, 0.5).tolist() == pytest.approx([0.04 / 0.68, 0.0])


def test_coverage_reads_every_position_of_every_chunk(tmp_path):
    first = {"top_ids": torch.tensor([[0, 7], [8, 9]]), "top_probs": torch.tensor([[0.5, 0.3], [0.5, 0.5]])}
    second = {"top_ids": torch.tensor([[1, 2]]), "top_probs": torch.tensor([[0.9, 0.1]])}
    torch.save([first], tmp_path / "chunk_0000.pt")
    torch.save([second], tmp_path / "chunk_0001.pt")
    found = coverage([str(tmp_path / "chunk_0000.pt"), str(tmp_path / "chunk_0001.pt")], [0, 1, 2], 10)
    assert found["positions"] == 3
    assert found["top_k_mass"] == pytest.approx((0.8 + 1.0 + 1.0) / 3)
    assert found["outside"][1.0] == pytest.approx((0.3 / 0.8 + 1.0 + 0.0) / 3)
