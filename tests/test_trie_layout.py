"""The scoring forward's layout (`spectr_gbv.trie.ScoringLayout`): the tree attention mask, the
position offsets and the rows back to the drafts, checked against their definition from the
drafts' prefixes, and built once per trie shape: later calls with the same shape reuse it."""

from __future__ import annotations

import pytest
import torch

from spectr_gbv.trie import DraftTrie, ScoringLayout

pytestmark = pytest.mark.unit

CPU = torch.device("cpu")


def expected_layout(blocks: list[list[int]], pending: int, past: int) -> tuple[torch.Tensor, list[int], list[list[int]]]:
    """The layout from its definition: a node is a distinct prefix (numbered by first appearance);
    it sees the context, every pending token and the nodes whose prefixes are prefixes of its own."""
    prefixes: list[tuple[int, ...]] = []
    for row in blocks:
        for depth in range(1, len(row) + 1):
            if tuple(row[:depth]) not in prefixes:
                prefixes.append(tuple(row[:depth]))
    m, n = pending, len(prefixes)
    visible = torch.zeros(m + n, past + m + n, dtype=torch.bool)
    visible[:, :past] = True
    for a in range(m):
        visible[a, past : past + a + 1] = True
    for i, prefix in enumerate(prefixes):
        visible[m + i, past : past + m] = True
        for j, other in enumerate(prefixes):
            visible[m + i, past + m + j] = prefix[: len(other)] == other
    positions = [past + a for a in range(m)] + [past + m - 1 + len(prefix) for prefix in prefixes]
    rows = [[0] + [1 + prefixes.index(tuple(row[:d])) for d in range(1, len(row) + 1)] for row in blocks]
    return visible, positions, rows


@pytest.mark.parametrize("blocks", [
    [[5, 6, 7, 8]],
    [[5, 6, 7, 8], [5, 6, 9, 9]],
    [[5, 6, 7, 8], [1, 2, 3, 4]],
    [[5, 6, 7], [5, 6, 7], [5, 2, 7], [3, 6, 7]],
])
@pytest.mark.parametrize("pending", [1, 2])
def test_the_layout_matches_its_definition(blocks, pending):
    past = 7
    layout = ScoringLayout.of(DraftTrie.of_blocks(blocks), pending, torch.float32, CPU)
    visible, positions, rows = expected_layout(blocks, pending, past)
    mask = layout.attention_mask(past)
    assert mask.dtype == torch.float32 and mask.shape == visible.shape
    assert torch.equal(mask == 0, visible)
    assert bool((mask[~visible] == torch.finfo(torch.float32).min).all())
    assert (past + layout.offsets).tolist() == positions
    assert layout.rows.tolist() == rows


def test_a_trie_of_the_same_shape_reuses_the_layout_built_for_the_first():
    first = ScoringLayout.of(DraftTrie.of_blocks([[11, 12, 13], [11, 14, 15]]), 1, torch.float32, CPU)
    same_shape = ScoringLayout.of(DraftTrie.of_blocks([[21, 22, 23], [21, 24, 25]]), 1, torch.float32, CPU)
    assert same_shape is first  # other tokens, the same sharing: nothing rebuilt
    other_shape = ScoringLayout.of(DraftTrie.of_blocks([[21, 22, 23], [24, 22, 23]]), 1, torch.float32, CPU)
    more_pending = ScoringLayout.of(DraftTrie.of_blocks([[11, 12, 13], [11, 14, 15]]), 2, torch.float32, CPU)
    other_dtype = ScoringLayout.of(DraftTrie.of_blocks([[11, 12, 13], [11, 14, 15]]), 1, torch.bfloat16, CPU)
    assert len({id(first), id(other_shape), id(more_pending), id(other_dtype)}) == 4
    assert other_dtype.recent_mask.dtype == torch.bfloat16
