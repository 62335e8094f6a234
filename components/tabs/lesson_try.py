"""What each lesson step's "try it" sets, opens and runs: the settings its text assumes.

A step's values are keyed by control name (`controls` maps the names to the page's
components); `press` is the run button of the view it opens, pressed once the values are in, so
the view shows the step's example rather than waiting for a click. Where the text describes an
event or quotes a number, the values are the ones that produce it: steps 1 and 2 take the first
seed whose first iteration keeps a draft token the target wants more than the draft and then
rejects one (their texts quote that iteration's p, q and h), step 3 the first whose first
iteration ends in a correction token, and step 4's Playground settings give the tokens per call
its text quotes (lesson.step_texts computes the text from `playground_values`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from functools import lru_cache

import gradio as gr

from spectr_gbv.engine import decode_iterations
from spectr_gbv.methods import METHODS
from spectr_gbv.pairs import TOY_KEY, TWO_TOKEN_KEY, get_pair
from spectr_gbv.toy import TWO_TOKEN_DRAFT, TWO_TOKEN_TARGET

from ..wiring.admission import caps
from . import fidelity
from ..wiring.inputs import DEFAULT_TOKENS
from ..wiring.settings import settings

TOY_PROMPT, TWO_TOKEN_PROMPT = "the cat", "A"
# SD keeps a drafted token with probability alpha = the overlap of p and q; the Playground's
# slider holds it to 3 decimals (0.667 for 2/3: the tokens per call it shows round alike).
TWO_TOKEN_ALPHA = round(sum(min(p, q) for p, q in zip(TWO_TOKEN_DRAFT, TWO_TOKEN_TARGET)), 3)
RELEASED = next(name for name, spec in METHODS.items() if not spec.exact)
FIDELITY_TOKENS = 3  # step 5's text: the law of the first 3 tokens
RELEASED_STEP = 5  # the step whose "try it" shows the released rule failing Fidelity (also Fidelity's own button)


@dataclass(frozen=True)
class TryIt:
    label: str
    values: dict = field(default_factory=dict)  # control name -> value
    tab: str = "generate"  # the tab it opens
    press: str | None = None  # elem_id of the button it presses in that view


def _run(pair: str, prompt: str, draft_length: int, seed: int = 0) -> dict:
    """A Generate run of SD with one draft (the lesson's steps 1-3)."""
    return {"pair": pair, "prompt": prompt, "method": "sd", "K": 1, "L": draft_length, "T": 1.0,
            "tokens": DEFAULT_TOKENS, "seed": seed}


@lru_cache(maxsize=None)
def correction_seed(pair_key: str, prompt: str, draft_length: int, least_kept: int = 0) -> int:
    """The first seed whose first iteration (SD, one draft) keeps at least `least_kept` draft tokens,
    then rejects one and draws its correction token."""
    pair = get_pair(pair_key)
    plan = _run(pair_key, prompt, draft_length)
    prompt_ids = pair.encode(prompt)
    for seed in itertools.count():
        config = settings(plan["K"], plan["L"], plan["T"], plan["tokens"], seed).config(plan["method"])
        first = next(iter(decode_iterations(pair.target, pair.draft, prompt_ids, config)))
        if first.final_kind == "correction" and first.num_accepted >= least_kept:
            return seed


@lru_cache(maxsize=None)
def acceptance_seed(pair_key: str, prompt: str, draft_length: int) -> int:
    """The first seed whose first iteration (SD, one draft) keeps its first draft token, one the target
    wants more than the draft (q / p > 1: kept always), then rejects the next (q / p < 1) and draws its
    correction: the two cases of the acceptance test, one after the other (steps 1 and 2)."""
    pair = get_pair(pair_key)
    prompt_ids = pair.encode(prompt)
    for seed in itertools.count():
        first = first_iteration(_run(pair_key, prompt, draft_length, seed), pair, prompt_ids)
        (ps,), (qs,) = first.draft_token_probs, first.target_token_probs
        if first.final_kind == "correction" and first.num_accepted == 1 and qs[0] > ps[0] and qs[1] < ps[1]:
            return seed


def first_iteration(plan: dict, pair=None, prompt_ids=None):
    """The first iteration of a step's run (what the explorer opens on)."""
    pair = pair or get_pair(plan["pair"])
    prompt_ids = pair.encode(plan["prompt"]) if prompt_ids is None else prompt_ids
    config = settings(plan["K"], plan["L"], plan["T"], plan["tokens"], plan["seed"]).config(plan["method"])
    return next(iter(decode_iterations(pair.target, pair.draft, prompt_ids, config)))


def playground_values() -> dict:
    """Step 4's Playground: SD (K = 1) on the two-token example's alpha, L = 2."""
    return {"alpha": TWO_TOKEN_ALPHA, "playground K": 1, "playground L": 2}


@lru_cache(maxsize=1)
def try_its() -> dict[int, TryIt]:
    """Each step's "try it", by step."""
    from . import lesson_drafts  # it builds on this module's TryIt and prompt
    # steps 1 and 2 show the same run: its first iteration keeps a token the target wants more than the draft,
    # then rejects one it wants less (which ends the block); step 3's ends in a correction
    toy = _run(TOY_KEY, TOY_PROMPT, 3, acceptance_seed(TOY_KEY, TOY_PROMPT, 3))
    rejected = toy
    correction = _run(TWO_TOKEN_KEY, TWO_TOKEN_PROMPT, 2, correction_seed(TWO_TOKEN_KEY, TWO_TOKEN_PROMPT, 2))
    shown = playground_values()
    released = {key: value for key, value in _run(TWO_TOKEN_KEY, TWO_TOKEN_PROMPT, 2).items()
                if key not in ("tokens", "seed")}  # Fidelity reads neither: its runs use seeds 0..N-1
    released |= {"method": RELEASED, "N": fidelity_runs(), "first tokens": FIDELITY_TOKENS}
    return {
        # step 1 shows the output (the draft's kept guesses), step 2 one iteration's acceptance tests
        1: TryIt(f"Try it: SD on the Toy world, K = 1, L = {toy['L']}, in Generate", toy, "generate", "generate-button"),
        2: TryIt(f"Try it: one iteration in the explorer (Toy world, SD, L = {rejected['L']})", rejected, "explorer",
                 "generate-button"),
        3: TryIt(f"Try it: a correction token (two-token example, SD, L = {correction['L']})", correction, "explorer",
                 "generate-button"),
        4: TryIt(f"Try it: the Playground at alpha = {shown['alpha']:g}, K = {shown['playground K']}, "
                 f"L = {shown['playground L']}", shown, "playground"),
        RELEASED_STEP: TryIt(f"Try it: Fidelity, the released rule, two-token example, K = 1, L = {released['L']}", released,
                 "fidelity", "fidelity-button"),
        lesson_drafts.STEP: lesson_drafts.try_it(),  # SpecTr with three drafts, in the explorer
    }


def fidelity_runs() -> int:
    """Step 5's N: Fidelity's own default for these settings (enough to leave the noise band; the test checks)."""
    return fidelity.default_runs(TWO_TOKEN_KEY, RELEASED, 1, 2, FIDELITY_TOKENS)


def updates(plan: TryIt) -> list:
    """The plan's values as updates of their controls, in its order. N's slider also gets this pair's
    maximum: until the pair's change caps it, the slider still has the previous pair's (a real
    model's is lower, and would clip N)."""
    most = caps.max_fidelity_runs(TWO_TOKEN_KEY, RELEASED, 2, FIDELITY_TOKENS, num_drafts=1)
    return [gr.update(value=value, maximum=most) if name == "N" else gr.update(value=value)
            for name, value in plan.values.items()]


def controls(page) -> dict:
    """Control name -> component: the sidebar's and the prompt (page.controls), Fidelity's N and first
    tokens, the Playground's alpha, K and L."""
    playground, fidelity_tab = page.tab_handles.playground, page.tab_handles.fidelity
    return {**page.controls, "tokens": page.sidebar.max_new_tokens, "N": fidelity_tab.num_runs,
            "first tokens": fidelity_tab.num_tokens, "alpha": playground.alpha,
            "playground K": playground.num_drafts, "playground L": playground.draft_length}
