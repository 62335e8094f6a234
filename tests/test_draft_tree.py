"""The explorer's drafts tree (components.render.draft_tree) on real records: Toy-world runs with
K = 3 (and K = 1). One node per trie node, shared prefixes once, the accepted path and the
final token marked as the record says."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from components.render.draft_tree import draft_tree_html
from components.tabs import generate
from spectr_gbv.trie import DraftTrie

pytestmark = pytest.mark.unit


class Nodes(HTMLParser):
    """The attributes of every <g> of the tree, by class."""

    def __init__(self, page: str):
        super().__init__()
        self.nodes, self.finals, self.svgs = [], [], 0
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.svgs += tag == "svg"
        if tag == "g" and attrs.get("class") == "tree-node":
            self.nodes.append(attrs)
        if tag == "g" and attrs.get("class") == "tree-final":
            self.finals.append(attrs)


def run(method: str, num_drafts: int, seed: int, temperature: float = 1.0):
    *_, final = generate.generate_stream("toy", "the cat", method, num_drafts, 3, temperature, 24, seed)
    return final[3]


@pytest.fixture(scope="module")
def iterations():
    """(state, iteration) of SpecTr-GBV and RRS runs with three drafts, at two temperatures."""
    states = [run(m, 3, seed, t) for m in ("spectr_gbv", "rrs") for seed in (1, 2) for t in (0.5, 1.0)]
    return [(s, it) for s in states for it in s.record.iterations]


def test_one_node_per_trie_node_and_shared_prefixes_once(iterations):
    merged = 0
    for state, it in iterations:
        trie = DraftTrie.of_blocks(it.draft_tokens)
        tree = Nodes(draft_tree_html(it, state.token_text))
        assert len(tree.nodes) == trie.size and tree.svgs == 1
        # Every distinct prefix once: (depth, the prefix's tokens) never repeats among the nodes.
        prefixes = []
        for node in tree.nodes:
            k = int(node["data-drafts"].split(",")[0]) - 1
            depth = int(node["data-depth"])
            prefixes.append(tuple(it.draft_tokens[k][:depth]))
            assert node["data-token"] == state.token_text([it.draft_tokens[k][depth - 1]])[0]
        assert len(set(prefixes)) == len(prefixes) == len({tuple(r[:d]) for r in it.draft_tokens
                                                           for d in range(1, len(r) + 1)})
        # A node shared by drafts lists them all, and is drawn once for them.
        for node in tree.nodes:
            drafts = [int(k) - 1 for k in node["data-drafts"].split(",")]
            depth = int(node["data-depth"])
            assert len({tuple(it.draft_tokens[k][:depth]) for k in drafts}) == 1
            merged += len(drafts) > 1
    assert merged > 0  # the sample has drafts sharing a prefix


def test_the_accepted_path_and_the_final_token_are_the_records(iterations):
    corrections = bonuses = 0
    for state, it in iterations:
        tree = Nodes(draft_tree_html(it, state.token_text))
        path = sorted((n for n in tree.nodes if n.get("data-accepted") == "true"), key=lambda n: int(n["data-depth"]))
        assert [n["data-token"] for n in path] == state.token_text(it.accepted_tokens)
        assert [int(n["data-depth"]) for n in path] == list(range(1, it.num_accepted + 1))
        (final,) = tree.finals
        assert final["data-token"] == state.token_text([it.final_token])[0]
        assert final["data-final"] == it.final_kind and final["data-depth"] == str(it.num_accepted + 1)
        corrections += it.final_kind == "correction"
        bonuses += it.final_kind == "bonus"
    assert corrections > 0 and bonuses > 0


def test_one_draft_says_so_and_draws_no_tree():
    state = run("gbv", 1, 1)
    page = draft_tree_html(state.record.iterations[0], state.token_text)
    tree = Nodes(page)
    assert "One draft" in page and tree.svgs == 0 and not tree.nodes and not tree.finals
