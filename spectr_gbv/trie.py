"""The draft trie: the K drafts' distinct prefixes, so the target scores each once.

K i.i.d. drafts often share prefixes (at low temperature most of them do). The target
needs q after every distinct prefix, not after K x L of them: one forward over the unique
nodes with a tree attention mask (each node sees the context, its ancestors and itself)
gives them all. Nodes are numbered by first appearance in draft order, so draft 0's nodes
are 0..L-1, and the lowest-index draft through a node owns it: the canonical copy of
docs/algorithms.md §1.5.
"""

from __future__ import annotations

from dataclasses import dataclass

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
