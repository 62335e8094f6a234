"""Pure: one iteration record -> its K drafts as a token tree (SVG), for the explorer.

The drafts' shared prefixes are merged (spectr_gbv.trie.DraftTrie, the same trie the target
scores), so a prefix two drafts share is one node. The root is the context; depth d is output
position d, numbered down the left. The accepted path (the winning draft's first tau tokens) is
drawn in the accepted look, and the final token (correction or bonus) hangs from its end, dashed,
in its kind's look. The tree grows downwards (K is at most 8, so it stays narrow beside the
step-through): leaves stand left to right in draft order, a parent over the middle of its
children. With one draft there is no tree to draw.
"""

from __future__ import annotations

import html
from typing import Callable

from spectr_gbv.records import IterationRecord
from spectr_gbv.trie import DraftTrie

from .palette import KINDS, UNREACHED
from .text import visible_token

BOX_W, BOX_H, GAP, LEVEL = 76, 26, 8, 44  # px in the SVG's own units: a node's box, between leaves, between depths
GUTTER, PAD = 22, 4  # the position numbers down the left; the margin
LABEL_CHARS = 8  # a longer token is cut with an ellipsis (its <title> keeps it whole)
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
    """(depth, column) of every node and the root: leaves take columns 0, 1, ... in order, a parent sits over
    the middle of its children."""
    children: dict[int, list[int]] = {ROOT: []}
    for node, parent in enumerate(parents):
        children.setdefault(parent, []).append(node)
    place: dict[int, tuple[int, float]] = {}
    next_column = 0

    def visit(node: int, depth: int) -> float:
        nonlocal next_column
        kids = children.get(node, [])
        if not kids:
            column, next_column = next_column, next_column + 1
        else:
            columns = [visit(kid, depth + 1) for kid in kids]
            column = (columns[0] + columns[-1]) / 2
        place[node] = (depth, column)
        return column

    visit(ROOT, 0)
    return place


def _corner(place: dict[int, tuple[int, float]], node: int) -> tuple[float, float]:
    depth, column = place[node]
    return GUTTER + PAD + column * (BOX_W + GAP), PAD + depth * LEVEL


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
    columns = max(column for _, column in place.values()) + 1
    depth_max = max(depth for depth, _ in place.values())
    width, height = GUTTER + 2 * PAD + columns * (BOX_W + GAP) - GAP, 2 * PAD + depth_max * LEVEL + BOX_H
    accepted, on_path = KINDS["accepted"], set(path)
    edges = []
    for node in [*range(trie.size), final]:
        parent = final_parent if node == final else trie.parents[node]
        (x, y), (px, py) = _corner(place, node), _corner(place, parent)
        x, px, py = x + BOX_W / 2, px + BOX_W / 2, py + BOX_H
        strong = node in on_path or node == final
        colour = KINDS[it.final_kind].strong if node == final else (accepted.strong if strong else UNREACHED.strong)
        dash = ' stroke-dasharray="5 3"' if node == final else ""
        edges.append(f'<path class="tree-edge" d="M{px:.0f},{py:.0f} C{px:.0f},{py + 10:.0f} {x:.0f},{y - 10:.0f} '
                     f'{x:.0f},{y:.0f}" fill="none" stroke="{colour}" stroke-width="{3 if strong else 1.5}"{dash}/>')
    boxes = []
    for node in range(trie.size):
        drafts = [k + 1 for k, nodes in enumerate(trie.node_of) if node in nodes]
        kept = node in on_path
        tip = (f"{visible_token(texts[node])} at position {trie.depths[node]}, in draft(s) "
               f"{', '.join(map(str, drafts))}" + ("; accepted" if kept else ""))
        attributes = (f' data-node="{node}" data-depth="{trie.depths[node]}" data-token="{html.escape(texts[node])}"'
                      f' data-drafts="{",".join(map(str, drafts))}"' + (' data-accepted="true"' if kept else ""))
        boxes.append(_box(*_corner(place, node), texts[node], tip, accepted if kept else UNREACHED, attributes))
    final_style = KINDS[it.final_kind]
    boxes.append(_box(*_corner(place, final), f"{final_style.glyph} {final_text}",
                      f"{it.final_kind} token {visible_token(final_text)} at position {it.num_accepted + 1}",
                      final_style, f' data-final="{it.final_kind}" data-depth="{it.num_accepted + 1}"'
                                   f' data-token="{html.escape(final_text)}"', final=True))
    root_x, root_y = _corner(place, ROOT)
    root = (f'<g class="tree-root"><rect x="{root_x:.0f}" y="{root_y:.0f}" width="{BOX_W}" height="{BOX_H}" rx="5" '
            f'fill="#ffffff" stroke="#4b5563"/><text x="{root_x + BOX_W / 2:.0f}" y="{root_y + BOX_H / 2 + 5:.0f}" '
            f'text-anchor="middle" fill="#1a1a1a">context</text></g>')
    positions = "".join(f'<text class="tree-position" x="{PAD}" y="{PAD + d * LEVEL + BOX_H / 2 + 5:.0f}" '
                        f'fill="#4b5563">{d}</text>' for d in range(1, depth_max + 1))
    caption = (f"{len(it.draft_tokens)} drafts, {trie.size} distinct prefixes "
               f"(of {sum(len(row) for row in it.draft_tokens)} drafted tokens); the accepted path and the "
               f"{it.final_kind} token are highlighted.")
    return (f'<div class="draft-tree" data-nodes="{trie.size}" data-iteration="{it.index + 1}">'
            f'<div class="tree-caption">{html.escape(caption)}</div>'
            f'<div class="tree-scroll"><svg class="tree-svg" viewBox="0 0 {width:.0f} {height:.0f}" '
            f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{html.escape(caption)}" '
            f'font-family="ui-monospace, monospace" font-size="14">'
            f'{positions}{"".join(edges)}{root}{"".join(boxes)}</svg></div></div>')
