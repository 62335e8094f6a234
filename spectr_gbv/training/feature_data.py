"""Training data for the feature-conditioned draft: the target's own samples, its top-k
next-token distributions and its last hidden states ("features"), from one pass of the target.

    python -m spectr_gbv.training.feature_data --round R [--sequences 2048] [--out cache/features]

writes `OUT.roundR.pt`: a list of per-sequence dicts with
* `ids`: prompt + sampled continuation (`distill.make_prompts`, T = 0.8, as for the old draft);
* `prompt_length`;
* `top_ids`, `top_probs` [n, 64]: the target's distribution of each continuation token
  (raw T = 1 logits of the forward that sampled it);
* `features` [S - 1, H] float16: the output of the target's final norm at every position
  but the last, the vector its output head reads. They are captured by a hook on that norm
  during `generate` (the prefill gives the prompt's rows, each decode step one row), so
  they cost nothing beyond the sampling itself.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from .distill import CONTINUATION_TOKENS, SAMPLE_TEMPERATURE, SEQUENCES, TEACHER_TOP, drop_held_out, make_prompts


def sample_with_features(target, tokenizer, prompts: list[str], seed: int, batch: int = 64) -> list[dict]:
    """`distill.sample_continuations`, plus the target's final-norm output at every position."""
    from ..models.hf import chat_prompt_ids

    torch.manual_seed(seed)  # transformers samples from the global generator
    encoded = [chat_prompt_ids(tokenizer, p) for p in prompts]
    pad = tokenizer.eos_token_id
    captured: list[torch.Tensor] = []
    handle = target.model.norm.register_forward_hook(lambda module, args, output: captured.append(output.half()))
    out: list[dict] = []
    try:
        for start in range(0, len(encoded), batch):
            group = encoded[start : start + batch]
            width = max(len(ids) for ids in group)
            ids = torch.tensor([[pad] * (width - len(x)) + x for x in group])  # left padding
            mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in group])
            captured.clear()
            with torch.inference_mode():
                generated = target.generate(
                    ids, attention_mask=mask, do_sample=True, temperature=SAMPLE_TEMPERATURE, top_k=None, top_p=None,
                    max_new_tokens=CONTINUATION_TOKENS, pad_token_id=pad, return_dict_in_generate=True,
                    output_logits=True,
                )
                k = min(TEACHER_TOP, generated.logits[0].shape[-1])
                top = [torch.topk(torch.softmax(step.float(), -1), k, dim=-1) for step in generated.logits]
            features = torch.cat(captured, dim=1)  # [B, width + steps - 1, H]: every fed position
            top_ids = torch.stack([t.indices for t in top], 1)
            top_probs = torch.stack([t.values for t in top], 1)
            for row, (x, continuation) in enumerate(zip(group, generated.sequences[:, width:].tolist())):
                if pad in continuation:
                    continuation = continuation[: continuation.index(pad) + 1]  # keep the EOS, drop the padding
                n = len(continuation)
                pad_left = width - len(x)
                out.append({
                    "ids": x + continuation, "prompt_length": len(x),
                    "top_ids": top_ids[row, :n].clone(), "top_probs": top_probs[row, :n].clone(),
                    # positions 0 .. S-2 of this sequence (the last token is never fed)
                    "features": features[row, pad_left : pad_left + len(x) + n - 1].clone(),
                })
            print(f"sampled {len(out)}/{len(encoded)} sequences", flush=True)
    finally:
        handle.remove()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round", type=int, default=0, help="prompts and sampling seeded with seed + round")
    parser.add_argument("--sequences", type=int, default=SEQUENCES)
    parser.add_argument("--first", type=int, default=0, help="sample only prompts first.. of the round (chunks)")
    parser.add_argument("--count", type=int, help="how many prompts from --first (default: the rest)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default="cache/features")
    args = parser.parse_args()
    from ..models.hf import load_model

    started = time.time()
    loaded = load_model("default", device="cpu", dtype=torch.float32)
    prompts = make_prompts(args.sequences, args.seed + args.round)
    last = len(prompts) if args.count is None else args.first + args.count
    chunk = prompts[args.first : last]
    samples = sample_with_features(loaded.model, loaded.tokenizer, [p for _, p in chunk],
                                   args.seed + args.round * 1000 + args.first)
    samples = drop_held_out(chunk, samples)
    path = Path(f"{args.out}.round{args.round}.{args.first}-{last}.pt")
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(samples, path)
    print(f"{len(samples)} sequences -> {path} in {time.time() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()
