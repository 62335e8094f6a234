"""A preallocated KV cache for a one-layer draft that drafts several branches at once.

Keys and values live in two buffers [rows, KV, capacity, D]. Positions 0 .. committed - 1
hold the committed entries, the same in every row; a branch's drafted entries follow them in
its own row, at committed + depth. So a row's first committed + depth slots are exactly the
keys and values its next entry attends to, and attention reads them as a view: no drafting
step copies the committed entries.

Every write lands at an explicit position. Dropping the branches is setting the depth back
to 0: their slots are simply overwritten by the next committed entries. A buffer that is
outgrown (a long run, a deeper draft, more branches) is reallocated at twice the size and
what it holds is copied once, so a run's copying stays linear in its length and there is no
hard limit.
"""

from __future__ import annotations

import torch

INITIAL_CAPACITY = 64  # positions; doubled as often as a run needs


class BranchKVCache:
    def __init__(self) -> None:
        self.keys: torch.Tensor | None = None  # [rows, KV, capacity, D]
        self.values: torch.Tensor | None = None
        self.committed = 0  # committed entries (positions 0 .. committed - 1, in every row)
        self.depth = 0  # drafted entries per branch after them

    @property
    def length(self) -> int:
        """The positions a row's next entry attends to besides itself."""
        return self.committed + self.depth

    def append_committed(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Entries [1, KV, n, D] of the next committed positions, written to every row; drops the branches."""
        n = keys.shape[2]
        self._reserve(keys, 1 if self.keys is None else self.keys.shape[0], self.committed + n)
        self.keys[:, :, self.committed : self.committed + n] = keys
        self.values[:, :, self.committed : self.committed + n] = values
        self.committed += n
        self.depth = 0

    def reserve_rows(self, rows: int) -> None:
        """Room for `rows` branches; new rows get the committed entries. Call it before drafting (depth 0)."""
        if self.keys is not None and rows > self.keys.shape[0]:
            self._reserve(self.keys, rows, self.committed)

    def append_branch(self, keys: torch.Tensor, values: torch.Tensor) -> None:
        """Each branch's next drafted entry [rows, KV, 1, D], written at committed + depth in its own row."""
        rows = keys.shape[0]
        if self.depth and rows > self.keys.shape[0]:
            raise ValueError(f"{rows} branches drafted on, but only {self.keys.shape[0]} were started")
        self._reserve(keys, rows, self.length + 1)
        self.keys[:rows, :, self.length] = keys[:, :, 0]
        self.values[:rows, :, self.length] = values[:, :, 0]
        self.depth += 1

    def drop_branches(self) -> None:
        self.depth = 0

    def view(self, rows: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Keys and values [rows, KV, committed + depth, D] of the first `rows` branches (views, no copy)."""
        return self.keys[:rows, :, : self.length], self.values[:rows, :, : self.length]

    def _reserve(self, like: torch.Tensor, rows: int, length: int) -> None:
        if self.keys is not None and rows <= self.keys.shape[0] and length <= self.keys.shape[2]:
            return
        old_rows = 0 if self.keys is None else self.keys.shape[0]
        capacity = INITIAL_CAPACITY if self.keys is None else self.keys.shape[2]
        while capacity < length:
            capacity *= 2
        size = (max(rows, old_rows), like.shape[1], capacity, like.shape[3])
        keys, values = like.new_empty(size), like.new_empty(size)
        if self.keys is not None:
            keys[:old_rows, :, : self.length] = self.keys[:, :, : self.length]
            values[:old_rows, :, : self.length] = self.values[:, :, : self.length]
            # new rows hold the committed entries (the same in every row), no branch yet
            keys[old_rows:, :, : self.committed] = self.keys[:1, :, : self.committed]
            values[old_rows:, :, : self.committed] = self.values[:1, :, : self.committed]
        self.keys, self.values = keys, values
