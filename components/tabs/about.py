"""The About view: what the methods do, in plain words, and the released rule's measured bias.

The numbers in the tables are computed when the app starts, exactly (by enumeration, `spectr_gbv.exact`,
and by the ceiling LP, `spectr_gbv.ceiling`) on the GBV paper's two-token example; nothing is typed in by hand.
The math behind each rule (its statement and why it is exact) is docs/algorithms.md. A visitor cannot open a
repository file, so the about text links only pages a visitor can open (arXiv; tests/test_words.py), and the
tab shows the document itself, read when the app is built, in a closed accordion below the text
(`algorithms_markdown`).
"""

from __future__ import annotations

import itertools
import math
import re
from functools import lru_cache
from pathlib import Path

import gradio as gr

from spectr_gbv.ceiling import optimal_expected_accepted
from spectr_gbv.exact import continued_law, iteration_law, sequence_prob, target_law, total_variation_to_target, verify_input_for
from spectr_gbv.methods import METHODS
from spectr_gbv.toy import TWO_TOKEN_DRAFT, TWO_TOKEN_TARGET, constant

from ..render.words import GLOSSARY, paper

ASSETS = Path(__file__).resolve().parents[2] / "assets"
DOCS = Path(__file__).resolve().parents[2] / "docs"
# Thomas & Pal's select-then-verify rule and what AS-BV adds; the README says the same (docs/credit_snippet.md).
CREDIT = (DOCS / "credit_snippet.md").read_text().strip()
ALGORITHMS = DOCS / "algorithms.md"  # the rules, and why the exact ones keep the target's law
ALGORITHMS_TITLE = "How each rule works, and why the exact ones are exact"
DRAFT_LENGTH = 2
# The lossy rule and the exact rule it is shown against (their registry entries say which).
RELEASED = next(name for name, spec in METHODS.items() if not spec.exact)
RELEASED_COUNTERPART = METHODS[RELEASED].exact_counterpart


@lru_cache(maxsize=1)
def lossy_rows() -> list[tuple[int, float, float, float, float]]:
    """(K, E[tau] exact, TV exact, E[tau] released, TV released) on the two-token example, L = 2."""
    q, p = constant(TWO_TOKEN_TARGET), constant(TWO_TOKEN_DRAFT)
    reference = target_law(q, DRAFT_LENGTH + 1)
    rows = []
    for K in (1, 2, 3):
        cells = []
        for name in (RELEASED_COUNTERPART, RELEASED):
            law = iteration_law(METHODS[name], q, p, K, DRAFT_LENGTH)
            cells += [law.expected_accepted, total_variation_to_target(continued_law(law.emitted, q, DRAFT_LENGTH + 1), reference)]
        rows.append((K, *cells))
    return rows


FRONTIER_DRAFTS = (2, 3)


def _expected_accepted(name: str, q, p, num_drafts: int) -> float:
    """Exact E[tau]: the method's E[tau | drafts] summed over every tuple of drafts."""
    blocks = list(itertools.product(range(2), repeat=DRAFT_LENGTH))
    total = 0.0
    for drafts in itertools.product(blocks, repeat=num_drafts):
        weight = math.prod(sequence_prob(x, p) for x in drafts)
        total += weight * METHODS[name].expected_accepted(verify_input_for(drafts, q, p))
    return total


def frontier_methods() -> list[str]:
    return [name for name, spec in METHODS.items() if spec.exact and spec.multi_draft]


@lru_cache(maxsize=1)
def frontier_rows() -> list[tuple[int, list[float], float]]:
    """(K, exact E[tau] of each exact multi-draft rule, the best any exact rule can do) on the
    two-token example, L = 2; the last is the LP of `spectr_gbv.ceiling`."""
    q, p = constant(TWO_TOKEN_TARGET), constant(TWO_TOKEN_DRAFT)
    return [(K, [_expected_accepted(name, q, p, K) for name in frontier_methods()],
             optimal_expected_accepted(q, p, K, DRAFT_LENGTH)) for K in FRONTIER_DRAFTS]


def frontier_markdown() -> str:
    header = " | ".join(METHODS[name].label for name in frontier_methods())
    rows = "\n".join(f"| {K} | " + " | ".join(f"{v:.4f}" for v in values) + f" | **{best:.4f}** |"
                     for K, values, best in frontier_rows())
    return f"""
## The best any exact rule can do

Every exact rule that reads K drafts is bounded by *select one draft, then verify it by block with the selected
draft's exact law*: the best such pair is a linear program, solved here when the app
starts. Expected accepted draft tokens per iteration on the two-token example (L = {DRAFT_LENGTH}), exact:

| K | {header} | best any exact rule |
|---|{"---|" * (len(frontier_methods()) + 1)}
{rows}

In **Compare**, the Toy world and the two-token example show this ceiling as a dashed line (1 + the LP optimum at
the contexts where the run's iterations started; up to V^L = 128 draft blocks, or wherever the best rule accepts
every block). On real models it cannot be computed: the LP has a variable per possible draft block.
"""


def about_markdown() -> str:
    table = "\n".join(
        f"| {K} | {e1:.4f} | {tv1:.1e} | {e2:.4f} | **{tv2:.3f}** |" for K, e1, tv1, e2, tv2 in lossy_rows()
    )
    return f"""
## What you are looking at

**Speculative decoding** lets a small *draft* model guess the next few tokens and a large *target* model check
all guesses in **one** forward call. A *verifier* decides how many guessed tokens to keep and draws one more token
itself, so that the text has **exactly** the distribution the target alone would produce, only with fewer target
calls. The number of tokens per target call is the **block efficiency**; it does not depend on the hardware.

* **SD** (standard speculative decoding, {paper("SD", "arXiv 2211.17192")}): one draft, checked token by token; the first rejection ends the block and
  a *correction* token is drawn from the residual `norm(max(q - p, 0))`.
* **GBV** (greedy block verification, {paper("GBV", "arXiv 2403.10444")}): one draft, but whole sub-blocks are accepted at once, so a later position can
  rescue an earlier one that would have been rejected on its own.
* **SpecTr** ({paper("SpecTr", "arXiv 2310.15141")}) and **RRS**: **K** drafts; at each position the verifier picks
  among the drafts that are still alive.
* **SpecTr-GBV** ({paper("SpecTr-GBV", "arXiv 2604.25925")}): K drafts verified by block: the longest accepted
  sub-block among K drafts. The project's version is an exact rule of its own (SpecTr's K-SEQ applied to whole
  sub-blocks, drafts tried one after another against what the failed ones left); it equals GBV at K = 1 and SpecTr at
  L = 1.
* **AS-BV**: first *select* one of the K drafts, token by token down their tree, with a mixture of three simple
  selections whose law is known exactly; then verify that one draft by block (GBV) against that law.
  It equals GBV at K = 1 and accepts at least as much as SpecTr at L = 1.
* **AS-BV+H** (AS-BV with hand-off): AS-BV, and where its block check stops, the other drafts still alive at that
  point offer their next token to the correction, one after another (each with its exact law given how the draft was
  selected); an accepted one becomes an accepted draft token and the rest of that draft is checked by GBV. Never below
  AS-BV; equal to GBV at K = 1.
* **Traversal**: Traversal Verification (Weng et al. 2025, {paper("Traversal", "arXiv 2505.12398")}) on the tree of the K drafts: leaves are tested
  depth first, and a rejected leaf hands its parent the block residual. It equals GBV at K = 1.
* **AR**: the target alone, one token per call: the baseline for wall-clock speedup.

Each rule step by step, and why the exact ones keep the target's law: the derivations are in the section below,
*{ALGORITHMS_TITLE}* (closed until you open it).

## Which rule wins where, and why

Every exact multi-draft rule does two jobs: it *chooses* which draft to believe, and it *verifies* that draft. Once the
choice is made, GBV is the best possible verifier, so rules differ in how good their choice is and whether they then
verify by block. SpecTr chooses well one token at a time but gives no block credit; AS-BV makes the choice explicitly,
keeping as much target mass as it can at each level, then verifies by block against exactly what it chose. On the
default pair (coupled: same drafts, same draws; 60 prompts, K 2/4/8, L 2/4/6/8, T 0.4/0.7/1.0) AS-BV leads in most
settings at T = 0.4 and 0.7; at this app's default K = 2, L = 4, T = 0.7 it expects 0.956 accepted tokens per
iteration, SpecTr-GBV 0.944 and SpecTr 0.886 (AS-BV over SpecTr outside its 95 % interval, over SpecTr-GBV not).
AS-BV+H, AS-BV with a hand-off (see the rules above), is never below AS-BV given the same drafts and measured 0.95623 against 0.95615
there: it is the default method.

SpecTr-GBV does not choose up front: it tries whole drafts one after another and hands what is left of a failed attempt
to the next. That hand-off pays where the drafts part ways early and a first choice is often wrong: at T = 1.0 from
L = 4 on, SpecTr-GBV leads AS-BV on the default pair. AS-BV+H gives AS-BV a hand-off of its own: where its block check
stops, the other drafts still alive there offer their next token to the correction; it gains most with many drafts
(K = 4 and 8) and almost nothing at K = 2. Traversal reduces to GBV on one draft and gains from extra drafts only through siblings tested
after a rejection. The ordering is measured, not assumed: `python -m spectr_gbv.bench.frontier`.

### Related work

{CREDIT}

## Why one method is labelled lossy

The authors' released SpecTr-GBV verifier (`SpecTr-GBV as released (lossy)`) does **not** preserve the target
distribution. Computed exactly (every draft, every coin, every draw) on the GBV paper's two-token example
(q = (1/3, 2/3), p = (2/3, 1/3), L = {DRAFT_LENGTH}), total-variation distance from the target's law of L + 1 tokens:

| K | exact SpecTr-GBV E[tau] | its TV | released rule E[tau] | its TV |
|---|---|---|---|---|
{table}

The released rule sometimes accepts more, but the text it produces is not what the target would write. Check it
yourself in the **Fidelity** tab (pair "Two-token example", method "SpecTr-GBV as released", K = 1, L = 2, 3 tokens).

{frontier_markdown()}
## Honest numbers

Block efficiency, acceptance and target calls per token are hardware-free. Tokens per second and the speedup
against AR are measured on this server in the same request, and depend on it: on a small CPU a verification call
over K x (L + 1) positions costs several one-token calls, so speculation can be slower than AR there.
{GLOSSARY}"""


_REPOSITORY_LINK = re.compile(r"\[([^\]]+)\]\((?!https?://)([^)\s#]+\.md)(#[^)\s]*)?\)")  # [text](other.md)


@lru_cache(maxsize=1)
def algorithms_markdown() -> str:
    """docs/algorithms.md as the About tab shows it: its headings one level down (its title is the accordion's),
    and a link to another repository file, which a visitor cannot open, as that file's path in code."""
    lines, fenced = [], False
    for line in ALGORITHMS.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(r"#{1,5} ", line):
            line = "#" + line
        elif not fenced:
            line = _REPOSITORY_LINK.sub(lambda m: f"`{(Path('docs') / m.group(2)).as_posix()}`", line)
        lines.append(line)
    return "\n".join(lines) + "\n"


def build(page) -> None:
    with gr.Tab("About", id="about"):
        gr.HTML((ASSETS / "speculative_iteration.svg").read_text(), elem_id="about-picture")
        gr.Markdown(about_markdown())
        # The document has no $...$: LaTeX stays off, so its plain-text formulas show as written.
        with gr.Accordion(ALGORITHMS_TITLE, open=False, elem_id="about-algorithms"):
            gr.Markdown(algorithms_markdown(), latex_delimiters=[], elem_id="about-algorithms-text")
