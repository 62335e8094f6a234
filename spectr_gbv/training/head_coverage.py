"""How much of the target's next-token mass falls outside a feature draft's restricted head.

The draft proposes only the tokens of its head (`output_token_ids.json`, 8,192 of 49,152), so at
any position its acceptance sum_x min(p(x), q(x)) is at most q(head), the target's mass on those
tokens: the mass outside caps alpha whatever the training. Measured on the target's own laws in
sampled chunks (their top-64, renormalised at temperature T, as `feature_distill.acceptance`).

    python -m spectr_gbv.training.head_coverage assets/draft/feature 'cache/draft_data/heldout/chunk_*.pt'
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

TEMPERATURES = (0.4, 0.7, 1.0)


def mass_outside(top_ids: torch.Tensor, top_probs: torch.Tensor, in_head: torch.Tensor, temperature: float) -> torch.Tensor:
    """Per position [N], the target's mass outside the head at `temperature`: top_probs [N, k] over
    top_ids [N, k], renormalised over the k at that temperature; in_head [V] bool."""
    from .feature_distill import tempered

    return (tempered(top_probs, temperature) * ~in_head[top_ids]).sum(-1)


def coverage(paths: list[str], head_ids: list[int], vocab_size: int) -> dict:
    """Mean mass outside the head per temperature over every position of the chunks, and the mean
    mass the stored top-k carries of the full law (what the estimate cannot see)."""
    in_head = torch.zeros(vocab_size, dtype=torch.bool)
    in_head[head_ids] = True
    outside = {t: [] for t in TEMPERATURES}
    stored = []
    for path in paths:
        for sample in torch.load(path):
            ids, probs = sample["top_ids"], sample["top_probs"].double()
            stored.append(probs.sum(-1))
            for t in TEMPERATURES:
                outside[t].append(mass_outside(ids, probs, in_head, t))
    positions = sum(len(x) for x in stored)
    return {"positions": positions, "top_k_mass": torch.cat(stored).mean().item(),
            "outside": {t: torch.cat(v).mean().item() for t, v in outside.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("draft", help="a feature draft folder (holds output_token_ids.json)")
    parser.add_argument("chunks", nargs="+", help="sampled chunk files or patterns")
    parser.add_argument("--vocab-size", type=int, default=49152)
    args = parser.parse_args()
    from ..models.hf import OUTPUT_TOKEN_IDS_FILE
    from .feature_distill import chunk_paths

    head_ids = json.loads((Path(args.draft) / OUTPUT_TOKEN_IDS_FILE).read_text())
    paths = chunk_paths(args.chunks)
    found = coverage(paths, head_ids, args.vocab_size)
    print(f"{len(head_ids):,}-token head of {args.draft}, {found['positions']:,} positions of {len(paths)} chunk(s); "
          f"the stored top-k carries {found['top_k_mass']:.4f} of the target's mass")
    print("| T | target mass outside the head | so alpha is at most |\n|---|---|---|")
    for t, m in found["outside"].items():
        print(f"| {t} | {m:.4f} | {1 - m:.4f} |")


if __name__ == "__main__":
    main()
