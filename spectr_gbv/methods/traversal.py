"""Traversal Verification (Weng, Hu, et al.; arXiv 2505.12398, NeurIPS 2025) on the merged
trie of the K drafts, with the without-replacement sibling update (docs/algorithms.md §8).

The K drafts are merged into one token tree. Leaves are tested in depth-first pre-order;
a rejected leaf is deleted and its parent's distributions are updated, so the parent may
become a leaf and be tested in turn, down to the root, which always succeeds.

    paper (docs/algorithms.md §8.1)         here
    node a of the merged trie               Node (its token path; children in order of first appearance)
    M_b(a), M_s(a)                          Node.big, Node.small: q(. | a), p(. | a) at first
    w_a                                     Node.weight: w_root = 1, w_c = min(w_a M_b(a)[c] / M_s(a)[c], 1)
    r = (w_a M_b(a) - M_s(a))_+, S = sum r  probs.residual / probs.residual_mass
    w_a <- S / (S + 1 - w_a)                gbv.sub_block_probs (GBV's h)
    M_b(a) <- r / S                         (the GBV residual at a)
    M_s(a) <- M_s(a), token l zeroed        the without-replacement update

On one draft the trie is a chain and this is GBV's backward scan (docs/algorithms.md §2.4).
Only the without-replacement update of M_s is exact (docs/algorithms.md §8.2); keeping M_s
unchanged (with replacement) is lossy (TV up to 0.06, §8.3), so that variant is not offered
here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import torch

from ..probs import EMPTY_MASS, normalize, residual, residual_mass
from ..randomness import Randomness
from .base import SubBlockTest, VerifyInput, VerifyResult
from .gbv import sub_block_probs


@dataclass
class Node:
    depth: int
    token: int | None  # the token that leads here from the parent (None at the root)
    draft: int  # the lowest draft index through this node (its canonical rows)
    big: torch.Tensor  # [V] M_b(a)
    small: torch.Tensor | None  # [V] M_s(a); None at depth L (no children ever)
    parent: "Node | None" = None
    children: list["Node"] = field(default_factory=list)
    weight: float = 1.0


def merged_trie(inp: VerifyInput) -> Node:
    """The drafts' trie; a child's position among its siblings is that of its first draft."""
    root = Node(0, None, 0, inp.target_probs[0, 0], inp.draft_probs[0, 0])
    for k, block in enumerate(inp.draft_tokens.tolist()):
        node = root
        for depth, token in enumerate(block, start=1):
            child = next((c for c in node.children if c.token == token), None)
            if child is None:
                small = inp.draft_probs[k, depth] if depth < inp.draft_length else None
                child = Node(depth, token, k, inp.target_probs[k, depth], small, parent=node)
                node.children.append(child)
            node = child
    _reweigh(root)
    return root


def _reweigh(node: Node) -> None:
    """w_c = min(w_a M_b(a)[c] / M_s(a)[c], 1) down a's subtree (GBV's omega recursion)."""
    for child in node.children:
        ratio = float(node.big[child.token]) / float(node.small[child.token])
        child.weight = min(node.weight * ratio, 1.0)
        _reweigh(child)


def _first_leaf(node: Node) -> Node:
    while node.children:
        node = node.children[0]
    return node


def _delete(leaf: Node) -> None:
    """Reject `leaf`: remove it and hand its parent the GBV residual, sampled without replacement."""
    parent = leaf.parent
    weight = torch.tensor(parent.weight, dtype=torch.float64, device=parent.big.device)
    mass = residual_mass(parent.big, parent.small, weight).item()
    parent.big = residual(parent.big, parent.small, parent.weight) if mass > EMPTY_MASS else parent.big
    parent.weight = float(sub_block_probs(*torch.tensor([parent.weight, mass], dtype=torch.float64)))
    # Without replacement: the siblings still to be tested are not token l.
    kept = parent.small.clone()
    kept[leaf.token] = 0.0
    parent.small = normalize(kept, fallback=kept)
    parent.children.remove(leaf)
    _reweigh(parent)


def traversal(inp: VerifyInput) -> Iterator[Node]:
    """The leaves in the order they are tested, each yielded with its current weight, assuming
    every test before it failed (a consumer stops at the first success). The root, last, is
    yielded with weight 1."""
    root = merged_trie(inp)
    while True:
        leaf = _first_leaf(root)
        if leaf is root:
            root.weight = 1.0
            yield root
            return
        yield leaf
        _delete(leaf)


def verify(inp: VerifyInput, rng: Randomness) -> VerifyResult:
    tests: list[SubBlockTest] = []
    for leaf in traversal(inp):
        if leaf.depth > 0:
            (accepted,), (uniform,) = rng.coins(torch.tensor([leaf.weight], dtype=torch.float64))
            tests.append(SubBlockTest(leaf.draft, 0, leaf.depth, leaf.weight, accepted, uniform))
            if not accepted:
                continue
        kind = "bonus" if leaf.depth == inp.draft_length else "correction"
        return VerifyResult(inp.draft_tokens[leaf.draft, : leaf.depth].tolist(), rng.sample(leaf.big), kind, leaf.big,
                            leaf.depth, leaf.draft if leaf.depth > 0 else None, tests)
    raise AssertionError("the traversal always ends at the root")


def expected_accepted(inp: VerifyInput) -> float:
    """E[tau | drafts] = sum over tested leaves of P(all earlier tests failed) w_l depth(l)."""
    reach, total = 1.0, 0.0
    for leaf in traversal(inp):
        total += reach * leaf.weight * leaf.depth
        reach *= 1.0 - leaf.weight
        if reach <= 0.0:
            break
    return total
