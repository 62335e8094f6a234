"""End-to-end decoding benchmark on a real model pair, timed so that it cannot flatter.

    python -m spectr_gbv.bench [--rounds 3] [--seeds 1] [--methods ...] [--drafts 2] [--lengths 4] [--search]
                               [--target default] [--draft NAME|PATH|HUB_ID] [--results assets/results]

Hardware-free: block efficiency (tokens per target call), host reads per iteration and aten
ops per token (`spectr_gbv.bench.counts`: on a GPU each read is a sync and each op a launch).

Wall clock, this machine only, in the lean mode (`generate(..., detail=False)`):
* every run is warmed up before it is timed (a first pass pays for allocations and caches);
* our plain decoding (`ar`) is interleaved with each method prompt by prompt, so a drift of
  the machine reaches both sides of a ratio alike;
* each (run, prompt, seed) keeps its fastest of `--rounds` passes (another process only ever adds
  time), and plain decoding keeps its fastest over the whole benchmark, the hardest
  baseline to beat;
* the peer row: transformers' `generate` on the same weights, interleaved the same way, in
  the target's kernel and in float32; a method's speedup over the faster of them is printed
  beside its speedup over ours.

With `SPECTR_GBV_COMPILE=1` the target's forwards are compiled (and checked) before anything is
timed, so AR and every method use the compiled target; the header says which mode ran, and a row
"ar [eager]" times plain decoding on the same target's eager forwards, interleaved like the
rest: what the compile buys.

`--search`: a small (K, L) grid per method on half the prompts and tokens, one round,
reporting each method's best setting on this machine; the main run then uses it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import platform
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from .. import generate
from ..config import AUTOREGRESSIVE
from ..methods import METHODS
from ..models.compiled import serving_mode
from ..models.hf import HFModel, chat_prompt_ids, load_model, load_pair
from ..prompt_sets import bench_prompts
from .counts import count_loop

SEARCH_DRAFTS = [1, 2, 4]
SEARCH_LENGTHS = [3, 4, 6, 8]
PEER = "hf_generate"


def _sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn):
    _sync()
    start = time.perf_counter()
    value = fn()
    _sync()
    return value, time.perf_counter() - start


def hf_generate(model, prompt_ids, max_new_tokens, temperature, seed) -> int:
    """transformers' own sampling loop on the same weights: the peer every speed table carries."""
    torch.manual_seed(seed)  # transformers samples from the global generator
    kwargs = dict(max_new_tokens=max_new_tokens, min_new_tokens=max_new_tokens, do_sample=temperature > 0,
                  top_k=None, top_p=None)
    if temperature > 0:
        kwargs["temperature"] = temperature
    ids = torch.tensor([prompt_ids], device=model.device)
    with torch.inference_mode():
        out = model.model.generate(ids, attention_mask=torch.ones_like(ids), **kwargs)
    return out.shape[1] - ids.shape[1]


@dataclass
class Contender:
    """One timed run: a method at (K, L), our plain decoding, or a peer. `run(prompt, seed)`
    decodes one prompt and returns (tokens, target calls)."""

    name: str
    K: int
    L: int
    run: Callable[[list[int], int], tuple[int, int]]
    best_s: dict[int, float] = field(default_factory=dict)  # seed (a prompt's run) -> fastest seconds
    tokens: dict[int, int] = field(default_factory=dict)
    calls: dict[int, int] = field(default_factory=dict)

    def time(self, seed: int, ids: list[int]) -> None:
        """One timed run of `ids` with `seed` (the key of its fastest time)."""
        (tokens, calls), seconds = timed(lambda: self.run(ids, seed))
        self.best_s[seed] = min(seconds, self.best_s.get(seed, math.inf))
        self.tokens[seed], self.calls[seed] = tokens, calls

    @property
    def tokens_per_s(self) -> float:
        return sum(self.tokens.values()) / sum(self.best_s.values())


def ours(target, draft, method: str, K: int, L: int, T: float, n: int, name: str | None = None) -> Contender:
    def run(ids, seed):
        record = generate(target, draft if method != AUTOREGRESSIVE else None, ids, method=method, num_drafts=max(K, 1),
                          draft_length=max(L, 1), temperature=T, max_new_tokens=n, seed=seed, detail=False)
        return len(record.tokens), record.target_calls
    return Contender(name or method, K, L, run)


def peer(model, T: float, n: int, name: str) -> Contender:
    return Contender(name, 0, 0, lambda ids, seed: (hf_generate(model, ids, n, T, seed), 0))


def race(contenders: list[Contender], ar: Contender, prompts: list[list[int]], rounds: int, seeds: int = 1) -> None:
    """Each contender warmed up, then `rounds` passes over the prompts, plain decoding timed
    just before it on every prompt. With `seeds` > 1 each prompt is decoded with that many seeds
    (prompt i's seeds: i, i + P, i + 2P, ..., for P prompts), each a run of its own: a method's
    block efficiency is then the mean over more sampled continuations."""
    for contender in [ar, *contenders]:
        contender.run(prompts[0], 0)  # warm-up, not kept
    runs = [(index + len(prompts) * s, ids) for s in range(seeds) for index, ids in enumerate(prompts)]
    for contender in contenders:
        for _ in range(rounds):
            for seed, ids in runs:
                ar.time(seed, ids)
                contender.time(seed, ids)


def row(contender: Contender, ar: Contender, T: float, counts=None) -> dict:
    calls = sum(contender.calls.values())
    out = {"method": contender.name, "K": contender.K, "L": contender.L, "T": T,
           "tokens_per_s": contender.tokens_per_s, "speedup": contender.tokens_per_s / ar.tokens_per_s,
           "block_efficiency": sum(contender.tokens.values()) / calls if calls else None,
           "reads_per_iteration": None, "ops_per_token": None}
    if counts is not None:
        out["reads_per_iteration"], out["ops_per_token"] = counts.reads_per_iteration, counts.ops_per_token
    return out


def settings_for(method: str, drafts: list[int], lengths: list[int], best: dict) -> list[tuple[int, int]]:
    if method in best:
        return [best[method]]
    ks = drafts if METHODS[method].multi_draft else [1]  # a single-draft rule ignores K
    return [(K, L) for K in ks for L in lengths]


def search(target, draft, prompts, methods, T, n) -> tuple[dict, list[dict]]:
    """Each method's best (K, L) by tokens/s on a small grid (one round, interleaved with AR)."""
    ar = ours(target, draft, "ar", 0, 0, T, n)
    grid = {m: [ours(target, draft, m, K, L, T, n) for K in (SEARCH_DRAFTS if METHODS[m].multi_draft else [1])
                for L in SEARCH_LENGTHS] for m in methods}
    race([c for cs in grid.values() for c in cs], ar, prompts, 1)
    rows, best = [], {}
    for method, contenders in grid.items():
        rows += [row(c, ar, T) for c in contenders]
        winner = max(contenders, key=lambda c: c.tokens_per_s)
        best[method] = (winner.K, winner.L)
        print(f"search {method}: best K={winner.K} L={winner.L}", flush=True)
    return best, rows


def run(args) -> dict:
    from ..models.compiled import compile_wanted

    if compile_wanted(app=False):  # the ops column then counts the compiled kernels (`counts.ProfiledOpCounter`)
        from .counts import record_compiled_kernels

        record_compiled_kernels()
    target, draft, tokenizer = load_pair(args.target, args.draft)
    kernel = getattr(target.loaded, "kernel", None)  # the default target's CPU kernel (models.cpu_kernel)
    mode = serving_mode(target)  # "compiled" when $SPECTR_GBV_COMPILE asked for it and the compile passed its check
    print(cpu_line(kernel) + f"; target {mode}", flush=True)
    if mode == "compiled":
        compile_buckets(target, draft, max(K * L for K in args.drafts for L in args.lengths))
    texts = bench_prompts()
    prompts = [chat_prompt_ids(tokenizer, text) for text in texts.values()]
    n, T = args.max_new_tokens, args.temperature
    best, search_rows = {}, []
    if args.search:
        best, search_rows = search(target, draft, prompts[::2], args.methods, T, max(n // 2, 16))
    configs = [(m, K, L) for m in args.methods for K, L in settings_for(m, args.drafts, args.lengths, best)]
    ar = ours(target, draft, "ar", 0, 0, T, n)
    contenders = [ours(target, draft, m, K, L, T, n) for m, K, L in configs]
    peers = [peer(target, T, n, f"{PEER} [{kernel.kernel if kernel else 'as loaded'}]")]
    if kernel is not None and kernel.kernel != "float32":  # the same weights in plain float32, transformers' default
        peers.append(peer(HFModel(load_model(args.target, device="cpu", dtype=torch.float32), target.vocab_size),
                          T, n, f"{PEER} [float32]"))
    fastest_ar = fastest_plain_decoding(target, kernel)  # plain decoding in another kernel, if its step is faster
    extra = [ours(fastest_ar[1], None, "ar", 0, 0, T, n, f"ar [{fastest_ar[0]}]")] if fastest_ar else []
    if mode == "compiled":  # the same target eagerly, interleaved: what the compile itself buys
        extra.append(eagerly(target, ours(target, draft, "ar", 0, 0, T, n, "ar [eager]")))
    race(contenders + peers + extra, ar, prompts, args.rounds, args.seeds)
    # A dispatch mode cannot see into a compiled graph (the loop would run eagerly under it): the profiler counts there.
    profiled = mode == "compiled"
    counted = {(m, K, L): count_loop(target, draft, prompts[0], m, K, L, T, n, profiled=profiled)
               for m, K, L in [("ar", 1, 1), *configs]}
    rows = [row(ar, ar, T, counted[("ar", 1, 1)])]
    rows += [row(c, ar, T, counted[(c.name, c.K, c.L)]) for c in contenders]
    rows += [row(c, ar, T) for c in peers + extra]
    peer_speed = max(r["tokens_per_s"] for r in rows if r["method"].startswith(PEER))
    for r in rows:
        r["speedup_vs_peer"] = r["tokens_per_s"] / peer_speed
    return {
        "target": target.name, "draft": draft.name, "device": str(target.device),
        "machine": f"{platform.machine()}, torch {torch.__version__}, {torch.get_num_threads()} threads",
        "cpu": cpu_line(kernel), "target_mode": mode, "kernel": kernel.summary() if kernel is not None else None,
        "prompts": list(texts), "max_new_tokens": n, "temperature": T, "rounds": args.rounds,
        "seeds": args.seeds,
        "best_settings": {m: list(v) for m, v in best.items()}, "search": search_rows, "rows": rows,
        "command": "python -m spectr_gbv.bench " + " ".join(args.argv),
    }


def compile_buckets(target, draft, most_drafted: int) -> None:
    """Every scoring bucket the timed trees can need, compiled now, and none later: a compile on
    first need runs in a background thread, which would take CPU from the runs being timed."""
    from ..models.compiled_scoring import BUCKETS, bucket_for

    scoring = target.compiled.scoring
    layers = tuple(getattr(draft, "feature_layers", ()))
    for width in [b for b in BUCKETS if b <= bucket_for(1 + most_drafted)]:
        print(f"scoring bucket {width}: {'compiled' if scoring.compile(width, layers) else 'eager'}", flush=True)
    scoring.on_need = False


def eagerly(target, contender: Contender) -> Contender:
    """`contender` run on the compiled `target`'s eager forwards: its sessions start while the
    target's switch offers no compiled step and no compiled bucket (`compiled.CompiledStep`); the
    compiled ones are offered again when the run ends."""
    switch = target.compiled
    run = contender.run

    def eager_run(ids, seed):
        step, ready = switch.step, switch.scoring.ready
        switch.step, switch.scoring.ready = None, {}
        try:
            return run(ids, seed)
        finally:
            switch.step, switch.scoring.ready = step, ready

    return dataclasses.replace(contender, run=eager_run)


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


def results_folder_for(root: str, target) -> Path:
    """`results_folder` of the kernel `target` runs in ("default" for a target without a CPU kernel choice)."""
    kernel = getattr(getattr(target, "loaded", None), "kernel", None)
    return results_folder(root, kernel.kernel if kernel is not None else "default")


def _fmt(value, spec=".2f"):
    return "–" if value is None else format(value, spec)


def _row(r: dict) -> str:
    return (f"| {r['method']} | {r['K']} | {r['L']} | {_fmt(r['block_efficiency'])} | {_fmt(r['reads_per_iteration'], '.1f')} "
            f"| {_fmt(r['ops_per_token'], '.0f')} | {r['tokens_per_s']:.1f} | {r['speedup']:.2f} | {r['speedup_vs_peer']:.2f} |")


def markdown(result: dict) -> str:
    lines = [
        result.get("cpu", ""), "",
        f"Target: {result['target']} ({result.get('target_mode', 'eager')}: AR and every method use it; "
        f"the peer's `generate` runs eagerly); draft: {result['draft']}; device: {result['device']} ({result['machine']}); "
        f"prompts: {', '.join(result['prompts'])}"
        f"{'' if result.get('seeds', 1) == 1 else ', each with ' + str(result['seeds']) + ' seeds'}; "
        f"{result['max_new_tokens']} new tokens each; T = {result['temperature']}; "
        f"lean mode; every run warmed up, plain decoding interleaved with each run prompt by prompt, each the fastest of "
        f"{result['rounds']} rounds. Command: `{result.get('command', 'python -m spectr_gbv.bench')}`.",
        "",
        "| run | K | L | block efficiency | host reads / iteration | aten ops / token | tokens/s | speedup vs ar | "
        f"speedup vs {PEER} (the faster) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    if result["best_settings"]:
        lines = ["Best (K, L) per method from the search: "
                 + ", ".join(f"{m} {tuple(v)}" for m, v in result["best_settings"].items()), ""] + lines
    other = next((r for r in result["rows"] if r["method"].startswith("ar [")), None)
    if other is not None:
        lines = lines[:2] + [
            f"The kernel was chosen for speculation; plain decoding has a faster one-token step in {other['method'][4:-1]}. "
            f"Its row `{other['method']}` is timed beside ours: its speedup column is its speed against `ar`, so a "
            f"method's speedup over the fastest plain decoding on this CPU is its own divided by "
            f"{other['speedup']:.2f}.", ""] + lines[2:]
    return "\n".join(lines + [_row(r) for r in result["rows"]])


def _positive(text: str) -> int:
    """An argparse type: a whole number of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text}: at least 1")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="default")
    parser.add_argument("--draft", default=None, help="default: the target's shipped draft")
    parser.add_argument("--methods", nargs="+", default=["sd", "gbv", "spectr_gbv", "as_bv_handoff"])
    parser.add_argument("--drafts", nargs="+", type=int, default=[2])
    parser.add_argument("--lengths", nargs="+", type=int, default=[4])
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seeds", type=_positive, default=1, help="seeds per prompt (more: block efficiency over more samples)")
    parser.add_argument("--search", action="store_true", help="pick each method's (K, L) on a small grid first")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    parser.add_argument("--results", help="write bench.json and bench.md (bench_compiled.* with the target compiled) under RESULTS/cpu_<class>/<kernel>/")
    args = parser.parse_args()
    args.argv = sys.argv[1:]
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
        stem = results_stem(result)
        (folder / f"{stem}.json").write_text(json.dumps(result, indent=2))
        (folder / f"{stem}.md").write_text(table + "\n")
        print(f"-> {folder}/{stem}.md")


def results_stem(result: dict) -> str:
    """bench, or bench_compiled for a run on the compiled target: the eager table is not overwritten."""
    return "bench_compiled" if result.get("target_mode") == "compiled" else "bench"


if __name__ == "__main__":
    main()
