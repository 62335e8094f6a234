"""The guided lesson (a gr.Walkthrough): draft, acceptance test, residual, bonus, and why the
released rule is lossy, on the Toy world and the two-token example.

Every number in the text is computed here from the pairs' own distributions (spectr_gbv.toy)
and the exact tables of the About view; none is typed in. Each step has a "try it" button that
sets the sidebar to a run that shows the step.
"""

from __future__ import annotations

from functools import lru_cache

import gradio as gr

from spectr_gbv import theory
from spectr_gbv.pairs import TOY_KEY, TWO_TOKEN_KEY
from spectr_gbv.toy import TWO_TOKEN_DRAFT, TWO_TOKEN_TARGET, WORDS, toy_pair

from .about import lossy_rows

TOY_PROMPT = "the cat"
# (pair, prompt, method, K, L, T, tab) each step's "try it" sets; the tab opens with it.
TRY = {
    1: (TOY_KEY, TOY_PROMPT, "sd", 1, 3, 1.0, "generate"),
    2: (TOY_KEY, TOY_PROMPT, "sd", 1, 3, 1.0, "generate"),
    3: (TWO_TOKEN_KEY, "A", "sd", 1, 2, 1.0, "generate"),
    4: (TWO_TOKEN_KEY, "A", "sd", 1, 2, 1.0, "playground"),
    5: (TWO_TOKEN_KEY, "A", "spectr_gbv_released", 1, 2, 1.0, "fidelity"),
}
TRY_LABELS = {1: "Try it: the Toy world, SD, K = 1, L = 3", 2: "Try it: the Toy world, SD, K = 1, L = 3",
              3: "Try it: the two-token example, SD, L = 2", 4: "Open the Playground",
              5: "Open Fidelity: the released rule, two-token example, K = 1, L = 2"}


@lru_cache(maxsize=1)
def toy_numbers() -> dict[str, float]:
    """Draft and target probabilities of two next words after 'the cat' in the Toy world."""
    context = tuple(WORDS.index(w) for w in TOY_PROMPT.split())
    target, draft = toy_pair()
    q, p = target.next_token_probs(context), draft.next_token_probs(context)
    sat, dog = WORDS.index("sat"), WORDS.index("dog")
    return {"q_sat": float(q[sat]), "p_sat": float(p[sat]), "q_dog": float(q[dog]), "p_dog": float(p[dog])}


def step_texts() -> dict[int, tuple[str, str]]:
    """(title, markdown) of each step."""
    t = toy_numbers()
    qa, qb = TWO_TOKEN_TARGET
    pa, pb = TWO_TOKEN_DRAFT
    residual = [max(qa - pa, 0), max(qb - pb, 0)]
    residual = [r / sum(residual) for r in residual]
    alpha = min(pa, qa) + min(pb, qb)  # SD's acceptance chance: the overlap of p and q
    tokens = theory.single_draft_tokens(alpha, 2)
    k1 = next(row for row in lossy_rows() if row[0] == 1)
    return {
        1: ("1. Draft", f"""
A small **draft** model guesses the next **L** tokens, one after another; a big **target** model will check them.
In the Toy world, after *"{TOY_PROMPT}"* the draft gives *sat* probability p = {t['p_sat']:.3f} and *dog*
p = {t['p_dog']:.3f}; the target gives them q = {t['q_sat']:.3f} and q = {t['q_dog']:.3f}. The draft is a blurred
copy of the target: it agrees often, not always. With **K** drafts, the draft model guesses K such blocks."""),
        2: ("2. Acceptance test", f"""
The target scores all guesses in **one** call. A drafted token x is kept with probability
**h = min(1, q(x) / p(x))**: *sat* is kept always (q / p = {t['q_sat'] / t['p_sat']:.2f} > 1), *dog* only
{min(1, t['q_dog'] / t['p_dog']):.0%} of the time (q / p = {t['q_dog'] / t['p_dog']:.3f}). The first rejection ends
the block; **tau** is the number of draft tokens kept. In the **Iteration explorer** hover a cell to see p, q and h."""),
        3: ("3. Residual (the correction token)", f"""
After a rejection the target draws one token itself, from the **residual** norm(max(q - p, 0)): the part of the
target the draft under-proposes. On the two-token example (q = ({qa:.3f}, {qb:.3f}), p = ({pa:.3f}, {pb:.3f})) the
residual is ({residual[0]:.0f}, {residual[1]:.0f}): always B. That is what makes the text exact: A comes out with
probability p(A) h(A) = {pa:.3f} x {min(1, qa / pa):.2f} = {pa * min(1, qa / pa):.3f} = q(A). The residual token is
the **correction** token of the output's legend."""),
        4: ("4. Bonus token", f"""
If all L guesses are kept, the target's call has already computed the next distribution, so one more token is
drawn from q for free: the **bonus**. Each iteration therefore emits tau + 1 tokens for one target call. On the
two-token example SD keeps a token with probability alpha = {alpha:.3f} (the overlap of p and q), so with L = 2 it
emits (1 - alpha^3) / (1 - alpha) = **{tokens:.3f} tokens per target call** on average; the **Playground** draws
this for any alpha, K and L."""),
        5: ("5. The released rule is lossy", f"""
Several drafts and block verification accept more, but only an **exact** rule keeps the target's distribution.
The authors' released SpecTr-GBV rule does not: on the two-token example at K = 1, L = 2 its law of the first
3 tokens is **{k1[4]:.3f}** away from the target's in total variation (the exact SpecTr-GBV: {k1[2]:.0e}, zero up to rounding).
Open **Fidelity** to see it in counts: the released rule's bars leave the sampling-noise band."""),
    }


def build_lesson(controls: dict, tabs: gr.Tabs) -> gr.Walkthrough:
    """The walkthrough, inside the caller's tab. `controls` maps pair, prompt, method, K, L and T to
    the sidebar's components; "try it" sets them and opens the step's tab."""
    texts = step_texts()
    order = ["pair", "prompt", "method", "K", "L", "T"]
    last = max(texts)
    with gr.Walkthrough(selected=1, elem_id="lesson") as walkthrough:
        for step, (title, body) in texts.items():
            with gr.Step(title, id=step, elem_id=f"lesson-step-{step}"):
                gr.Markdown(body)
                with gr.Row():
                    back = gr.Button("◀ back", size="sm", interactive=step > 1, elem_id=f"lesson-back-{step}")
                    try_it = gr.Button(TRY_LABELS[step], size="sm", variant="secondary", elem_id=f"lesson-try-{step}")
                    forward = gr.Button("next ▶" if step < last else "start again", size="sm", variant="primary",
                                        elem_id=f"lesson-next-{step}")
                back.click(lambda s=step: gr.Walkthrough(selected=max(s - 1, 1)), None, walkthrough,
                           api_visibility="private", queue=False)
                forward.click(lambda s=step: gr.Walkthrough(selected=s + 1 if s < last else 1), None, walkthrough,
                              api_visibility="private", queue=False)
                try_it.click(lambda s=step: (*TRY[s][:-1], gr.Tabs(selected=TRY[s][-1])), None,
                             [*(controls[k] for k in order), tabs], api_visibility="private", queue=False)
    return walkthrough
