"""Theory against measurement on the default pair: mean accepted tau vs the mean of E[tau | drafts].

    python -m spectr_gbv.bench.theory [--methods ...] [--max-new-tokens 96]

For each method, the held-out prompts of `spectr_gbv.bench` are decoded at K = 4, L = 6,
T = 0.7 (one seed per prompt) with the theory line on. The two columns must agree within
Monte-Carlo error (a systematic gap means a bug or a lossy rule); the theory column is
the lower-variance way to compare methods on the same pair.
"""

from __future__ import annotations

import argparse
import math

from .. import METHODS, generate, load_pair
from ..models.hf import chat_prompt_ids
from ..prompt_sets import bench_prompts

PROMPTS = bench_prompts()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=["sd", "rrs", "spectr", "gbv", "spectr_gbv", "as_bv", "as_bv_handoff", "traversal"])
    parser.add_argument("--max-new-tokens", type=int, default=96)
    args = parser.parse_args()
    target, draft, tokenizer = load_pair("default")
    print(f"Draft: {draft.name}; K = 4, L = 6, T = 0.7; prompts: {', '.join(PROMPTS)}; {args.max_new_tokens} tokens each\n")
    print("| method | iterations | measured mean tau (± 2 s.e.) | theory: mean E[tau given drafts] |")
    print("|---|---|---|---|")
    for method in args.methods:
        if METHODS[method].expected_accepted is None:
            continue
        taus, expected = [], []
        for i, text in enumerate(PROMPTS.values()):
            run = generate(target, draft, chat_prompt_ids(tokenizer, text), method=method, num_drafts=4, draft_length=6,
                           temperature=0.7, max_new_tokens=args.max_new_tokens, seed=i)
            taus += [it.num_accepted for it in run.iterations]
            expected += [it.expected_accepted for it in run.iterations]
        mean = sum(taus) / len(taus)
        spread = 2 * math.sqrt(sum((t - mean) ** 2 for t in taus) / (len(taus) - 1) / len(taus))
        print(f"| {method} | {len(taus)} | {mean:.3f} ± {spread:.3f} | {sum(expected) / len(expected):.3f} |", flush=True)


if __name__ == "__main__":
    main()
