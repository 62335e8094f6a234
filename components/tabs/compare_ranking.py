"""Compare's note before the run: can the prompt, or the prompt set, chosen rank the rules at these settings?

Read off the pair's saved grid (components.tabs.grid_saved): the cell at the sidebar's K and L
(the nearest T saved) says how many prompts its best exact rule needed to separate from the
runner-up (`spectr_gbv.bench.grid_cells.prompts_to_rank`). A pair or a K x L without a saved
cell gets no note: nothing is claimed that was not measured.
"""

from __future__ import annotations

import gradio as gr

from spectr_gbv.bench.grid_cells import label, prompts_to_rank
from spectr_gbv.pairs import pair_key_of

from ..wiring import private
from ..wiring.inputs import DEFAULT_K, DEFAULT_L, DEFAULT_T
from ..wiring.prompt_set_choice import SINGLE, check_set_name, set_size
from ..wiring.settings import MAX_DRAFT_LENGTH, MAX_DRAFTS, MAX_TEMPERATURE, check_pair_key, number
from . import grid_saved


def ranking_note(pair_key, num_drafts, draft_length, temperature, prompt_set) -> str:
    """The note for these settings (raw inputs checked), or "" where no saved cell speaks to them."""
    key = pair_key_of(check_pair_key(pair_key))
    K = number("K (drafts)", num_drafts, 1, MAX_DRAFTS)
    L = number("L (draft length)", draft_length, 1, MAX_DRAFT_LENGTH)
    T = float(number("T (temperature)", temperature, 0, MAX_TEMPERATURE, integer=False))
    size = set_size(check_set_name(prompt_set), key)
    cells = [cell for _, cell in grid_saved.saved_cells(key) if (cell.K, cell.L) == (K, L)]
    if not cells:
        return ""
    cell = min(cells, key=lambda c: (abs(c.T - T), -c.prompts))  # the nearest T; of those, the most prompts
    if cell.runner_up is None:
        return ""
    where = (f"In the saved grid of this pair at K = {K}, L = {L}, T = {cell.T:g} ({cell.prompts} prompts), the best "
             f"exact rule ({label(cell.best)}) and the runner-up ({label(cell.runner_up)})")
    need = prompts_to_rank(cell)
    chosen = f"{size} prompt{'s' if size != 1 else ''}"
    if need is None:
        return f"{where} would need more than 10,000 prompts to separate: {chosen} will not rank them."
    verdict = "will not rank them" if size < need else "can rank them"
    return (f"{where} would need about {need:,} prompts to separate (at that grid's mean difference and spread): "
            f"{chosen} {verdict}.")


def build(pair_key: str) -> gr.Markdown:
    """The note at the page's pair and the sidebar's defaults, for the prompt alone."""
    return gr.Markdown(ranking_note(pair_key, DEFAULT_K, DEFAULT_L, DEFAULT_T, SINGLE), elem_id="compare-ranking")


def wire(note: gr.Markdown, sidebar, prompt_set: gr.Dropdown) -> None:
    """The note follows the pair, K, L, T and the prompt set: the pair on `change` (a visitor's pick, and what links
    and the classroom set), the others on `input` (a slider's `change` can loop, see components.tabs.repeats_sizing)."""
    inputs = [sidebar.pair, sidebar.num_drafts, sidebar.draft_length, sidebar.temperature, prompt_set]
    hidden = dict(queue=False, show_progress="hidden")
    private.on(sidebar.pair.change, ranking_note, inputs, note, **hidden)
    for control in inputs[1:]:
        private.on(control.input, ranking_note, inputs, note, **hidden)
