"""What every view's handler does first: the pair and prompt checked, the run sized against the limits.

Also the app's choices and defaults that several views share (the pairs, the methods, the
examples), all read from the registries (spectr_gbv.pairs, spectr_gbv.methods), and the page's
clamp of a number field to its range (`clamp_in_page`)."""

from __future__ import annotations

from spectr_gbv import AUTOREGRESSIVE, METHODS
from spectr_gbv.pairs import PAIRS, get_pair, is_teaching, pair_key_of
from spectr_gbv.prompt_sets import EXAMPLES  # noqa: F401 - the views' examples

from ..serving import limits
from ..serving.limits import check_fits, check_prompt_tokens, fewest_iterations
from .loading import LOADING as LOADING_NOTE, load_with_progress
from .settings import check_pair_key, check_prompt

PAIR_CHOICES = [(info.label, key) for key, info in PAIRS.items()]


def method_choices() -> list[tuple[str, str]]:
    """Generate's and Fidelity's choices: AR and every registered method."""
    return [("AR (plain target sampling)", AUTOREGRESSIVE)] + compare_choices()


def compare_choices() -> list[tuple[str, str]]:
    return [(spec.label, name) for name, spec in METHODS.items()]


def default_compare() -> list[str]:
    """The methods ticked in Compare and Sweep when the page opens (the registry says which)."""
    return [name for name, spec in METHODS.items() if spec.compare_by_default]

# The registry's one `app_default` entry (spectr_gbv.methods says why it is that rule).
DEFAULT_METHOD = next(name for name, spec in METHODS.items() if spec.app_default)
# The sidebar's K, L, T and max new tokens when the page opens (make bench: K = 2, L = 4 pays on a
# CPU); the views size their own defaults (Compare's repeats, Sweep's values, Fidelity's N) from
# the cost of these (components.wiring.admission.cost).
DEFAULT_K, DEFAULT_L, DEFAULT_T, DEFAULT_TOKENS = 2, 4, 0.7, 40
DEFAULT_SETTINGS = (DEFAULT_K, DEFAULT_L, DEFAULT_TOKENS)


TEACHING_KEYS = [key for key, info in PAIRS.items() if info.teaching]


def example_prompt(pair_key: str) -> str:
    """A pair's own first example prompt; a model pair without one gets the default pair's."""
    return next((text for key, text in EXAMPLES if key == pair_key), EXAMPLES[0][1])


def pair_reads(pair_key: str, prompt: str) -> bool:
    """Whether the pair can read the prompt: a teaching pair reads only its own words; a model pair reads any
    prompt (checked as text only: its tokenizer is not loaded for this)."""
    key = pair_key_of(check_pair_key(pair_key))
    return _reads(key, prompt) if is_teaching(key) else bool(isinstance(prompt, str) and prompt.strip())


def _reads(pair_key: str, prompt: str) -> bool:
    try:
        get_pair(pair_key).encode(check_prompt(prompt))
    except ValueError:
        return False
    return True


def prompt_for_pair(pair_key, prompt):
    """The prompt box when the user picks a pair: a teaching pair gets its own example unless it reads
    the prompt already; a model pair gets the default prompt back in place of a teaching pair's
    prompt (one a teaching pair reads); any other prompt stays as typed."""
    key = pair_key_of(check_pair_key(pair_key))
    text = prompt if isinstance(prompt, str) else ""
    if is_teaching(key):
        return text if _reads(key, text) else example_prompt(key)
    if text.strip() and any(_reads(k, text) for k in TEACHING_KEYS):
        return example_prompt(key)
    return text


def prepare(pair_key, prompt, progress=None):
    """(pair, prompt token ids), checked; a model pair may load now, and the progress line says at what stage."""
    key = check_pair_key(pair_key)
    load = lambda: get_pair(key, allow_custom=limits.LIMITS.allow_any_model)  # noqa: E731
    pair = load_with_progress(load, progress) if progress is not None and not is_teaching(key) else load()
    prompt_ids = pair.encode(check_prompt(prompt))
    check_prompt_tokens(len(prompt_ids))
    return pair, prompt_ids


def draft_for(pair, method):
    return None if method == AUTOREGRESSIVE else pair.draft


def check_runs_fit(pair, runs: list[tuple[int, int]], tokens: int, what: str, extra: int = 0,
                   advice: str = "fewer tokens, or a longer L") -> None:
    """Refuse up front what cannot fit: `runs` is (how many, L; 0 for AR) runs of `tokens` tokens each
    (`advice`: what the view can change)."""
    early = pair.target.eos_token_id is not None
    check_fits(sum(n * fewest_iterations(tokens, length, early) for n, length in runs) + extra, what, advice=advice)


def clamp_in_page(number) -> None:
    """A whole-number field (gr.Number) kept within its minimum and maximum in the browser, as a slider's box
    is: a value typed outside goes to the nearest end when the field is left or submitted, with no server
    event. Without it, 999 repeats stayed in the box and the run was refused with a toast."""
    low = "-Infinity" if number.minimum is None else repr(number.minimum)
    high = "Infinity" if number.maximum is None else repr(number.maximum)
    clamp = (f"(value) => (value === null || value === '' || isNaN(Number(value))) ? value"
             f" : Math.min(Math.max(Math.round(Number(value)), {low}), {high})")
    for listener in (number.blur, number.submit):
        listener(None, number, number, js=clamp, queue=False, api_visibility="private")
