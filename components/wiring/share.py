"""Shareable links: URL query parameters that restore pair, prompt, method, K, L, T, seed and tab,
presentation mode (`present`) and the Lesson's step (`step`), so a class opens as it was left.

`read_link` turns a link's parameters into settings and a message for each value it could not
use (that setting keeps its default: a link never breaks the page). A link's pair gets a prompt it
can read, as when a visitor picks the pair: the link's own, else the page's, else the pair's example.
`link_query` writes the current settings back as a query string, without a prompt the pair cannot
read; the page adds its own address and copies the link.
"""

from __future__ import annotations

from typing import Mapping
from urllib.parse import urlencode

import gradio as gr

from spectr_gbv.pairs import PAIRS

from ..serving.limits import check_block
from . import private
from .inputs import pair_reads, prompt_for_pair
from .settings import MAX_DRAFT_LENGTH, MAX_DRAFTS, MAX_TEMPERATURE, check_method, check_prompt, number, shown

# Tab names as the page shows them -> the ids of app.build_demo's tabs (a link names the id).
TABS = {"Generate": "generate", "Iteration explorer": "explorer", "Compare": "compare", "Race": "race",
        "Sweep": "sweep", "Grid": "grid", "Fidelity": "fidelity", "Lesson": "lesson", "Playground": "playground", "About": "about"}
NUMBERS = {"K": ("K (drafts)", 1, MAX_DRAFTS, True), "L": ("L (draft length)", 1, MAX_DRAFT_LENGTH, True),
           "T": ("T (temperature)", 0, MAX_TEMPERATURE, False), "seed": ("seed", 0, 2**31 - 1, True)}
KEYS = ("pair", "prompt", "method", *NUMBERS, "tab", "present", "step")
FLAGS = {"1": True, "on": True, "true": True, "yes": True, "0": False, "off": False, "false": False, "no": False}
MAX_VALUE_CHARS = 4000


def _pair(value: str) -> str:
    by_label = {info.label: key for key, info in PAIRS.items()}
    key = by_label.get(value, value)
    if key not in PAIRS:
        raise ValueError(f"unknown pair {shown(value)}; a link can name: {', '.join(PAIRS)}")
    return key


def _tab(value: str) -> str:
    ids = {v: v for v in TABS.values()} | {name.lower(): tab for name, tab in TABS.items()}
    if value.lower() not in ids:
        raise ValueError(f"unknown tab {shown(value)}; one of: {', '.join(TABS.values())}")
    return ids[value.lower()]


def _flag(value: str) -> bool:
    if value.strip().lower() not in FLAGS:
        raise ValueError(f"presentation mode must be 1 or 0 (on or off), got {shown(value)}")
    return FLAGS[value.strip().lower()]


def lesson_steps() -> int:
    """How many steps the Lesson has (read from its try-its, one per step)."""
    from ..tabs import lesson_try  # the tab's plans; imported here: this module is imported while the tabs are

    return len(lesson_try.try_its())


def read_link(params: Mapping[str, object], prompt_now: str | None = None) -> tuple[dict[str, object], list[str]]:
    """(settings this link sets, one message per value it cannot use). Never raises.

    With a pair, the prompt is one it reads: the link's, if the pair reads it; else the pair's prompt rule
    (`inputs.prompt_for_pair`) applied to `prompt_now`, the page's prompt (a link with no prompt) or to
    nothing (the pair's example)."""
    values: dict[str, object] = {}
    problems: list[str] = []
    for key, raw in params.items():
        if key not in KEYS:
            problems.append(f"unknown link parameter {shown(key)} ignored (a link can set: {', '.join(KEYS)})")
            continue
        try:
            if not isinstance(raw, str) or len(raw) > MAX_VALUE_CHARS:
                raise ValueError(f"the value must be text of at most {MAX_VALUE_CHARS} characters")
            if key in NUMBERS:
                name, low, high, integer = NUMBERS[key]
                values[key] = number(name, raw, low, high, integer)
            elif key == "pair":
                values[key] = _pair(raw)
            elif key == "prompt":
                values[key] = check_prompt(raw)
            elif key == "method":
                values[key] = check_method(raw)
            elif key == "present":
                values[key] = _flag(raw)
            elif key == "step":
                values[key] = number("the lesson step", raw, 1, lesson_steps(), True)
            else:
                values[key] = _tab(raw)
        except ValueError as error:
            problems.append(f"{key}: {error}; the default is used")
    if "pair" in values:
        given = values.get("prompt")
        if given is not None and not pair_reads(values["pair"], given):
            problems.append(f"prompt: the pair {values['pair']} cannot read it (not its words); its own prompt is used")
            given = None
        if given is None:
            prompt = prompt_for_pair(values["pair"], "" if "prompt" in values else prompt_now)
            values.pop("prompt", None)
            if prompt.strip() and prompt != prompt_now:
                values["prompt"] = prompt
    if "K" in values or "L" in values:
        try:
            check_block(int(values.get("K", 1)), int(values.get("L", 1)))
        except ValueError as error:
            values.pop("K", None), values.pop("L", None)
            problems.append(f"{error}; K and L keep their defaults")
    return values, problems


def link_query(pair, prompt, method, num_drafts, draft_length, temperature, seed, presentation=None, step=None,
               tab_name=None) -> str:
    """'?pair=...&...' for the current settings (what the page shows; a value it cannot read is left out, and so
    is a prompt the pair cannot read: the link's pair then brings its own).

    `presentation`: the checkbox; `step`: the Lesson's step shown (its number, or "" when the page has none)."""
    raw = {"pair": pair, "prompt": prompt, "method": method, "K": num_drafts, "L": draft_length, "T": temperature,
           "seed": seed, "tab": TABS.get(str(tab_name).strip(), ""),
           "present": "1" if presentation is True else "0" if presentation is False else "", "step": step}
    text = {key: _as_text(value) for key, value in raw.items()}
    values, _ = read_link({key: value for key, value in text.items() if value != ""})
    if values.get("prompt") != text["prompt"]:
        values.pop("prompt", None)  # read_link gave the pair its own prompt: the link's reader gets it anyway
    ordered = {key: _as_text(values[key]) for key in KEYS if key in values}
    return "?" + urlencode(ordered)


def _as_text(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return "" if value is None else str(value)


def note_markdown(problems: list[str]) -> str:
    if not problems:
        return ""
    return "**This link had values the app could not use:**\n" + "\n".join(f"* {p}" for p in problems)


# The current tab and the Lesson's step are read from the page (neither has a value of its own); the
# link is then completed with the page's own address, put into the address bar and copied when allowed.
SELECTED_TAB_JS = r"""(...values) => {
  const tab = document.querySelector("#main-tabs button[role='tab'][aria-selected='true']")
    || document.querySelector("button[role='tab'][aria-selected='true']");
  values[values.length - 1] = tab ? tab.textContent.trim() : "";
  const shown = (e) => {  // no hidden ancestor (a step's own box may be display: contents)
    for (let n = e; n; n = n.parentElement) {
      const style = getComputedStyle(n);
      if (style.display === "none" || style.visibility === "hidden") return false;
    }
    return true;
  };
  // the shown step's panel (the stepper's buttons are lesson-step-N-button)
  const steps = [...document.querySelectorAll("[id^='lesson-step-']")]
    .filter((e) => /^lesson-step-\d+$/.test(e.id) && shown(e));
  values[values.length - 2] = steps.length ? steps[0].id.replace("lesson-step-", "") : "";
  return values;
}"""
COMPLETE_LINK_JS = """(query) => {
  const url = window.location.origin + window.location.pathname + query;
  window.history.replaceState(null, "", url);
  if (navigator.clipboard) { navigator.clipboard.writeText(url).catch(() => {}); }
  return url;
}"""


def build_link_controls() -> tuple[gr.Button, gr.Textbox, gr.Textbox, gr.Textbox]:
    """The copy-link button, the link it writes, and the hidden boxes the current tab's name and the
    Lesson's step travel in."""
    button = gr.Button("Copy a link to these settings", size="sm", elem_id="copy-link")
    link = gr.Textbox(label="Link to these settings", interactive=False, buttons=["copy"], elem_id="share-link",
                      placeholder="press the button above")
    tab_name = gr.Textbox(visible=False)
    step_name = gr.Textbox(visible=False)
    return button, link, tab_name, step_name


def restored(params: Mapping[str, object], order: list[str], prompt_now: str | None = None) -> tuple:
    """The updates a link's parameters make: the controls in `order`, the tabs, presentation mode, the
    Lesson's step, and the note on what the link could not set (`prompt_now`: the page's prompt)."""
    values, problems = read_link(params, prompt_now if isinstance(prompt_now, str) else None)
    updates = [gr.update(value=values[k]) if k in values else gr.skip() for k in order]
    selected = gr.Tabs(selected=values["tab"]) if "tab" in values else gr.skip()
    present = gr.update(value=values["present"]) if "present" in values else gr.skip()
    step = gr.Walkthrough(selected=values["step"]) if "step" in values else gr.skip()
    return *updates, selected, present, step, gr.update(value=note_markdown(problems), visible=bool(problems))


def wire(demo: gr.Blocks, tabs: gr.Tabs, note: gr.Markdown, controls: dict, button, link, tab_name, step_name,
         presentation: gr.Checkbox, walkthrough: gr.Walkthrough) -> None:
    """Restore settings from the page's link when it opens; write the link when the button is pressed.

    `controls` maps "pair", "prompt", "method", "K", "L", "T" and "seed" to their components;
    `presentation` is the presentation-mode checkbox and `walkthrough` the Lesson's stepper."""
    order = ["pair", "prompt", "method", "K", "L", "T", "seed"]
    settings = [controls[k] for k in order]

    def restore(prompt_now, request: gr.Request):
        return restored(dict(request.query_params) if request is not None else {}, order, prompt_now)

    private.on(demo.load, restore, controls["prompt"], [*settings, tabs, presentation, walkthrough, note], queue=False)
    # The link is completed in the browser only (no Python function: the gate refuses it over the API).
    private.on(button.click, link_query, [*settings, presentation, step_name, tab_name], link, js=SELECTED_TAB_JS,
               queue=False).then(None, link, link, js=COMPLETE_LINK_JS, api_visibility="private")
