"""Pure: one iteration record -> its K drafts as a token tree (SVG), for the explorer.

The drafts' shared prefixes are merged (spectr_gbv.trie.DraftTrie, the same trie the target
scores), so a prefix two drafts share is one node. The root is the context; depth d is output
position d. The accepted path (the winning draft's first tau tokens) is drawn in the accepted
look, and the final token (correction or bonus) hangs from its end, dashed, in its kind's look.
Leaves are stacked top to bottom in draft order and a parent sits level with its first child,
so draft 1 reads along the top row as in the grid. With one draft there is no tree to draw.
"""

from __future__ import annotations

import html
from typing import Callable

from spectr_gbv.records import IterationRecord
from spectr_gbv.trie import DraftTrie

from .palette import KINDS, UNREACHED
from .text import visible_token

COLUMN, ROW, BOX_W, BOX_H = 96, 38, 84, 26  # px in the SVG's own units (it scales to its box)
LABEL_CHARS = 9  # a longer token is cut with an ellipsis (its <title> keeps it whole)
ROOT = -1


def accepted_nodes(it: IterationRecord, trie: DraftTrie) -> list[int]:
    """The trie nodes of the accepted path, root side first."""
    if it.winning_draft is None or it.num_accepted == 0:
        return []
    return trie.node_of[it.winning_draft][: it.num_accepted]


def _label(text: str) -> str:
    text = visible_token(text)
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def _layout(parents: list[int]) -> dict[int, tuple[int, float]]:
    """(depth, row) of every node and the root: leaves take rows 0, 1, ... in order, a parent its first child's row."""
    children: dict[int, list[int]] = {ROOT: []}
    for node, parent in enumerate(parents):
        children.setdefault(parent, []).append(node)
    place: dict[int, tuple[int, float]] = {}
    next_row = 0

    def visit(node: int, depth: int) -> float:
        nonlocal next_row
        kids = children.get(node, [])
        if not kids:
            row, next_row = next_row, next_row + 1
        else:
            row = [visit(kid, depth + 1) for kid in kids][0]
        place[node] = (depth, row)
        return row

    visit(ROOT, 0)
    return place


def _box(x: float, y: float, text: str, tip: str, style, attributes: str, final: bool = False) -> str:
    dash = ' stroke-dasharray="5 3"' if final else ""
    return (f'<g class="{"tree-final" if final else "tree-node"}"{attributes}><title>{html.escape(tip)}</title>'
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{BOX_W}" height="{BOX_H}" rx="5" fill="{style.background}" '
            f'stroke="{style.strong}" stroke-width="2"{dash}/>'
            f'<text x="{x + BOX_W / 2:.0f}" y="{y + BOX_H / 2 + 5:.0f}" text-anchor="middle" fill="{style.text}">'
            f"{html.escape(_label(text))}</text></g>")


def draft_tree_html(it: IterationRecord, token_text: Callable[[list[int]], list[str]]) -> str:
    """The tree of the iteration's drafts, or a line saying why there is none (one draft, or none)."""
    if not it.draft_tokens:
        return '<div class="draft-tree" data-nodes="0"><i>Plain AR step: no drafts, no tree.</i></div>'
    if len(it.draft_tokens) == 1:
        return ('<div class="draft-tree" data-nodes="0"><i>One draft: its tree is a single branch, the grid\'s one '
                'row. With K &gt; 1 drafts their shared prefixes merge here.</i></div>')
    trie = DraftTrie.of_blocks(it.draft_tokens)
    path = accepted_nodes(it, trie)
    final_parent = path[-1] if path else ROOT
    # The final token is drawn as one more child of the accepted path's end (node number trie.size).
    final = trie.size
    place = _layout([*trie.parents, final_parent])
    texts = token_text(trie.tokens)
    (final_text,) = token_text([it.final_token])
    rows = max(row for _, row in place.values()) + 1
    depth_max = max(depth for depth, _ in place.values())
    width, height = 70 + (depth_max - 1) * COLUMN + BOX_W + 4, rows * ROW + 8

    def corner(node: int) -> tuple[float, float]:
        depth, row = place[node]
        return 70 + (depth - 1) * COLUMN, 4 + row * ROW

    edges, boxes = [], []
    accepted = KINDS["accepted"]
    on_path = set(path)
    for node in [*range(trie.size), final]:
        parent = final_parent if node == final else trie.parents[node]
        x, y = corner(node)
        if parent == ROOT:
            px, py = 62, 4 + place[ROOT][1] * ROW + BOX_H / 2
        else:
            ox, oy = corner(parent)
            px, py = ox + BOX_W, oy + BOX_H / 2
        strong = node in on_path or node == final
        colour = KINDS[it.final_kind].strong if node == final else (accepted.strong if strong else UNREACHED.strong)
        dash = ' stroke-dasharray="5 3"' if node == final else ""
        edges.append(f'<path class="tree-edge" d="M{px:.0f},{py:.0f} C{px + 12:.0f},{py:.0f} {x - 12:.0f},'
                     f'{y + BOX_H / 2:.0f} {x:.0f},{y + BOX_H / 2:.0f}" fill="none" stroke="{colour}" '
                     f'stroke-width="{3 if strong else 1.5}"{dash}/>')
    for node in range(trie.size):
        x, y = corner(node)
        drafts = [k + 1 for k, nodes in enumerate(trie.node_of) if node in nodes]
        kept = node in on_path
        style = accepted if kept else UNREACHED
        tip = (f"{visible_token(texts[node])} at position {trie.depths[node]}, in draft(s) "
               f"{', '.join(map(str, drafts))}" + ("; accepted" if kept else ""))
        attributes = (f' data-node="{node}" data-depth="{trie.depths[node]}" data-token="{html.escape(texts[node])}"'
                      f' data-drafts="{",".join(map(str, drafts))}"' + (' data-accepted="true"' if kept else ""))
        boxes.append(_box(x, y, texts[node], tip, style, attributes))
    x, y = corner(final)
    final_style = KINDS[it.final_kind]
    boxes.append(_box(x, y, f"{final_style.glyph} {final_text}",
                      f"{it.final_kind} token {visible_token(final_text)} at position {it.num_accepted + 1}",
                      final_style, f' data-final="{it.final_kind}" data-depth="{it.num_accepted + 1}"'
                                   f' data-token="{html.escape(final_text)}"', final=True))
    root_y = 4 + place[ROOT][1] * ROW
    root = (f'<g class="tree-root"><rect x="0" y="{root_y}" width="62" height="{BOX_H}" rx="5" fill="#ffffff" '
            f'stroke="#4b5563"/><text x="31" y="{root_y + BOX_H / 2 + 5:.0f}" text-anchor="middle" '
            f'fill="#1a1a1a">context</text></g>')
    caption = (f"{len(it.draft_tokens)} drafts, {trie.size} distinct prefixes "
               f"(of {sum(len(row) for row in it.draft_tokens)} drafted tokens); the accepted path and the "
               f"{it.final_kind} token are highlighted.")
    return (f'<div class="draft-tree" data-nodes="{trie.size}" data-iteration="{it.index + 1}">'
            f'<div class="tree-caption">{html.escape(caption)}</div>'
            f'<div class="tree-scroll"><svg class="tree-svg" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{html.escape(caption)}" '
            f'font-family="ui-monospace, monospace" font-size="14">'
            f'{"".join(edges)}{root}{"".join(boxes)}</svg></div></div>')
