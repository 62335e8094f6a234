"""SpecTr-GBV Explorer: the Gradio app.

This first version runs the Toy world (an eight-word bigram pair whose distributions are
known exactly) with every method and shows each output token coloured by provenance and
the run's hardware-free metrics. The full explorer (real model pairs, iteration explorer,
compare, sweep, fidelity views) is built on the same library in later work.
"""

from __future__ import annotations

import gradio as gr

from components.text import provenance_html
from spectr_gbv import AUTOREGRESSIVE, METHODS, generate
from spectr_gbv.toy import WORDS, decode, encode, toy_pair

METHOD_CHOICES = [("AR (plain target sampling)", AUTOREGRESSIVE)] + [(spec.label, name) for name, spec in METHODS.items()]
LOSSY_NOTE = (
    "**Note:** `SpecTr-GBV as released (lossy)` is the authors' released verifier. It does **not** preserve the "
    "target distribution (exact computation: total-variation error about 0.11 on the GBV paper's two-token "
    "example). The project's `SpecTr-GBV` is an exact multi-draft block verifier; it equals GBV at K = 1 and SpecTr at L = 1."
)


def run_toy(prompt: str, method: str, num_drafts: float, draft_length: float, temperature: float, max_new_tokens: float, seed: float):
    """Handler: UI values in, (HTML, metrics) out. Bad input becomes a gr.Error message."""
    try:
        prompt_ids = encode(prompt)
        target, draft = toy_pair()
        run = generate(
            target, draft, prompt_ids, method=method, num_drafts=int(num_drafts), draft_length=int(draft_length),
            temperature=float(temperature), max_new_tokens=int(max_new_tokens), seed=int(seed),
        )
    except ValueError as error:
        raise gr.Error(str(error)) from error
    return provenance_html(run, decode), run.summary()


def build_demo() -> gr.Blocks:
    with gr.Blocks(title="SpecTr-GBV Explorer", analytics_enabled=False) as demo:
        gr.Markdown("# SpecTr-GBV Explorer — Toy world\nVocabulary: " + " ".join(f"`{w}`" for w in WORDS))
        gr.Markdown(LOSSY_NOTE)
        with gr.Row():
            prompt = gr.Textbox(label="Prompt (Toy-world words)", value="the cat")
            method = gr.Dropdown(METHOD_CHOICES, value="spectr_gbv", label="Method")
        with gr.Row():
            num_drafts = gr.Slider(1, 8, value=4, step=1, label="K (drafts)")
            draft_length = gr.Slider(1, 16, value=4, step=1, label="L (draft length)")
            temperature = gr.Slider(0, 1.5, value=1.0, step=0.05, label="T (temperature)")
            max_new_tokens = gr.Slider(1, 200, value=40, step=1, label="Max new tokens")
            seed = gr.Number(value=0, precision=0, minimum=0, label="Seed")
        button = gr.Button("Generate", variant="primary")
        output = gr.HTML(label="Output")
        metrics = gr.JSON(label="Metrics (block efficiency and acceptance are hardware-free)")
        button.click(
            run_toy, [prompt, method, num_drafts, draft_length, temperature, max_new_tokens, seed], [output, metrics],
            api_name="generate_toy",
        )
    return demo


if __name__ == "__main__":
    build_demo().queue(default_concurrency_limit=4, max_size=32).launch()
