"""The guided lesson (a gr.Walkthrough): draft, acceptance test, residual, bonus, and why the
released rule is lossy, on the Toy world and the two-token example.

Every number in the text is computed here, from the runs its "try it" buttons start (steps 1 and
2 quote the first iteration the explorer shows), the pairs' own distributions (spectr_gbv.toy)
and the exact tables of the About view; none is typed in. Each step has a "try it" button that
sets the controls its text assumes, opens the view that shows the step and presses that view's
run button (components.tabs.lesson_try says what each one sets).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import gradio as gr

from spectr_gbv.toy import TWO_TOKEN_DRAFT, TWO_TOKEN_TARGET, decode

from ..wiring import classroom, private
from . import lesson_drafts, lesson_try
from .about import lossy_rows
from .lesson_try import playground_values
from .playground import tokens_shown


@lru_cache(maxsize=1)
def acceptance_numbers() -> dict:
    """What steps 1 and 2 quote, read from the first iteration of their "try it" run (the explorer shows
    the same p, q, q / p and h in its cells): the kept first guess and the rejected second one, each
    with the context it was drafted in."""
    plan = lesson_try.try_its()[2].values
    first = lesson_try.first_iteration(plan)
    (tokens,), (ps,), (qs,) = first.draft_tokens, first.draft_token_probs, first.target_token_probs
    words = decode(tokens)
    test = next(t for t in first.tests if t.start + t.length == 2 and not t.accepted)
    return {"context": plan["prompt"], "kept": words[0], "p_kept": ps[0], "q_kept": qs[0],
            "rejected": words[1], "p_rejected": ps[1], "q_rejected": qs[1], "h_rejected": test.accept_prob,
            "tau": first.num_accepted}


def step_texts() -> dict[int, tuple[str, str]]:
    """(title, markdown) of each step; the stepper numbers the titles itself."""
    t = acceptance_numbers()
    qa, qb = TWO_TOKEN_TARGET
    pa, pb = TWO_TOKEN_DRAFT
    residual = [max(qa - pa, 0), max(qb - pb, 0)]
    residual = [r / sum(residual) for r in residual]
    # The number step 4 quotes is the one the Playground shows at the settings its "try it" sets.
    shown = playground_values()
    tokens = tokens_shown(shown["alpha"], shown["playground K"], shown["playground L"])
    k1 = next(row for row in lossy_rows() if row[0] == 1)
    after = f"{t['context']} {t['kept']}"
    return {
        1: ("Draft", f"""
A small **draft** model guesses the next **L** tokens, one after another; a big **target** model will check them.
In the Toy world, after *"{t['context']}"* the draft's first guess in *try it* is *{t['kept']}*: the draft gives it
p = {t['p_kept']:.3f}, the target q = {t['q_kept']:.3f}. The draft is a blurred copy of the target: it agrees often,
not always. With **K** drafts, the draft model guesses K such blocks.
*Try it* runs this in **Generate**: every *accepted* (✓) token of the output is a draft guess the target kept."""),
        2: ("Acceptance test", f"""
The target scores all guesses in **one** call. A drafted token x is kept with probability
**h = min(1, q(x) / p(x))**. In *try it* (the run of step 1), *{t['kept']}* after *"{t['context']}"* is kept always
(q / p = {t['q_kept'] / t['p_kept']:.3f} > 1); the next guess, *{t['rejected']}* after *"{after}"*, has
q / p = {t['q_rejected'] / t['p_rejected']:.3f}, so it is kept only {t['h_rejected']:.0%} of the time, and here it is
rejected. The first rejection ends the block; **tau** is the number of draft tokens kept (here {t['tau']}). In the
**Iteration explorer** hover a cell to see p, q and h: each word's numbers depend on the words before it."""),
        3: ("Residual (correction)", f"""
After a rejection the target draws one token itself, from the **residual** norm(max(q - p, 0)): the part of the
target the draft under-proposes. On the two-token example (q = ({qa:.3f}, {qb:.3f}), p = ({pa:.3f}, {pb:.3f})) the
residual is ({residual[0]:.0f}, {residual[1]:.0f}): always B. That is what makes the text exact: A comes out with
probability p(A) h(A) = {pa:.3f} x {min(1, qa / pa):.2f} = {pa * min(1, qa / pa):.3f} = q(A). The residual token is
the **correction** token of the output's legend; *try it* opens an iteration that ends in one, and its chart."""),
        4: ("Bonus token", f"""
If all L guesses are kept, the target's call has already computed the next distribution, so one more token is
drawn from q for free: the **bonus**. Each iteration therefore emits tau + 1 tokens for one target call. On the
two-token example SD keeps a token with probability alpha = {shown['alpha']:g} (the overlap of p and q), so with
L = {shown['playground L']} it emits (1 - alpha^{shown['playground L'] + 1}) / (1 - alpha) =
**{tokens} tokens per target call** on average; the **Playground** draws this for any alpha, K and L (*try it*:
alpha = {shown['alpha']:g}, K = {shown['playground K']}, L = {shown['playground L']})."""),
        5: ("The released rule is lossy", f"""
Several drafts and block verification accept more, but only an **exact** rule keeps the target's distribution.
The authors' released SpecTr-GBV rule does not: on the two-token example at K = 1, L = 2 its law of the first
3 tokens is **{k1[4]:.3f}** away from the target's in total variation (the exact SpecTr-GBV: zero, up to rounding).
Open **Fidelity** to see it in counts: the released rule's bars leave the sampling-noise band."""),
        lesson_drafts.STEP: lesson_drafts.step(),  # why a second draft helps (components.tabs.lesson_drafts)
    }


# A tab's contents are mounted the first time it is shown, so its button may appear a moment after
# the tab opens; and a run button is disabled ("Running…", components.wiring.run_events) while its
# last run goes, when a click is ignored. Wait for it to be there and enabled (up to 60 s) rather
# than miss it: the run then starts with the values just set.
PRESS_JS = """() => {{
  const press = (tries) => {{
    const button = document.getElementById('{button}');
    if (button && !button.disabled) button.click(); else if (tries > 0) setTimeout(() => press(tries - 1), 100);
  }};
  press(600);
}}"""


# Gradio's Walkthrough disables the step buttons after the one shown (its click goes back only). A disabled
# button gets no click, so app.css lets a click through it to its step item, and this sends the step's number
# to `go_to_step` (the Walkthrough's own buttons still go back as before).
STEP_JS = r"""
const lesson = document.getElementById('lesson');
if (lesson && !lesson.dataset.forwardSteps) {
  lesson.dataset.forwardSteps = '1';
  lesson.addEventListener('click', (event) => {
    const item = event.target.closest('.step-item');
    const button = item && item.querySelector('.step-button');
    if (button && button.disabled) trigger('select', {index: parseInt(button.dataset.tabId, 10)});
  });
}
"""


def go_to_step(event: gr.EventData):
    """A click on a later step's number: that step (STEP_JS sends {index}; anything else is refused)."""
    data = getattr(event, "_data", None)
    step = data.get("index") if isinstance(data, dict) else None
    if not isinstance(step, int) or isinstance(step, bool) or step not in step_texts():
        raise ValueError(f"a step of the lesson is a number from 1 to {max(step_texts())}")
    return gr.Walkthrough(selected=step)


@dataclass
class LessonTab:
    walkthrough: gr.Walkthrough
    try_buttons: dict[int, gr.Button]  # by step
    class_button: gr.Button  # "Start a class", as the sidebar's


def build(page) -> None:
    """The walkthrough in its own tab; "try it" is wired once every tab exists (wire_events)."""
    texts = step_texts()
    last = max(texts)
    buttons = {}
    with gr.Tab("Lesson", id="lesson"):
        # Also at the top of the Lesson: the sidebar's button is out of sight where the sidebar starts closed.
        class_button = classroom.build("lesson-start-class")
        with gr.Walkthrough(selected=1, elem_id="lesson") as walkthrough:
            for step, (title, body) in texts.items():
                with gr.Step(title, id=step, elem_id=f"lesson-step-{step}"):
                    gr.Markdown(body)
                    with gr.Row():
                        back = gr.Button("◀ back", size="sm", interactive=step > 1, elem_id=f"lesson-back-{step}")
                        buttons[step] = gr.Button(lesson_try.try_its()[step].label, size="sm", variant="secondary",
                                                  elem_id=f"lesson-try-{step}")
                        forward = gr.Button("next ▶" if step < last else "start again", size="sm", variant="primary",
                                            elem_id=f"lesson-next-{step}")
                    back.click(lambda s=step: gr.Walkthrough(selected=max(s - 1, 1)), None, walkthrough,
                               api_visibility="private", queue=False)
                    forward.click(lambda s=step: gr.Walkthrough(selected=s + 1 if s < last else 1), None, walkthrough,
                                  api_visibility="private", queue=False)
        steps = gr.HTML("", elem_id="lesson-steps-forward", js_on_load=STEP_JS, apply_default_css=False)
        private.on(steps.select, go_to_step, None, walkthrough, queue=False, show_progress="hidden")
    page.tab_handles.lesson = LessonTab(walkthrough, buttons, class_button)


def wire_events(page) -> None:
    """Each "try it": its values into their controls and its tab opened, then its view's run button pressed.

    The button is pressed in the page (a click, not a second handler here), so the run is exactly
    what that view's own button starts, with its progress, Stop and queue."""
    controls = lesson_try.controls(page)
    quick = dict(api_visibility="private", queue=False)
    for step, button in page.tab_handles.lesson.try_buttons.items():
        plan = lesson_try.try_its()[step]
        targets = [controls[name] for name in plan.values]
        if plan.press:
            event = button.click(lambda p=plan: (*lesson_try.updates(p), gr.Tabs(selected=p.tab)), None,
                                 [*targets, page.tabs], **quick)
            event.then(None, None, None, js=PRESS_JS.format(button=plan.press), api_visibility="private")
            continue
        # A view without a run button (the Playground) answers each change of its controls. Values set in one
        # response change them at once, and those answers race: Gradio's page defers a change only while an
        # answer is pending, not when they start together, so the last answer could be for a half-set plan.
        # One value per event instead: each change starts once the one before is pending (then deferred).
        event = button.click(lambda p=plan: gr.Tabs(selected=p.tab), None, page.tabs, **quick)
        for index, target in enumerate(targets):
            event = event.then(lambda p=plan, i=index: lesson_try.updates(p)[i], None, target, **quick)
