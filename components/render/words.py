"""Words for the page: the glossary of the About view and a short "how to read this" for each
chart and metrics line, in plain language. Papers are cited by their public arXiv pages only."""

from __future__ import annotations

import gradio as gr

PAPERS = {
    "SD": "https://arxiv.org/abs/2211.17192",  # Leviathan, Kalman, Matias 2023
    "SpecTr": "https://arxiv.org/abs/2310.15141",  # Sun et al. 2023: K-SEQ, rho*
    "GBV": "https://arxiv.org/abs/2403.10444",  # Sun et al.: block verification
    "SpecTr-GBV": "https://arxiv.org/abs/2604.25925",
    "SpecInfer": "https://arxiv.org/abs/2305.09781",  # token trees, recursive rejection sampling
    "Traversal": "https://arxiv.org/abs/2505.12398",
}


def paper(name: str, text: str | None = None) -> str:
    return f"[{text or name}]({PAPERS[name]})"


GLOSSARY = f"""
## Glossary

* **K**, **L**, **T**: the number of drafts, the length of each draft (tokens), and the sampling temperature
  (0 = always the most likely token).
* **Iteration**: one round of drafting, one target call that scores every drafted token, and verification.
* **tau**: how many drafted tokens one iteration keeps (0 to L). The iteration then adds one token of its own, so it
  emits tau + 1 tokens.
* **h**: the probability a verifier gives to keeping a drafted token (SD: min(1, q / p)) or a whole sub-block
  (GBV, SpecTr-GBV). "Skipped" means the rule knew the answer without computing h: an upper bound was already too
  small, so h is not shown. A block rule tests the prefixes of a draft and keeps the longest that passes, so a failed
  test there rejects no token by itself: a longer prefix can still pass.
* **p** and **q**: the draft model's and the target model's probabilities for the next token.
* **E[tau | drafts]**: the number of tokens the verifier expects to keep *for the drafts it was given*, averaged over
  its own coin flips. It is exact, so it varies much less than the tau actually drawn: the **theory** line.
* **Block efficiency**: tokens emitted / target calls, over the whole run. **Mean acceptance length**: 1 + the mean
  of tau over the iterations. They differ only because a run stops: the last iteration is cut at *max new tokens* or
  at the end of the text, which block efficiency counts and mean acceptance length does not. Over long runs they
  agree; both are hardware-free.
* **Residual**: the distribution the target draws from after a rejection, norm(max(q - p, 0)) for one draft: the part
  of q that the draft under-proposes. Multi-draft rules subtract what the rejected drafts already covered, so their
  residual is not this formula of the bars shown.
* **Correction**: the token drawn from the residual after a rejection. **Bonus**: the token drawn from q when all L
  drafted tokens were kept (the target call computed that distribution anyway).
* **RRS**: recursive rejection sampling ({paper("SpecInfer")}): the K drafts are tried one after another at each
  position, each against the residual the previous rejections left.
* **K-SEQ** and **rho\\***: SpecTr's selection rule ({paper("SpecTr")}): each of the K candidates is tried with
  probability min(1, q / (rho p)); **rho\\*** is the value of rho that makes the rule exact and accept the most.
* **TV** (total variation distance): half the sum of |a - b| over all outcomes of two distributions: 0 means the same
  law, 0.1 means a tenth of the probability sits on the wrong outcomes.
* **Coupled run**: every method is run on the *same* drafts and the *same* random numbers, so differences between the
  methods come from the rules, not from luck. The texts in Compare are independent runs; its charts say when they are
  coupled.
* **Exact** and **lossy**: an exact rule produces text with exactly the target's distribution; a lossy rule does not
  (here: the authors' released SpecTr-GBV verifier). Fidelity measures it.

Papers: SD {paper("SD", "arXiv 2211.17192")}, SpecTr {paper("SpecTr", "arXiv 2310.15141")},
GBV {paper("GBV", "arXiv 2403.10444")}, SpecTr-GBV {paper("SpecTr-GBV", "arXiv 2604.25925")},
SpecInfer {paper("SpecInfer", "arXiv 2305.09781")}, Traversal Verification {paper("Traversal", "arXiv 2505.12398")}.
"""

HOW_TO_READ = {
    "generate": "Each token is marked by where it came from: a kept draft token, a correction after a rejection, "
                "a bonus after a fully kept draft, or (AR) a plain target sample. Hover a token for its iteration.",
    "metrics": "Block efficiency is tokens per target call (higher is better, hardware-free); tau is the number of "
               "draft tokens kept per iteration and *theory* its expected value for the drafts drawn; tokens/s and "
               "the ms per token are this server's and change with the machine.",
    "explorer": "One row per draft, one column per position. The kept part of the winning draft and the final token "
                "show what this iteration emitted; the chart shows q (target) and p (draft) at the final position.",
    "compare": "The texts, their metric lines and the speedup are independent runs of each method with the same "
               "seed; the other charts are the coupled run (same drafts and random draws for every method) when "
               "*Coupled* is ticked. "
               "**Block efficiency** and **accepted length**: tokens per target call and how often each tau occurs "
               "(more to the right is better). **Per-position acceptance**: the share of iterations that kept "
               "position 1, 2, ... **Target calls per token**: lower is better. **Speedup**: wall-clock against AR "
               "on this server, the median of the Repeats. On the teaching pairs a dashed line marks the best any "
               "exact rule can do on average: an expectation, so one run's bar may pass it. **Theory against measured**: the total of tau so far (solid) next to the "
               "total of E[tau | drafts] (dotted); an exact rule's two lines stay close.",
    "sweep": "Each line is one method as the swept setting grows. Block efficiency is hardware-free; the speedup is "
             "this server's wall-clock against AR, as in Compare: the median of a point's Repeats, each against "
             "the AR runs just before and after it (a point timed once is left out). One run per point is a noisy "
             "sample: differences smaller than the jumps between neighbouring points are not a trend.",
    "fidelity": "For each outcome of the first tokens: the target's exact probability (with the 95 % band that "
                "sampling noise alone allows for N runs) next to how often the method produced it. An exact method's "
                "bars stay within the bands; the title says whether the whole law is inside or OUTSIDE the noise. "
                "An exact rule's measured TV is sampling noise (its true TV is 0); for the lossy rule the title gives its "
                "exact TV where it can be enumerated, else what this N can detect: inside a wide band says nothing.",
    "grid": "Each cell is one K (row) and L (column) at the sidebar's T: the best exact rule's E[tau | drafts] (draft "
            "tokens kept per iteration, the coins integrated out; hardware-free) or one rule's gain over another, "
            "averaged over the prompts, named by its rule. Hover for the paired 95 % intervals over prompts; **~**: "
            "the best ties the runner-up (that interval covers 0); **=**: no gain over the baseline (that interval "
            "covers 0); a grey cell: too few prompts to rank (every rule's interval against the best covers 0). "
            "A single-draft rule (SD, GBV) ignores K: it judges the first "
            "draft alone.",
}


def how_to_read(view: str) -> gr.Markdown:
    """The caption under a view's charts (placed by the caller, inside its tab)."""
    return gr.Markdown("**How to read this:** " + HOW_TO_READ[view], elem_classes=["how-to-read"],
                       elem_id=f"how-to-read-{view}")


def shown_h(h: float | None) -> float | str:
    """h for the iteration's JSON: a number, or what a missing one means (never a bare null)."""
    return "skipped: an upper bound already decided this test" if h is None else h


def shown_expected(value: float | None) -> float | str:
    return "no closed form for this method" if value is None else value
