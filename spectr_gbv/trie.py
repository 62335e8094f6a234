"""The draft trie: the K drafts' distinct prefixes, so the target scores each once.

K i.i.d. drafts often share prefixes (at low temperature most of them do). The target
needs q after every distinct prefix, not after K x L of them: one forward over the unique
nodes with a tree attention mask (each node sees the context, its ancestors and itself)
gives them all. Nodes are numbered by first appearance in draft order, so draft 0's nodes
are 0..L-1, and the lowest-index draft through a node owns it: the canonical copy of
docs/algorithms.md §1.5.

The scoring forward's attention mask over the pending tokens and the nodes, their position
offsets and the rows that map scored positions back to the drafts depend only on the number
of pending tokens and on the trie's shape (which drafts share which prefixes), not on its
tokens: `ScoringLayout.of` builds them once per shape and device, and later calls reuse them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch


@dataclass(frozen=True)
class DraftTrie:
    tokens: list[int]  # per node, its last token
    parents: list[int]  # per node, its parent node, -1 for children of the root (the context)
    depths: list[int]  # per node, 1-based depth = length of its prefix
    node_of: list[list[int]]  # [K][L]: the node of draft k's prefix of length d + 1

    @classmethod
    def of_blocks(cls, blocks: list[list[int]]) -> "DraftTrie":
        tokens, parents, depths, node_of = [], [], [], []
        index: dict[tuple[int, int], int] = {}  # (parent node, token) -> node
        for row in blocks:
            nodes, parent = [], -1
            for depth, token in enumerate(row, start=1):
                key = (parent, token)
                if key not in index:
                    index[key] = len(tokens)
                    tokens.append(token)
                    parents.append(parent)
                    depths.append(depth)
                parent = index[key]
                nodes.append(parent)
            node_of.append(nodes)
        return cls(tokens, parents, depths, node_of)

    @property
    def size(self) -> int:
        return len(self.tokens)

    def ancestor_mask(self) -> torch.Tensor:
        """[N, N] bool: node i may attend to node j (j is i or one of its ancestors)."""
        n = self.size
        mask = torch.zeros(n, n, dtype=torch.bool)
        for i in range(n):
            j = i
            while j >= 0:
                mask[i, j] = True
                j = self.parents[j]
        return mask

    def rows_for_blocks(self) -> torch.Tensor:
        """[K, L + 1]: for each draft and position, which scored row holds q there (row 0 is the
        root, i.e. q after the context; row 1 + node is q after that node)."""
        return torch.tensor([[0] + [1 + node for node in nodes] for nodes in self.node_of], dtype=torch.long)

    @property
    def shape(self) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
        """What the layout depends on: each node's parent, and each draft's nodes (depths follow)."""
        return tuple(self.parents), tuple(tuple(nodes) for nodes in self.node_of)


@dataclass(frozen=True)
class ScoringLayout:
    """One scoring forward's layout after `past` committed positions, for m pending tokens then
    the N trie nodes: the context's columns are all visible, so only the last m + N columns vary."""

    recent_mask: torch.Tensor  # [m + N, m + N] additive (0 visible, dtype's min hidden): the pending causally, a node its ancestors
    offsets: torch.Tensor  # [m + N] long: each fed position's index after `past` (a node's sits at its depth)
    rows: torch.Tensor  # [K, L + 1] long: `DraftTrie.rows_for_blocks`, on the device

    @staticmethod
    def of(trie: DraftTrie, pending: int, dtype: torch.dtype, device: torch.device) -> "ScoringLayout":
        return _layout(pending, trie.shape, dtype, torch.device(device))

    def attention_mask(self, past: int, width: int | None = None) -> torch.Tensor:
        """[m + N, width]: every committed position visible, then the recent block, then (a preallocated
        cache wider than past + m + N: `width`) the unused slots hidden."""
        rows, recent = self.recent_mask.shape
        parts = [self.recent_mask.new_zeros(rows, past), self.recent_mask]
        if width is not None and width > past + recent:
            parts.append(self.recent_mask.new_full((rows, width - past - recent), torch.finfo(self.recent_mask.dtype).min))
        return torch.cat(parts, dim=1)


# Shapes met in a run are few (K = 2, L = 4: the drafts part at one of five depths, times the
# one or two pending tokens), so a small cache holds them all, for every (K, L) in use.
@lru_cache(maxsize=512)
def _layout(pending: int, shape: tuple, dtype: torch.dtype, device: torch.device) -> ScoringLayout:
    parents, node_of = shape
    trie = DraftTrie([0] * len(parents), list(parents), _depths(parents), [list(nodes) for nodes in node_of])
    m, n = pending, trie.size
    allowed = torch.zeros(m + n, m + n, dtype=torch.bool)
    allowed[:m, :m] = torch.ones(m, m, dtype=torch.bool).tril()  # the pending tokens, causally
    allowed[m:, :m] = True  # every node sees all the pending tokens
    allowed[m:, m:] = trie.ancestor_mask()
    recent = torch.zeros(allowed.shape, dtype=dtype).masked_fill_(~allowed, torch.finfo(dtype).min)
    depths = torch.tensor(trie.depths, dtype=torch.long)
    offsets = torch.cat([torch.arange(m), m - 1 + depths])
    return ScoringLayout(recent.to(device), offsets.to(device), trie.rows_for_blocks().to(device))


def _depths(parents: tuple[int, ...]) -> list[int]:
    depths: list[int] = []
    for parent in parents:  # a parent is numbered before its children
        depths.append(1 if parent < 0 else depths[parent] + 1)
    return depths
