"""Held-out acceptance of saved feature drafts at several temperatures, on the same sequences.

The estimator is training's validation (`feature_distill.acceptance`: sum_x min(p, q) at the
first draft position, q the target's stored top-64 renormalised at T), so heads trained in
different runs, or stored differently, compare on equal terms:

    python -m spectr_gbv.training.draft_validation cache/draft_data/heldout/chunk_0000.pt \\
        assets/draft/feature_v2 assets/draft/feature
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

TEMPERATURES = (0.4, 0.7, 1.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("chunk", help="a held-out chunk of spectr_gbv.training.draft_data")
    parser.add_argument("drafts", nargs="+", help="feature draft folders of the default target")
    parser.add_argument("--sequences", type=int, default=128, help="its first N sequences (default 128)")
    args = parser.parse_args()
    torch.set_num_threads(1)
    from ..models.feature_draft import load_feature_draft_head
    from ..models.hf import OUTPUT_TOKEN_IDS_FILE, load_model
    from . import feature_distill

    target = load_model("default", "cpu", torch.float32)
    samples = feature_distill.load_chunks([args.chunk], True, training=False)
    records = [r for r in map(feature_distill.training_record, samples) if r is not None][: args.sequences]
    embedding = target.model.get_input_embeddings().weight.detach()
    positions = sum(r["top_ids"].shape[0] for r in records)
    print(f"{len(records)} sequences, {positions:,} positions of {args.chunk}")
    print("| draft | " + " | ".join(f"alpha T = {t}" for t in TEMPERATURES) + " |\n|---|" + "---|" * len(TEMPERATURES))
    for folder in map(Path, args.drafts):
        head, _ = load_feature_draft_head(folder, target.model.config, target.tokenizer, "default")
        ids = json.loads((folder / OUTPUT_TOKEN_IDS_FILE).read_text())
        token_index = feature_distill.head_token_index(len(target.tokenizer), ids)
        output = target.model.get_output_embeddings().weight[ids].detach()
        alphas = [feature_distill.mean_acceptance(head, embedding, output, records, token_index, t) for t in TEMPERATURES]
        print(f"| {folder} | " + " | ".join(f"{a:.4f}" for a in alphas) + " |", flush=True)


if __name__ == "__main__":
    main()
