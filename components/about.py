"""The About view: what the methods do, in plain words, and the released rule's measured bias.

The numbers in the table are computed when the app starts, by exact enumeration
(`spectr_gbv.exact`) on the GBV paper's two-token example; nothing is typed in by hand.
"""

from __future__ import annotations

from functools import lru_cache

from spectr_gbv.bench.exact_table import constant
from spectr_gbv.exact import continued_law, iteration_law, target_law, total_variation_to_target
from spectr_gbv.methods import METHODS
from spectr_gbv.toy import TWO_TOKEN_DRAFT, TWO_TOKEN_TARGET

DRAFT_LENGTH = 2


@lru_cache(maxsize=1)
def lossy_rows() -> list[tuple[int, float, float, float, float]]:
    """(K, E[tau] exact, TV exact, E[tau] released, TV released) on the two-token example, L = 2."""
    q, p = constant(TWO_TOKEN_TARGET), constant(TWO_TOKEN_DRAFT)
    reference = target_law(q, DRAFT_LENGTH + 1)
    rows = []
    for K in (1, 2, 3):
        cells = []
        for name in ("spectr_gbv", "spectr_gbv_released"):
            law = iteration_law(METHODS[name], q, p, K, DRAFT_LENGTH)
            cells += [law.expected_accepted, total_variation_to_target(continued_law(law.emitted, q, DRAFT_LENGTH + 1), reference)]
        rows.append((K, *cells))
    return rows


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

* **SD** (standard speculative decoding): one draft, checked token by token; the first rejection ends the block and
  a *correction* token is drawn from the residual `norm(max(q - p, 0))`.
* **GBV** (greedy block verification): one draft, but whole sub-blocks are accepted at once, so a later position can
  rescue an earlier one that would have been rejected on its own.
* **SpecTr** and **RRS**: **K** drafts; at each position the verifier picks among the drafts that are still alive.
* **SpecTr-GBV**: K drafts verified by block: the longest accepted sub-block among K drafts. The project's version is
  an exact rule (ALGORITHMS.md section 4.3); it equals GBV at K = 1 and SpecTr at L = 1.
* **AR**: the target alone, one token per call: the baseline for wall-clock speedup.

## Why one method is labelled lossy

The authors' released SpecTr-GBV verifier (`SpecTr-GBV as released (lossy)`) does **not** preserve the target
distribution. Computed exactly (every draft, every coin, every draw) on the GBV paper's two-token example
(q = (1/3, 2/3), p = (2/3, 1/3), L = {DRAFT_LENGTH}), total-variation distance from the target's law of L + 1 tokens:

| K | exact SpecTr-GBV E[tau] | its TV | released rule E[tau] | its TV |
|---|---|---|---|---|
{table}

The released rule sometimes accepts more, but the text it produces is not what the target would write. Check it
yourself in the **Fidelity** tab (pair "Two-token example", method "SpecTr-GBV as released", K = 1, L = 2, 3 tokens).

## Honest numbers

Block efficiency, acceptance and target calls per token are hardware-free. Tokens per second and the speedup
against AR are measured on this server in the same request, and depend on it: on a small CPU a verification call
over K x (L + 1) positions costs several one-token calls, so speculation can be slower than AR there.
"""
