"""How good is the default draft? Acceptance and cost, on held-out prompts.

    python -m spectr_gbv.bench.draft [--draft FOLDER] [--kernel float32|fp16-weights|bfloat16|int4] [--sharegpt N] [--json F]

* alpha = sum_x min(p_target(x), p_draft(x)) at T = 0.7 (both distributions processed the
  same way), averaged over the positions of the target's own T = 0.7 continuations of the
  held-out prompts of `HELD_OUT_PROMPTS` below (2 each of code, math,
  story, instructions), 64 tokens each, teacher-forced through both models;
* the draft's wall time per drafting step at K = 4 (one batched one-token forward of 4
  rows with a KV cache) against one target decoding step (batch 1, KV cache), medians;
* the target's verification forward at K = 4, L = 6 with no shared prefixes (one pending token
  and 24 trie nodes, warm cache).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections import defaultdict

import torch

from .. import generate, load_pair
from ..models import cpu_kernel
from ..models.feature_draft import target_features
from ..models.hf import chat_prompt_ids
from ..intervals import t_interval
from ..probs import logits_to_probs
from ..prompt_sets import held_out_prompts

TEMPERATURE = 0.7
HELD_OUT_PROMPTS = held_out_prompts()  # the app's kinds of example; never trained on (training.distill.drop_held_out)


def alpha_per_position(target, draft, prompt_ids: list[int], continuation: list[int]) -> torch.Tensor:
    block = torch.tensor([continuation[:-1]])
    q = logits_to_probs(target.start(prompt_ids).score(block)[0], TEMPERATURE)
    if getattr(draft, "needs_features", False):
        p = logits_to_probs(feature_draft_first_logits(target, draft, prompt_ids, continuation), TEMPERATURE)
    else:
        p = logits_to_probs(draft.start(prompt_ids).score(block)[0], TEMPERATURE)
    return torch.minimum(p, q).sum(-1)


def feature_draft_first_logits(target, draft, prompt_ids: list[int], continuation: list[int]) -> torch.Tensor:
    """The feature-conditioned draft's first-position logits for every continuation token, each
    drafted from the target's true features of the text before it (what SD at L = 1 sees)."""
    ids = prompt_ids + continuation
    with torch.inference_mode():
        out = target.model.base_model(torch.tensor([ids[:-1]], device=target.device),
                                      output_hidden_states=bool(draft.feature_layers))
        features = target_features(out, draft.feature_layers)[0].to(draft.dtype)
        tokens = torch.tensor(ids[1:], device=target.device)
        start = len(prompt_ids) - 2  # the entry that drafts continuation token 0
        g = draft.head.unrolled(features, draft.embedding[tokens].to(draft.dtype), 1, start)[0][: len(continuation)]
        return draft.logits(g)


def _sync() -> None:
    # CUDA kernels run asynchronously: a wall-clock sample must wait for them.
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def step_ms(model, prompt_ids: list[int], rows: int, repeats: int = 25, target=None) -> float:
    session = model.start(prompt_ids)
    if getattr(model, "needs_features", False):  # hand it the target's features of the prompt
        source = target.start(prompt_ids)
        source.prefill(model.feature_layers)
        session.add_features(source.take_features())
    session.branch_logits(rows)
    token = torch.full((rows,), prompt_ids[-1])
    for _ in range(3):
        session.extend_branches(token)
    samples = []
    for _ in range(repeats):
        _sync()
        start = time.perf_counter()
        session.extend_branches(token)
        _sync()
        samples.append((time.perf_counter() - start) * 1e3)
    return statistics.median(samples)


def score_ms(model, prompt_ids: list[int], rows: int, length: int, repeats: int = 10) -> float:
    """One verification forward: K blocks of L tokens after one pending token, warm cache."""
    session = model.start(prompt_ids)
    session.branch_logits(1)
    session.commit(0, [prompt_ids[-1]])
    # distinct tokens: no shared prefixes, so the trie has all rows x length nodes (the worst case)
    blocks = 100 + torch.arange(rows * length).view(rows, length)
    samples = []
    for _ in range(repeats + 2):
        _sync()
        start = time.perf_counter()
        session.score(blocks)
        _sync()
        samples.append((time.perf_counter() - start) * 1e3)
        session.commit(0, [prompt_ids[-1]])  # keep the cache at the same length
    return statistics.median(samples[2:])


def sharegpt_held_out(count: int) -> list[tuple[str, str]]:
    """The first `count` held-out ShareGPT prompts (never trained on; needs requirements-train.txt)."""
    from ..training.sharegpt import load_conversations, split

    return [("sharegpt", c.prompt) for c in split(load_conversations())[1] if len(c.prompt) <= 600][:count]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draft", help="default: the default pair's draft (e.g. default-draft: the layered one, "
                                        "or a folder holding a feature_draft.json)")
    parser.add_argument("--kernel", choices=cpu_kernel.KERNELS,
                        help="the target's CPU kernel (default: the one models.cpu_kernel chooses)")
    parser.add_argument("--sharegpt", type=int, default=0, help="also this many held-out ShareGPT prompts")
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--json")
    args = parser.parse_args(argv)
    if args.kernel:
        os.environ[cpu_kernel.KERNEL_ENV] = args.kernel
    target, draft, tokenizer = load_pair("default", args.draft)
    kernel = getattr(target.loaded, "kernel", None)
    prompts = list(HELD_OUT_PROMPTS) + (sharegpt_held_out(args.sharegpt) if args.sharegpt else [])
    per_kind, per_prompt = defaultdict(list), defaultdict(list)
    for i, (kind, text) in enumerate(prompts):
        prompt = chat_prompt_ids(tokenizer, text)
        continuation = generate(target, None, prompt, method="ar", temperature=TEMPERATURE, max_new_tokens=args.tokens,
                                seed=i).tokens
        values = alpha_per_position(target, draft, prompt, continuation).tolist()
        per_kind[kind] += values
        per_prompt["templates" if kind != "sharegpt" else "sharegpt"].append(sum(values) / len(values))
    alphas = {kind: sum(v) / len(v) for kind, v in per_kind.items()}
    overall = sum(sum(v) for v in per_kind.values()) / sum(len(v) for v in per_kind.values())
    bands = {name: t_interval(values) for name, values in per_prompt.items()}  # over prompts: what varies
    prompt = chat_prompt_ids(tokenizer, HELD_OUT_PROMPTS[0][1])
    target_ms, draft_ms = step_ms(target, prompt, 1), step_ms(draft, prompt, 4, target=target)
    scoring_ms = score_ms(target, prompt, 4, 6)
    result = {"draft": draft.name, "temperature": TEMPERATURE, "alpha": overall, "alpha_per_kind": alphas,
              "alpha_per_prompt_set": {k: {"mean": m, "low": lo, "high": hi, "prompts": len(per_prompt[k])}
                                       for k, (m, lo, hi) in bands.items()},
              "kernel": kernel.summary() if kernel is not None else None,
              "target_step_ms": target_ms, "draft_step_k4_ms": draft_ms, "draft_over_target": draft_ms / target_ms,
              "target_scoring_k4_l6_ms": scoring_ms}
    print(f"Draft: {draft.name}; held-out prompts: {len(prompts)}; T = {TEMPERATURE}; "
          f"{kernel.note() if kernel is not None else target.model.dtype}\n")
    print("| alpha (all) | " + " | ".join(f"alpha ({k})" for k in alphas) + " | draft step, K=4 | target step | ratio |")
    print("|---|" + "---|" * (len(alphas) + 3))
    print(f"| {overall:.3f} | " + " | ".join(f"{a:.3f}" for a in alphas.values())
          + f" | {draft_ms:.1f} ms | {target_ms:.1f} ms | {draft_ms / target_ms:.0%} |")
    for name, (mean, low, high) in bands.items():
        print(f"alpha over the {len(per_prompt[name])} {name} prompts: {mean:.3f} [{low:.3f}, {high:.3f}] (95 %)")
    print(f"\nTarget verification forward (K = 4 blocks of L = 6, one call, warm cache): {scoring_ms:.1f} ms")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)


if __name__ == "__main__":
    main()
