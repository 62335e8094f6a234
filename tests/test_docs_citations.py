"""Citations of the mathematics point at docs/algorithms.md, and at sections that exist.

The rules and their proofs live in docs/algorithms.md; code, tests, docs and results cite it as
`docs/algorithms.md §4.4`. Methodology: every tracked file (`git ls-files`) is read as text.
No file may cite the old, out-of-repository note by its file name. Every citation
`docs/algorithms.md §X.Y` (also a run such as `§2.7, §3.6 and §5.4`, also across a line break)
must name a numbered heading of docs/algorithms.md; so must every bare `§X.Y` inside
docs/algorithms.md itself, and every Markdown link to `algorithms.md#anchor` must name a
heading's anchor as GitHub renders it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
DOC = "docs/algorithms.md"
OLD_NOTE = "ALGORITHMS" + ".md"  # spelt in two parts so that this file does not cite it

HEADING = re.compile(r"^#{2,4} (\d+(?:\.\d+)*)\.? (.+)$", re.MULTILINE)
SECTION = r"§(\d+(?:\.\d+)*)"
CITATION = re.compile(re.escape(DOC) + r"\s+(" + SECTION + r"(?:\s*(?:,|-|–|and|or)\s*" + SECTION + r")*)")
ANCHOR_LINK = re.compile(r"\]\(([^)\s]*algorithms\.md)#([^)\s]+)\)")


def tracked_texts() -> dict[str, str]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    texts = {}
    for name in names.decode().split("\0"):
        path = ROOT / name
        if name and path.is_file():
            texts[name] = path.read_bytes().decode("utf-8", errors="ignore")
    return texts


def sections() -> set[str]:
    return {number for number, _ in HEADING.findall((ROOT / DOC).read_text())}


def github_anchor(heading: str) -> str:
    """The id GitHub gives a Markdown heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors() -> set[str]:
    text = (ROOT / DOC).read_text()
    return {github_anchor(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def test_no_tracked_file_cites_the_old_note():
    assert [name for name, text in tracked_texts().items() if OLD_NOTE in text] == []


def test_the_doc_has_numbered_sections():
    found = sections()
    assert {"1", "1.5", "2.5", "4.4", "5.3", "9.2", "10.1"} <= found


def test_every_citation_names_an_existing_section():
    found = sections()
    missing = []
    for name, text in tracked_texts().items():
        for match in CITATION.finditer(text):
            missing += [(name, s) for s in re.findall(SECTION, match.group(1)) if s not in found]
    assert missing == []


def test_the_doc_cites_only_its_own_sections():
    found = sections()
    assert sorted(set(re.findall(SECTION, (ROOT / DOC).read_text())) - found) == []


def test_links_into_the_doc_name_existing_anchors():
    known = anchors()
    broken = []
    for name, text in tracked_texts().items():
        if name.endswith(".md"):
            broken += [(name, anchor) for _, anchor in ANCHOR_LINK.findall(text) if anchor not in known]
    assert broken == []
