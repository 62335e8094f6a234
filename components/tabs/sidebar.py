"""The sidebar: presentation mode and "Start a class" first, then the pair, the method, K, L, T, tokens,
seed and the methods every view reads."""

from __future__ import annotations

import html

import gradio as gr
from spectr_gbv.pairs import PAIRS, pair_key_of

from ..serving import limits
from ..wiring import classroom, private, share
from ..wiring.admission import caps
from ..wiring.errors import plain
from ..wiring.explorer_js import PRESENTATION_JS
from ..wiring.inputs import (DEFAULT_K, DEFAULT_L, DEFAULT_METHOD, DEFAULT_T, DEFAULT_TOKENS, PAIR_CHOICES, clamp_in_page,
                             compare_choices, default_compare, method_choices, prompt_for_pair)
from ..wiring.page import Sidebar
from ..wiring.runs import PAIR_CHANGED, STOPS
from ..wiring.settings import MAX_DRAFTS, MAX_NEW_TOKENS, MAX_TEMPERATURE


PLAYGROUND_NOTE = ("**K and L** are set on the Playground itself while it is open (theory, no model runs); "
                   "the runs' K and L come back with the other tabs.")


def pair_name_html(pair_key) -> str:
    """The chosen pair's whole name (its label; a typed 'TARGET, DRAFT' as typed), for the line under the box."""
    key = pair_key_of(pair_key) if isinstance(pair_key, str) else ""
    name = PAIRS[key].label if key in PAIRS else plain(str(pair_key or "")[:200])
    return f'<div class="pair-name">{html.escape(name)}</div>'


def build(default_pair: str) -> Sidebar:
    with gr.Sidebar(open=True, width=320) as box:
        # First: a teacher at a projector looks for these before anything else (at the sidebar's end they sat
        # below its fold): presentation mode, and the Lesson on a projector's settings in one click.
        presentation = gr.Checkbox(False, label="Presentation mode (larger text, for a projector)",
                                   elem_id="presentation-mode")
        class_button = classroom.build()
        pair = gr.Dropdown(PAIR_CHOICES, value=default_pair, label="Model pair",
                           allow_custom_value=limits.LIMITS.allow_any_model,
                           info="Hub pairs need the Hugging Face Hub; the others work offline."
                           + (" This server also accepts 'TARGET, DRAFT' (hub ids or folders)." if limits.LIMITS.allow_any_model else ""))
        # The box cuts a long pair name (an input cannot wrap): the whole name, wrapped, under it.
        name = gr.HTML(pair_name_html(default_pair), elem_id="pair-name", apply_default_css=False)
        private.on(pair.change, pair_name_html, pair, name, queue=False, show_progress="hidden")
        method = gr.Dropdown(method_choices(), value=DEFAULT_METHOD, label="Method (Generate, Fidelity, Race)")
        num_drafts = gr.Slider(1, MAX_DRAFTS, value=DEFAULT_K, step=1, label="K (drafts)",
                               info=caps.ignored_info(DEFAULT_METHOD, "K"), elem_id="num-drafts")
        draft_length = gr.Slider(1, caps.max_draft_length(DEFAULT_K), value=DEFAULT_L, step=1, label="L (draft length)",
                                 info=caps.draft_length_info(DEFAULT_K, DEFAULT_METHOD), elem_id="draft-length")
        # Shown instead of K and L while the Playground is chosen (components.tabs.playground).
        playground_note = gr.Markdown(PLAYGROUND_NOTE, visible=False, elem_id="sidebar-playground-note")
        temperature = gr.Slider(0, MAX_TEMPERATURE, value=DEFAULT_T, step=0.05, label="T (temperature)", info="0 = greedy")
        max_new_tokens = gr.Slider(1, MAX_NEW_TOKENS, value=DEFAULT_TOKENS, step=1, label="Max new tokens")
        seed = gr.Number(value=0, precision=0, minimum=0, label="Seed", info="Same settings + seed = same tokens")
        clamp_in_page(seed)
        methods = gr.CheckboxGroup(compare_choices(), value=default_compare(), label="Methods (Compare, Sweep)")
        link_controls = share.build_link_controls()
    return Sidebar(pair, method, num_drafts, draft_length, temperature, max_new_tokens, seed, methods, presentation,
                   link_controls, box, playground_note, class_button)


def stop_for_the_new_pair(request: gr.Request = None) -> None:
    """Another pair picked: the session's run in progress ends at its next step, its note saying why (it
    would go on streaming the old pair's tokens under the new pair's name). With no run going, the next
    run's start forgets the request, as it does a Stop pressed before it."""
    STOPS.ask(getattr(request, "session_hash", None), PAIR_CHANGED)


def wire_events(page) -> None:
    s = page.sidebar
    # The page's class switches at once (in the page); the fold of the prompt and the lossy note closes,
    # so a projector's first screen shows the chosen tab, and opens again when presentation mode ends.
    s.presentation.change(lambda on: gr.Accordion(open=not on), s.presentation, page.fold, js=PRESENTATION_JS,
                          api_visibility="private", queue=False)
    # A pair the user picks gets a prompt it can read (a shared link or a lesson step sets both itself), and
    # stops the session's run in progress.
    private.on(s.pair.input, prompt_for_pair, [s.pair, page.prompt], page.prompt, queue=False, show_progress="hidden")
    private.on(s.pair.input, stop_for_the_new_pair, None, None, queue=False, show_progress="hidden")
    sweep, fidelity = page.tab_handles.sweep, page.tab_handles.fidelity
    caps.cap_controls(s.pair, s.method, s.num_drafts, s.draft_length, s.methods, sweep.values,
                      fidelity.num_runs, fidelity.num_tokens)
