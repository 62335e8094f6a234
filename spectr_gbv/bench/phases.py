"""Where an iteration's time goes: drafting, scoring, verification and the rest, per method.

    python -m spectr_gbv.bench.phases [--methods sd gbv spectr_gbv as_bv_handoff] [--drafts 1 2]
                                      [--lengths 4] [--max-new-tokens 48] [--rounds 2] [--results assets/results]

The lean loop takes no phase timings (on CUDA each is a device sync), so this runs the detailed
loop, which times each phase at its boundaries (`IterationTimings`), with the theory line off,
on the bench's prompts. Per method it reports milliseconds per iteration: drafting the K blocks,
scoring them with the target (the logits turned into probabilities included), verifying, and
the rest of the wall time (the session's start with its prefill, the commits, the detailed
loop's records), beside one plain-decoding step of the same target for scale. Each (method,
prompt) is warmed up, then keeps its fastest of the rounds. A wall clock: this machine only,
measured on a quiet one; read the shares, not the absolute times.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .. import generate
from ..config import AUTOREGRESSIVE


@dataclass(frozen=True)
class Phases:
    """Milliseconds per iteration of one (method, K, L) over the prompts."""

    method: str
    K: int
    L: int
    iterations: int
    tokens: int
    draft_ms: float
    score_ms: float
    verify_ms: float
    rest_ms: float

    @property
    def total_ms(self) -> float:
        return self.draft_ms + self.score_ms + self.verify_ms + self.rest_ms


def measure(target, draft, prompts: list[list[int]], method: str, K: int, L: int, T: float, n: int,
            rounds: int = 2) -> Phases:
    """`Phases` of one (method, K, L) ("ar": plain decoding, its whole step counted as scoring):
    per prompt a warm-up, then the fastest of `rounds` runs."""
    totals = dict(iterations=0, tokens=0, draft=0.0, score=0.0, verify=0.0, wall=0.0)
    for seed, ids in enumerate(prompts):
        def run():
            start = time.perf_counter()
            record = generate(target, draft if method != AUTOREGRESSIVE else None, ids, method=method, num_drafts=max(K, 1),
                              draft_length=max(L, 1), temperature=T, max_new_tokens=n, seed=seed, with_theory=False)
            return record, time.perf_counter() - start

        run()  # warm-up
        record, wall = min((run() for _ in range(rounds)), key=lambda result: result[1])
        totals["iterations"] += len(record.iterations)
        totals["tokens"] += len(record.tokens)
        totals["wall"] += wall
        for it in record.iterations:
            totals["draft"] += it.timings.draft_s
            totals["score"] += it.timings.target_s
            totals["verify"] += it.timings.verify_s
    per = 1e3 / max(totals["iterations"], 1)
    rest = totals["wall"] - totals["draft"] - totals["score"] - totals["verify"]
    return Phases(method, K, L, totals["iterations"], totals["tokens"], totals["draft"] * per, totals["score"] * per,
                  totals["verify"] * per, rest * per)


def markdown(rows: list[Phases], header: str) -> str:
    step = next((r.total_ms for r in rows if r.method == AUTOREGRESSIVE), None)
    lines = [header, "", "| run | K | L | tokens / iteration | draft ms | score ms | verify ms | rest ms | total ms | "
             "total in plain steps |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        steps = f"{r.total_ms / step:.2f}" if step else "–"
        lines.append(f"| {r.method} | {r.K} | {r.L} | {r.tokens / max(r.iterations, 1):.2f} | {r.draft_ms:.1f} | "
                     f"{r.score_ms:.1f} | {r.verify_ms:.1f} | {r.rest_ms:.1f} | {r.total_ms:.1f} | {steps} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="default")
    parser.add_argument("--draft", default=None)
    parser.add_argument("--methods", nargs="+", default=["sd", "gbv", "spectr_gbv", "as_bv_handoff"])
    parser.add_argument("--drafts", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--lengths", type=int, nargs="+", default=[4])
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--max-new-tokens", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--results", help="write RESULTS/cpu_<class>/<kernel>/phases.md, beside the bench's files")
    args = parser.parse_args(argv)
    from ..methods import METHODS
    from ..models.hf import chat_prompt_ids, load_pair
    from ..prompt_sets import bench_prompts
    from .__main__ import cpu_line, results_folder_for

    target, draft, tokenizer = load_pair(args.target, args.draft)
    kernel = getattr(getattr(target, "loaded", None), "kernel", None)
    prompts = [chat_prompt_ids(tokenizer, text) for text in bench_prompts().values()]
    configs = [("ar", 0, 0)] + [(m, K, L) for m in args.methods
                                for K in (args.drafts if METHODS[m].multi_draft else [1]) for L in args.lengths]
    rows = [measure(target, draft, prompts, m, K, L, args.temperature, args.max_new_tokens, args.rounds)
            for m, K, L in configs]
    command = "python -m spectr_gbv.bench.phases " + " ".join(sys.argv[1:] if argv is None else argv)
    header = (f"{cpu_line(kernel)}. Target {target.name}, draft {draft.name}; {len(prompts)} bench prompts, "
              f"{args.max_new_tokens} new tokens, T = {args.temperature}; the detailed loop with no theory line, each "
              f"(run, prompt) warmed up and the fastest of {args.rounds} rounds. Command: `{command}`.")
    text = markdown(rows, header)
    print(text)
    if args.results:
        folder = results_folder_for(args.results, target)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "phases.md").write_text(text + "\n")
        print(f"-> {folder / 'phases.md'}")
    return text


if __name__ == "__main__":
    main()
