"""End-to-end decoding benchmark on a real model pair.

    python -m spectr_gbv.bench [--quick] [--target default] [--draft PATH|HUB_ID] [--json F] [--markdown F]

For every prompt of a small built-in set (code, math, story, instructions) it runs `ar`
and every method at every K, L, T, with the same max_new_tokens, and reports:
block efficiency (tokens per target call) and mean accepted length (hardware-free),
target calls per token, tokens/s and the wall-clock speedup against our `ar` measured in
the same run on the same machine (hardware-dependent). Peers on the same pair and
settings: transformers' `model.generate` (plain sampling) and its assisted generation
(`assistant_model=`, the draft proposing L tokens). Timings are whole calls (after one
warm-up), summed over prompts.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import torch

from .. import generate, load_pair
from ..distill import BENCH_PROMPTS as PROMPTS  # held out of the draft's training data
from ..models.hf import chat_prompt_ids


def timed(fn):
    start = time.perf_counter()
    value = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return value, time.perf_counter() - start


def hf_generate(model, prompt_ids, max_new_tokens, temperature, seed, assistant=None, draft_length=None):
    torch.manual_seed(seed)  # transformers samples from the global generator
    kwargs = dict(max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens, do_sample=temperature > 0,
                  top_k=None, top_p=None)
    if temperature > 0:
        kwargs["temperature"] = temperature
    if assistant is not None:
        kwargs.update(assistant_model=assistant.model, num_assistant_tokens=draft_length,
                      num_assistant_tokens_schedule="constant", assistant_confidence_threshold=0.0)
    ids = torch.tensor([prompt_ids], device=model.device)
    with torch.inference_mode():
        out = model.model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
    return out.shape[1] - ids.shape[1]


def run(args) -> dict:
    target, draft, tokenizer = load_pair(args.target, args.draft, draft_layers=args.draft_layers)
    prompts = {k: chat_prompt_ids(tokenizer, v) for k, v in PROMPTS.items()}
    if args.quick:
        prompts = dict(list(prompts.items())[:2])
    n = args.max_new_tokens
    generate(target, draft, prompts[next(iter(prompts))], method="spectr_gbv", num_drafts=2, draft_length=2,
             max_new_tokens=4, with_theory=False)  # warm-up
    rows = []
    for T in args.temperatures:
        ar_tokens, ar_time = 0, 0.0
        for i, ids in enumerate(prompts.values()):
            record, seconds = timed(lambda: generate(target, None, ids, method="ar", temperature=T, max_new_tokens=n, seed=i, with_theory=False))
            ar_tokens, ar_time = ar_tokens + len(record.tokens), ar_time + seconds
        ar_rate = ar_tokens / ar_time
        rows.append({"method": "ar", "K": 0, "L": 0, "T": T, "block_efficiency": 1.0, "mean_accepted": 0.0,
                     "target_calls_per_token": 1.0, "tokens_per_s": ar_rate, "speedup_vs_ar": 1.0})
        for L in args.lengths:
            peers = [("hf_generate", None), ("hf_assisted", draft)]
            for name, assistant in peers:
                if name == "hf_generate" and L != args.lengths[0]:
                    continue
                tokens, seconds = 0, 0.0
                for i, ids in enumerate(prompts.values()):
                    count, sec = timed(lambda: hf_generate(target, ids, n, T, i, assistant, L))
                    tokens, seconds = tokens + count, seconds + sec
                rows.append({"method": name, "K": 1 if assistant else 0, "L": L if assistant else 0, "T": T,
                             "block_efficiency": None, "mean_accepted": None, "target_calls_per_token": None,
                             "tokens_per_s": tokens / seconds, "speedup_vs_ar": tokens / seconds / ar_rate})
            for method in args.methods:
                for K in args.drafts:
                    if method in ("sd", "gbv") and K != args.drafts[0]:
                        continue
                    records, seconds = [], 0.0
                    for i, ids in enumerate(prompts.values()):
                        record, sec = timed(lambda: generate(target, draft, ids, method=method, num_drafts=K, draft_length=L,
                                                              temperature=T, max_new_tokens=n, seed=i, with_theory=False))
                        records.append(record)
                        seconds += sec
                    tokens = sum(len(r.tokens) for r in records)
                    calls = sum(r.target_calls for r in records)
                    rows.append({
                        "method": method, "K": records[0].config.effective_num_drafts, "L": L, "T": T,
                        "block_efficiency": tokens / calls,
                        "mean_accepted": sum(r.mean_accepted * r.target_calls for r in records) / calls,
                        "target_calls_per_token": calls / tokens,
                        "tokens_per_s": tokens / seconds, "speedup_vs_ar": tokens / seconds / ar_rate,
                    })
                    print(_row(rows[-1]), flush=True)
    return {
        "target": target.name, "draft": draft.name, "device": str(target.device),
        "machine": f"{platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads",
        "prompts": list(prompts), "max_new_tokens": n, "rows": rows,
    }


def _fmt(value, spec=".2f"):
    return "–" if value is None else format(value, spec)


def _row(r: dict) -> str:
    return (f"| {r['method']} | {r['K']} | {r['L']} | {r['T']} | {_fmt(r['block_efficiency'])} | {_fmt(r['mean_accepted'])} | "
            f"{_fmt(r['target_calls_per_token'])} | {_fmt(r['tokens_per_s'], '.1f')} | {_fmt(r['speedup_vs_ar'])} |")


def markdown(result: dict) -> str:
    lines = [
        f"Target: {result['target']}; draft: {result['draft']}; device: {result['device']} ({result['machine']}); "
        f"prompts: {', '.join(result['prompts'])}; {result['max_new_tokens']} new tokens each.",
        "",
        "| method | K | L | T | block efficiency | mean accepted | target calls / token | tokens/s | speedup vs ar (this machine) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    return "\n".join(lines + [_row(r) for r in result["rows"]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 prompts, K=4, L=4, T=0.7, 32 tokens")
    parser.add_argument("--target", default="default")
    parser.add_argument("--draft", default=None, help="default: the target's first --draft-layers layers")
    parser.add_argument("--draft-layers", type=int, default=None, help="use the target's first n layers as the draft")
    parser.add_argument("--methods", nargs="+", default=["sd", "rrs", "spectr", "gbv", "spectr_gbv", "spectr_gbv_released"])
    parser.add_argument("--drafts", nargs="+", type=int, default=[1, 4, 8])
    parser.add_argument("--lengths", nargs="+", type=int, default=[4, 8])
    parser.add_argument("--temperatures", nargs="+", type=float, default=[0.7])
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    if args.quick:
        args.drafts, args.lengths, args.temperatures, args.max_new_tokens = [4], [4], [0.7], 32
        args.methods = ["sd", "gbv", "spectr", "spectr_gbv"]
    result = run(args)
    table = markdown(result)
    print(table)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(table + "\n")


if __name__ == "__main__":
    main()
