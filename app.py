"""SpecTr-GBV Explorer: the Gradio app.

This first version decodes a prompt with any method on the offline default pair
(SmolLM2-135M-Instruct with its distilled draft) or on the Toy world (an eight-word
bigram pair whose distributions are known exactly), and shows each output token coloured
by provenance with the run's metrics. The full explorer (iteration explorer, compare,
sweep and fidelity views) is built on the same library in later work.
"""

from __future__ import annotations

from functools import lru_cache

import gradio as gr

from components.text import provenance_html
from spectr_gbv import AUTOREGRESSIVE, METHODS, generate
from spectr_gbv.toy import WORDS, decode, encode, toy_pair

DEFAULT_PAIR = "SmolLM2-135M-Instruct + distilled draft (offline default)"
TOY_WORLD = "Toy world (8 words, exact distributions)"
PAIRS = [DEFAULT_PAIR, TOY_WORLD]
METHOD_CHOICES = [("AR (plain target sampling)", AUTOREGRESSIVE)] + [(spec.label, name) for name, spec in METHODS.items()]
LOSSY_NOTE = (
    "**Note:** `SpecTr-GBV as released (lossy)` is the authors' released verifier. It does **not** preserve the "
    "target distribution (exact computation: total-variation error about 0.11 on the GBV paper's two-token "
    "example). The project's `SpecTr-GBV` is an exact multi-draft block verifier; it equals GBV at K = 1 and SpecTr at L = 1."
)


@lru_cache(maxsize=1)
def default_pair():
    """The offline default pair, loaded once and shared read-only by every session."""
    from spectr_gbv import load_pair

    return load_pair("default")


def _prepare(pair: str, prompt: str):
    """(target, draft, prompt ids, ids -> token strings) for the chosen pair."""
    if not prompt or not prompt.strip():
        raise ValueError("the prompt is empty: type something to continue")
    if pair == TOY_WORLD:
        target, draft = toy_pair()
        return target, draft, encode(prompt), decode
    if pair != DEFAULT_PAIR:
        raise ValueError(f"unknown model pair {pair!r}; choose one of: {', '.join(PAIRS)}")
    from spectr_gbv.models.hf import chat_prompt_ids

    target, draft, tokenizer = default_pair()
    return target, draft, chat_prompt_ids(tokenizer, prompt), lambda ids: [tokenizer.decode([i]) for i in ids]


def run(pair: str, prompt: str, method: str, num_drafts: float, draft_length: float, temperature: float,
        max_new_tokens: float, seed: float):
    """Handler: UI values in, (HTML, metrics) out. Bad input becomes a gr.Error message."""
    try:
        target, draft, prompt_ids, token_text = _prepare(pair, prompt)
        record = generate(
            target, draft, prompt_ids, method=method, num_drafts=int(num_drafts), draft_length=int(draft_length),
            temperature=float(temperature), max_new_tokens=int(max_new_tokens), seed=int(seed),
        )
    except ValueError as error:
        raise gr.Error(str(error)) from error
    except MemoryError as error:  # torch.OutOfMemoryError is a subclass on CUDA
        raise gr.Error("out of memory: lower K, L or max new tokens") from error
    return provenance_html(record, token_text), record.summary()


def build_demo() -> gr.Blocks:
    with gr.Blocks(title="SpecTr-GBV Explorer", analytics_enabled=False) as demo:
        gr.Markdown("# SpecTr-GBV Explorer")
        gr.Markdown(LOSSY_NOTE)
        with gr.Row():
            pair = gr.Dropdown(PAIRS, value=DEFAULT_PAIR, label="Model pair")
            method = gr.Dropdown(METHOD_CHOICES, value="spectr_gbv", label="Method")
        prompt = gr.Textbox(label="Prompt", value="Write a haiku about the sea.",
                            info="Toy world: use its words only: " + " ".join(WORDS))
        with gr.Row():
            num_drafts = gr.Slider(1, 8, value=4, step=1, label="K (drafts)")
            draft_length = gr.Slider(1, 16, value=4, step=1, label="L (draft length)")
            temperature = gr.Slider(0, 1.5, value=0.7, step=0.05, label="T (temperature)")
            max_new_tokens = gr.Slider(1, 200, value=40, step=1, label="Max new tokens")
            seed = gr.Number(value=0, precision=0, minimum=0, label="Seed")
        button = gr.Button("Generate", variant="primary")
        output = gr.HTML(label="Output")
        metrics = gr.JSON(label="Metrics (block efficiency and acceptance are hardware-free; tokens/s is this machine's)")
        gr.Examples(
            [[DEFAULT_PAIR, "Write a Python function that reverses a list."], [TOY_WORLD, "the cat"]],
            inputs=[pair, prompt],
        )
        button.click(
            run, [pair, prompt, method, num_drafts, draft_length, temperature, max_new_tokens, seed], [output, metrics],
            api_name="generate",
        )
    return demo


if __name__ == "__main__":
    build_demo().queue(default_concurrency_limit=2, max_size=32).launch()
