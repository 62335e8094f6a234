"""End-to-end decoding benchmark on a real model pair, with honest timing.

    python -m spectr_gbv.bench [--repeats 3] [--methods ...] [--drafts 4] [--lengths 6] [--search]
                               [--target default] [--draft NAME|PATH|HUB_ID] [--json F] [--markdown F]

Hardware-free: block efficiency (tokens per target call) and mean accepted tau.
Wall clock, this machine only: every repeat times our `ar` first and then every method and
peer on the same prompts, so each speedup is against the AR of its own repeat (a shared,
noisy machine drifts between repeats, not within one). Reported: the median speedup over
the repeats and its range, and the time per iteration in each phase (draft, target,
verify, other = the rest of the loop) from the engine's own timings.

Peers on the same pair and settings: transformers' `model.generate` (plain sampling) and
its assisted generation (`assistant_model=`, only where the draft is an ordinary
transformers model: a feature-conditioned draft is not one, so the layered distilled draft,
the best draft transformers itself can run, is its assistant then).

`--search`: a small (K, L) grid per method on half the prompts and tokens, one repeat,
reporting each method's best setting on this machine; the main run then uses it.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from pathlib import Path

import torch

from .. import generate
from ..models.hf import DEFAULT_DRAFT, HFModel, chat_prompt_ids, load_model, load_pair

PROMPTS = {  # the end-to-end prompts, one per kind; held out of the drafts' training data (training.distill)
    "code": "Write a Python function that checks whether a year is a leap year.",
    "math": "A car uses 6 litres of fuel per 100 km. How much fuel does it need for 250 km?",
    "story": "Write a short story about a fox who opens a bakery.",
    "instructions": "How can I keep my kitchen clean when I have little time?",
}

SEARCH_DRAFTS = [1, 2, 4]
SEARCH_LENGTHS = [3, 4, 6, 8]


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn):
    _sync()
    start = time.perf_counter()
    value = fn()
    _sync()
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


def decode_all(target, draft, prompts, method, K, L, T, n) -> dict:
    """One method over all prompts: totals of tokens, target calls, phases and wall time."""
    totals = {"tokens": 0, "calls": 0, "accepted": 0, "seconds": 0.0, "draft_s": 0.0, "target_s": 0.0, "verify_s": 0.0}
    K, L = max(K, 1), max(L, 1)  # AR ignores them
    for i, ids in enumerate(prompts):
        record, seconds = timed(lambda: generate(target, draft, ids, method=method, num_drafts=K, draft_length=L,
                                                 temperature=T, max_new_tokens=n, seed=i, with_theory=False))
        totals["tokens"] += len(record.tokens)
        totals["calls"] += record.target_calls
        totals["accepted"] += sum(it.num_accepted for it in record.iterations)
        totals["seconds"] += seconds
        for it in record.iterations:
            totals["draft_s"] += it.timings.draft_s
            totals["target_s"] += it.timings.target_s
            totals["verify_s"] += it.timings.verify_s
    return totals


def peer_all(target, prompts, n, T, assistant=None, L=None) -> dict:
    tokens, seconds = 0, 0.0
    for i, ids in enumerate(prompts):
        count, sec = timed(lambda: hf_generate(target, ids, n, T, i, assistant, L))
        tokens, seconds = tokens + count, seconds + sec
    return {"tokens": tokens, "seconds": seconds}


def summarise(name: str, K: int, L: int, T: float, runs: list[dict], ar_runs: list[dict]) -> dict:
    """Median and range of the per-repeat speedups, and per-iteration phase times (ms)."""
    speedups = [(r["tokens"] / r["seconds"]) / (a["tokens"] / a["seconds"]) for r, a in zip(runs, ar_runs)]
    row = {"method": name, "K": K, "L": L, "T": T, "repeats": len(runs),
           "speedup_median": statistics.median(speedups), "speedup_min": min(speedups), "speedup_max": max(speedups),
           "tokens_per_s": statistics.median(r["tokens"] / r["seconds"] for r in runs),
           "block_efficiency": None, "mean_accepted": None}
    if "calls" in runs[0]:
        first = runs[0]
        iterations = sum(r["calls"] for r in runs)
        row["block_efficiency"] = first["tokens"] / first["calls"]
        row["mean_accepted"] = first["accepted"] / first["calls"]
        phases = {p: 1e3 * sum(r[f"{p}_s"] for r in runs) / iterations for p in ("draft", "target", "verify")}
        phases["other"] = 1e3 * sum(r["seconds"] for r in runs) / iterations - sum(phases.values())
        row["ms_per_iteration"] = phases
    return row


def settings_for(method: str, drafts: list[int], lengths: list[int], best: dict) -> list[tuple[int, int]]:
    if method in best:
        return [best[method]]
    if method == "ar":
        return [(0, 0)]
    ks = drafts[:1] if method in ("sd", "gbv") else drafts
    return [(K, L) for K in ks for L in lengths]


def search(target, draft, prompts, methods, T, n) -> tuple[dict, list[dict]]:
    """Each method's best (K, L) by tokens/s on a small grid (one repeat; AR timed first)."""
    ar = decode_all(target, None, prompts, "ar", 0, 0, T, n)
    rows, best = [], {}
    for method in methods:
        scored = []
        for K in ([1] if method in ("sd", "gbv") else SEARCH_DRAFTS):
            for L in SEARCH_LENGTHS:
                run = decode_all(target, draft, prompts, method, K, L, T, n)
                row = summarise(method, K, L, T, [run], [ar])
                rows.append(row)
                scored.append((row["speedup_median"], K, L))
                print(f"search {method} K={K} L={L}: {row['speedup_median']:.2f}x", flush=True)
        _, K, L = max(scored)
        best[method] = (K, L)
    return best, rows


def run(args) -> dict:
    target, draft, tokenizer = load_pair(args.target, args.draft)
    kernel = getattr(target.loaded, "kernel", None)  # the default target's CPU kernel (models.cpu_kernel)
    print(cpu_line(kernel), flush=True)
    assistant = draft if isinstance(draft, HFModel) else None
    if assistant is None and args.target == "default":  # transformers cannot run a feature-conditioned draft
        assistant = HFModel(load_model(DEFAULT_DRAFT, device=target.device, dtype=target.model.dtype), target.vocab_size)
    prompts = [chat_prompt_ids(tokenizer, text) for text in PROMPTS.values()]
    n, T = args.max_new_tokens, args.temperature
    generate(target, draft, prompts[0], method="spectr_gbv", num_drafts=2, draft_length=2, max_new_tokens=4,
             with_theory=False)  # warm-up
    best, search_rows = {}, []
    if args.search:
        best, search_rows = search(target, draft, prompts[::2], args.methods, T, max(n // 2, 16))
    configs = [(m, K, L) for m in args.methods for K, L in settings_for(m, args.drafts, args.lengths, best)]
    peers = [("hf_generate", None, 0)]
    if assistant is not None:  # at SD's draft length: assisted generation is single-draft SD
        sd_length = next((L for m, _, L in configs if m == "sd"), configs[0][2])
        peers.append(("hf_assisted", assistant, sd_length))
    fastest_ar = fastest_plain_decoding(target, kernel)  # plain decoding in another kernel, if the probe found a faster step
    ar_runs, method_runs, peer_runs = [], {c: [] for c in configs}, {p[0] + str(p[2]): [] for p in peers}
    other_ar_runs = []
    for repeat in range(args.repeats):  # AR first in every repeat, then everything else against it
        ar_runs.append(decode_all(target, None, prompts, "ar", 0, 0, T, n))
        for method, K, L in configs:
            method_runs[(method, K, L)].append(decode_all(target, draft, prompts, method, K, L, T, n))
        for name, helper, L in peers:
            peer_runs[name + str(L)].append(peer_all(target, prompts, n, T, helper, L or None))
        if fastest_ar is not None:
            other_ar_runs.append(decode_all(fastest_ar[1], None, prompts, "ar", 0, 0, T, n))
        print(f"repeat {repeat + 1}/{args.repeats} done", flush=True)
    rows = [summarise("ar", 0, 0, T, ar_runs, ar_runs)]
    for (method, K, L), runs in method_runs.items():
        rows.append(summarise(method, K, L, T, runs, ar_runs))
        print(_row(rows[-1]), flush=True)
    for name, helper, L in peers:
        rows.append(summarise(name, 1 if helper else 0, L, T, peer_runs[name + str(L)], ar_runs))
    if fastest_ar is not None:
        rows.append(summarise(f"ar [{fastest_ar[0]}]", 0, 0, T, other_ar_runs, ar_runs))
    return {
        "target": target.name, "draft": draft.name, "assistant": assistant.name if assistant else None,
        "device": str(target.device),
        "machine": f"{platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads",
        "cpu": cpu_line(kernel), "kernel": kernel.summary() if kernel is not None else None,
        "prompts": list(PROMPTS), "max_new_tokens": n, "temperature": T, "repeats": args.repeats,
        "best_settings": {m: list(v) for m, v in best.items()}, "search": search_rows, "rows": rows,
    }


def fastest_plain_decoding(target, kernel) -> tuple[str, HFModel] | None:
    """(kernel name, the default target in it) when the probe measured a faster one-token step in
    another kernel than the one chosen for speculation, else None. Its AR runs in every repeat
    beside ours ("ar [kernel]"), so a speedup is never quoted against a plain decoding slowed
    by a kernel picked for scoring."""
    from ..models import cpu_kernel

    costs = getattr(kernel, "costs", ()) or ()
    fastest = min(costs, key=lambda c: c.step_ms, default=None)
    if fastest is None or fastest.kernel == kernel.kernel:
        return None
    base = load_model("default", device="cpu", dtype=torch.float32)
    base.model = cpu_kernel.apply_kernel(base.model, fastest.kernel)
    return fastest.kernel, HFModel(base, target.vocab_size)


def cpu_line(kernel) -> str:
    """The CPU model, its bf16 flags and the target's kernel, for the header of every result."""
    from ..models import cpu_kernel

    line = cpu_kernel.describe_cpu(cpu_kernel.cpu_flags())
    return line + (f"; {kernel.note()}" if kernel is not None else "")


def results_folder(root: str, kernel: str) -> Path:
    """Result files are kept per CPU class and kernel: ROOT/cpu_<class>/<kernel>/."""
    from ..models import cpu_kernel

    klass = cpu_kernel.cpu_class(cpu_kernel.cpu_flags()).lower().replace("-", "_")
    return Path(root) / f"cpu_{klass}" / kernel


def _fmt(value, spec=".2f"):
    return "–" if value is None else format(value, spec)


def _row(r: dict) -> str:
    phases = r.get("ms_per_iteration")
    phase_text = " / ".join(f"{phases[p]:.0f}" for p in ("draft", "target", "verify", "other")) if phases else "–"
    return (f"| {r['method']} | {r['K']} | {r['L']} | {_fmt(r['block_efficiency'])} | {_fmt(r['mean_accepted'])} | "
            f"{_fmt(r['tokens_per_s'], '.1f')} | {r['speedup_median']:.2f} ({r['speedup_min']:.2f}–{r['speedup_max']:.2f}) | "
            f"{phase_text} |")


def markdown(result: dict) -> str:
    lines = [
        result.get("cpu", ""), "",
        f"Target: {result['target']}; draft: {result['draft']}; assisted-generation draft: {result['assistant']}; "
        f"device: {result['device']} ({result['machine']}); prompts: {', '.join(result['prompts'])}; "
        f"{result['max_new_tokens']} new tokens each; T = {result['temperature']}; {result['repeats']} repeats, each "
        "timed against the AR of the same repeat.",
        "",
        "| method | K | L | block efficiency | mean accepted | tokens/s (median) | speedup vs ar, median (range) | "
        "ms per iteration: draft / target / verify / other |",
        "|---|---|---|---|---|---|---|---|",
    ]
    if result["best_settings"]:
        lines = [f"Best (K, L) per method from the search: "
                 + ", ".join(f"{m} {tuple(v)}" for m, v in result["best_settings"].items()), ""] + lines
    other = next((r for r in result["rows"] if r["method"].startswith("ar [")), None)
    if other is not None:
        lines = lines[:2] + [
            f"The kernel was chosen for speculation; plain decoding has a faster one-token step in {other['method'][4:-1]}. "
            f"Its row `{other['method']}` is timed in every repeat: its speedup column is its speed against `ar`, so a "
            f"method's speedup over the fastest plain decoding on this CPU is its own divided by "
            f"{other['speedup_median']:.2f}.", ""] + lines[2:]
    return "\n".join(lines + [_row(r) for r in result["rows"]])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="default")
    parser.add_argument("--draft", default=None, help="default: the target's shipped draft")
    parser.add_argument("--methods", nargs="+", default=["sd", "gbv", "spectr", "spectr_gbv", "spectr_gbv_released"])
    parser.add_argument("--drafts", nargs="+", type=int, default=[4])
    parser.add_argument("--lengths", nargs="+", type=int, default=[6])
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--search", action="store_true", help="pick each method's (K, L) on a small grid first")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    parser.add_argument("--results", help="write bench.json and bench.md under RESULTS/cpu_<class>/<kernel>/")
    args = parser.parse_args()
    result = run(args)
    table = markdown(result)
    print(table)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=2)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write(table + "\n")
    if args.results:
        folder = results_folder(args.results, result["kernel"]["kernel"] if result["kernel"] else "default")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "bench.json").write_text(json.dumps(result, indent=2))
        (folder / "bench.md").write_text(table + "\n")
        print(f"-> {folder}/bench.md")


if __name__ == "__main__":
    main()
