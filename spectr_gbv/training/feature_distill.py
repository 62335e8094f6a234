"""Train the feature-conditioned draft (spectr_gbv.models.feature_draft) of the default target.

    python -m spectr_gbv.training.feature_data --round 0 --first 0 --count 512   (and the other chunks)
    python -m spectr_gbv.training.feature_distill --data 'cache/features.round0.*.pt' [--out assets/draft/feature]

Data: the target's own samples with its top-64 distributions and its features
(`spectr_gbv.training.feature_data`; the measured prompts are dropped there). Training: the head
unrolled to `--depth` draft positions in parallel ("training-time test", EAGLE-3): depth 1
reads the target's feature, depth d > 1 the head's own prediction from depth d - 1, with the
attention pattern the draft's cache has at inference. Loss: cross-entropy to the target's
distribution restricted to the head's tokens (KL up to a constant), weighted DEPTH_WEIGHT^(d-1).
The restricted token list is a resumed head's own; for a new head, the shipped distilled draft's
(chosen from the target's mass over 358,924 positions), or with --head-tokens N the N tokens
carrying the most target mass in the training data.
"""

from __future__ import annotations

import argparse
import glob
import json
import random
import time
from pathlib import Path

import torch

from ..models.feature_draft import FeatureDraftHead, FeatureDraftShape, save_feature_draft, tokenizer_fingerprint

DEPTH = 3
DEPTH_WEIGHT = 0.8
TV_TEMPERATURE = 0.7  # the temperature of the total-variation term (--tv-weight): the app's default T
EPOCHS = 8
LR = 1e-3
INIT_LAYER = -1  # the target layer the decoder layer starts from (its last one)
VALIDATION = 64


def from_chunk(sample: dict, fused: bool) -> dict:
    """A `draft_data` chunk's sequence in the shape `training_record` reads: its features
    [S - 1, F, H] become the fused layers' outputs side by side [S - 1, (F - 1) * H], or the
    final norm's output [S - 1, H] (the last slot) for a single-feature head."""
    features = sample["features"]
    chosen = features[:, :-1].reshape(features.shape[0], -1) if fused else features[:, -1]
    return sample | {"features": chosen, "top_ids": sample["top_ids"].long(), "top_probs": sample["top_probs"].float()}


def chunk_paths(patterns: list[str]) -> list[str]:
    """The files the glob patterns match, sorted (chunk order is file order)."""
    return sorted(p for pattern in patterns for p in glob.glob(pattern))


def load_chunks(patterns: list[str], fused: bool, training: bool = True) -> list[dict]:
    """Every sequence of the matching chunks, in file order; for training (the default), none from
    a held-out conversation (refused). Validation reads held-out chunks with `training=False`."""
    from .draft_data import is_trainable

    samples = []
    for path in chunk_paths(patterns):
        for sample in torch.load(path):
            if training and not is_trainable(sample):
                raise SystemExit(f"{path} holds a held-out or measured prompt ({sample.get('key')}): not training on it")
            samples.append(from_chunk(sample, fused))
    return samples


def training_record(sample: dict) -> dict | None:
    """The entries of one sequence: features f_0..f_{S-2}, tokens x_1..x_{S-1}, and where the
    teacher distributions sit: the entry at position s (depth d) predicts token s + 2, whose
    target distribution is top_*[s + 2 - prompt_length]."""
    ids, start = sample["ids"], sample["prompt_length"]
    n = sample["top_ids"].shape[0]
    if n < 3:
        return None
    return {
        "features": sample["features"],
        "tokens": torch.tensor(ids[1:]),
        "first": start - 2,  # first entry position with a teacher
        "top_ids": sample["top_ids"],
        "top_probs": sample["top_probs"],
    }


def tempered(top_probs: torch.Tensor, temperature: float) -> torch.Tensor:
    """The target's stored top-k law [N, k] at `temperature`, renormalised over the k (float64)."""
    sharpened = top_probs.double() ** (1 / temperature)
    return sharpened / sharpened.sum(-1, keepdim=True)


def record_losses(head: FeatureDraftHead, embedding: torch.Tensor, output: torch.Tensor, record: dict,
                  token_index: torch.Tensor, depth: int, tv_weight: float = 0.0) -> list[torch.Tensor]:
    """Per depth, the mean cross-entropy to the target at every entry that has a teacher, plus
    `tv_weight` times the mean total variation at T = TV_TEMPERATURE (1 - the acceptance alpha).

    Why the second term: from a trained head, one more epoch of cross-entropy lowered the held-out
    loss (2.877 -> 2.867) and yet lowered alpha at T = 0.7 (0.434 -> 0.432): forward KL rewards
    covering the target's tail, alpha rewards matching where the mass is. The TV term's gradient
    raises exactly the draft's tokens that sit below the target (DistillSpec's TVD objective)."""
    features = record["features"].float()
    first, n = record["first"], record["top_ids"].shape[0]
    start = max(first - depth, 0)  # earlier prompt positions are attention context only
    outputs = head.unrolled(features, embedding[record["tokens"]], depth, start)
    restricted = token_index[record["top_ids"]]  # -1 where outside the head
    inside = restricted >= 0
    weights = torch.where(inside, record["top_probs"], 0.0)
    if tv_weight:
        teacher_t = tempered(record["top_probs"], TV_TEMPERATURE).float()
    losses = []
    for d, g in enumerate(outputs, start=1):
        lo = max(first, d - 1)  # depth d needs d - 1 earlier entries
        rows = g[lo - start : first + n - start]
        teacher = slice(lo - first, n)
        logits = rows @ output.T
        picked = torch.log_softmax(logits, dim=-1).gather(-1, restricted[teacher].clamp(min=0))
        loss = -(weights[teacher] * picked).sum(-1).mean()
        if tv_weight:
            draft_t = torch.softmax(logits.float() / TV_TEMPERATURE, dim=-1).gather(-1, restricted[teacher].clamp(min=0))
            alpha = torch.where(inside[teacher], torch.minimum(draft_t, teacher_t[teacher]), 0.0).sum(-1).mean()
            loss = loss + tv_weight * (1.0 - alpha)
        losses.append(loss)
    return losses


def acceptance(head, embedding, output, record, token_index, temperature: float = 0.7) -> tuple[float, int]:
    """Sum over teacher positions of sum_x min(p(x), q(x)) at depth 1, with q the target's top-64
    renormalised at `temperature` (an estimate of SD's per-token acceptance alpha), and the count."""
    with torch.no_grad():
        first, n = record["first"], record["top_ids"].shape[0]
        g = head.unrolled(record["features"].float(), embedding[record["tokens"]], 1, first)[0]
        logits = g[:n] @ output.T / temperature
        p = torch.softmax(logits, dim=-1)
        q = tempered(record["top_probs"], temperature).float()
        restricted = token_index[record["top_ids"]]
        p_at = torch.where(restricted >= 0, p.gather(-1, restricted.clamp(min=0)), 0.0)
        return torch.minimum(p_at, q).sum().item(), n


def mean_acceptance(head, embedding, output, records, token_index, temperature: float = 0.7) -> float:
    """`acceptance` pooled over every teacher position of `records` (0 when there is none)."""
    accepted = [acceptance(head, embedding, output, r, token_index, temperature) for r in records]
    return sum(a for a, _ in accepted) / max(sum(n for _, n in accepted), 1)


def head_token_index(vocab_size: int, output_ids: list[int]) -> torch.Tensor:
    """[vocab_size]: each token's row in the restricted head, -1 for a token outside it."""
    token_index = torch.full((vocab_size,), -1, dtype=torch.long)
    token_index[output_ids] = torch.arange(len(output_ids))
    return token_index


def train(head, embedding, output, records, validation, token_index, epochs: int, depth: int, lr: float, seed: int,
          bf16: bool = False, batch: int = 1, on_epoch=None, tv_weight: float = 0.0):
    """`batch` sequences per optimiser step (their gradients summed, then averaged); `on_epoch(history)`
    after every epoch (the command saves the head then, so a long run stopped midway keeps its epochs)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.manual_seed(seed)
    parameters = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=lr, weight_decay=0.0)
    steps = epochs * -(-len(records) // batch)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps, pct_start=0.05)
    order = random.Random(seed)
    # The head is constant: cast once, not in every autocast matmul (the casts were 9 % of a step).
    loss_output = output.to(torch.bfloat16) if bf16 else output
    history = []
    for epoch in range(epochs):
        started = time.time()
        indices = list(range(len(records)))
        order.shuffle(indices)
        totals = [0.0] * depth
        for step, i in enumerate(indices, start=1):
            if step % 100 == 0:
                print(f"epoch {epoch + 1}: {step}/{len(indices)} sequences, {time.time() - started:.0f} s", flush=True)
            # bf16 autocast: the matmuls (most of all the restricted head's logits) in native bf16,
            # the weights and the optimiser in fp32; about 1.5x faster on a CPU with AVX512-BF16.
            # The unrolled masks are dense and short: the math attention's backward is cheaper on a
            # CPU than the flash kernel's (17 % of a step in the flash backward; profiled).
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16), sdpa_kernel(SDPBackend.MATH):
                losses = record_losses(head, embedding, loss_output, records[i], token_index, depth, tv_weight)
                loss = sum(DEPTH_WEIGHT ** d * value for d, value in enumerate(losses)) / batch
                loss.backward()
            if step % batch == 0 or step == len(indices):
                torch.nn.utils.clip_grad_norm_(parameters, 1.0)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            for d, value in enumerate(losses):
                totals[d] += value.item()
        with torch.no_grad():
            val = [0.0] * depth
            for r in validation:
                for d, value in enumerate(record_losses(head, embedding, output, r, token_index, depth)):
                    val[d] += value.item()
        alpha = mean_acceptance(head, embedding, output, validation, token_index)
        entry = {"epoch": epoch + 1, "train_loss": [t / len(records) for t in totals],
                 "validation_loss": [v / max(len(validation), 1) for v in val], "validation_alpha_t07": alpha,
                 "seconds": round(time.time() - started)}
        history.append(entry)
        print(json.dumps(entry), flush=True)
        if on_epoch is not None:
            on_epoch(history)
    return history


def head_token_ids(resume: str | None, default_file: Path) -> list[int]:
    """The head's token list: a resumed head keeps its own (the list is what it was trained to spread
    its mass over; a resumed fused head once trained on the distilled draft's list, 5,925 of its 8,192
    tokens in common, and lost acceptance); otherwise `default_file`'s. --head-tokens overrides both."""
    from ..models.hf import OUTPUT_TOKEN_IDS_FILE

    own = Path(resume) / OUTPUT_TOKEN_IDS_FILE if resume else None
    return json.loads((own if own is not None and own.is_file() else default_file).read_text())


def warm_start(head: FeatureDraftHead, folder: Path, target_config, tokenizer) -> None:
    """Copy a trained single-feature head's layers into a fused head, and start the fusion as
    the highest fused layer passed through: a trained layer is a better start than a copy of the
    target's, and the highest layer's normed output is the nearest thing to the final norm's."""
    from ..models.feature_draft import load_feature_draft_head

    single, _ = load_feature_draft_head(folder, target_config, tokenizer, "default")
    if single.shape.feature_layers:
        raise SystemExit(f"{folder} is a fused head already; use --resume")
    missing, unexpected = head.load_state_dict(single.state_dict(), strict=False)
    assert not unexpected and all(k.startswith(("fuse", "norm_layers")) for k in missing), (missing, unexpected)
    h = head.shape.hidden_size
    with torch.no_grad():
        head.fuse.weight.zero_()
        head.fuse.weight[:, -h:] = torch.eye(h)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", nargs="+", default=["cache/features.round*.pt"], help="feature_data outputs (globs)")
    parser.add_argument("--out", default="assets/draft/feature")
    parser.add_argument("--epochs", type=int, default=EPOCHS)
    parser.add_argument("--depth", type=int, default=DEPTH, help="draft positions unrolled in training")
    parser.add_argument("--lr", type=float, default=LR)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--validation", type=int, default=VALIDATION, help="sequences kept out of training")
    parser.add_argument("--limit", type=int, help="train on at most this many sequences (quick trials)")
    parser.add_argument("--resume", help="continue from the head saved in this folder (a new learning-rate cycle)")
    parser.add_argument("--chunks", nargs="+", help="draft_data chunks (globs) instead of --data")
    parser.add_argument("--validation-chunks", nargs="+", help="draft_data chunks of held-out prompts to validate on")
    parser.add_argument("--fused", action="store_true", help="fuse the target's low, middle and high layers (EAGLE-3)")
    parser.add_argument("--warm-start", help="start a fused head from the single-feature head in this folder: its "
                                                 "layers copied, the fusion passing the highest layer through")
    parser.add_argument("--bf16", action="store_true", help="train under bf16 autocast (for CPUs with native bf16)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's own)")
    parser.add_argument("--batch", type=int, default=1, help="sequences per optimiser step")
    parser.add_argument("--tv-weight", type=float, default=0.0,
                        help="add this times the total variation at T = 0.7 (1 - alpha) to each depth's loss")
    parser.add_argument("--head-tokens", type=int, help="choose the head's tokens anew: the N carrying the most target "
                                                         "mass in the training data (default: the shipped list)")
    args = parser.parse_args()
    started = time.time()
    if args.threads:
        torch.set_num_threads(args.threads)
    from ..models.hf import DRAFT_ASSETS, OUTPUT_TOKEN_IDS_FILE, load_model

    loaded = load_model("default", device="cpu", dtype=torch.float32)
    target, tokenizer = loaded.model, loaded.tokenizer
    if args.chunks:
        paths = chunk_paths(args.chunks)
        samples = load_chunks(args.chunks, args.fused)
    else:
        paths = chunk_paths(args.data)
        samples = [s for path in paths for s in torch.load(path)]
    if not paths:
        raise SystemExit(f"no data matches {args.chunks or args.data}; sample it with python -m spectr_gbv.training.draft_data")
    records = [r for r in map(training_record, samples) if r is not None]
    if args.validation_chunks:
        validation = [r for r in map(training_record, load_chunks(args.validation_chunks, args.fused, training=False))
                      if r is not None][: args.validation]
    else:
        records, validation = records[: len(records) - args.validation], records[len(records) - args.validation :]
    if args.limit:
        records = records[: args.limit]
    output_ids = head_token_ids(args.resume, DRAFT_ASSETS / OUTPUT_TOKEN_IDS_FILE)
    if args.head_tokens:
        from .distill import choose_output_tokens

        special = [t for t in (tokenizer.eos_token_id, tokenizer.bos_token_id) if t is not None]
        output_ids = choose_output_tokens(records, len(tokenizer), special, args.head_tokens)
    token_index = head_token_index(len(tokenizer), output_ids)
    embedding = target.get_input_embeddings().weight.detach()
    output = target.get_output_embeddings().weight[output_ids].detach()
    from .draft_data import FEATURE_LAYERS

    shape = FeatureDraftShape.of_target(target.config, FEATURE_LAYERS if args.fused else ())
    earlier = []
    if args.resume:
        from ..models.feature_draft import load_feature_draft_head

        head, previous = load_feature_draft_head(Path(args.resume), target.config, tokenizer, "default")
        head.train()
        earlier = previous.get("history", [])
    else:
        head = FeatureDraftHead(shape)
        head.init_from_target_layer(target.model.layers[INIT_LAYER], target.model.norm)
        if args.warm_start:
            warm_start(head, Path(args.warm_start), target.config, tokenizer)
    print(f"{len(records)} training and {len(validation)} validation sequences from {len(paths)} files", flush=True)

    def run_record(history: list[dict]) -> dict:
        return {
        "kind": "feature-conditioned (EAGLE-style): fc + 1 decoder layer + norm, restricted head"
                + (", low/middle/high target layers fused (EAGLE-3)" if shape.feature_layers else ""),
        "feature_layers": list(shape.feature_layers),
        "base": "default", "hidden_size": shape.hidden_size, "vocab_size": len(tokenizer),
        "tokenizer": tokenizer_fingerprint(tokenizer), "output_tokens": len(output_ids),
        "init_layer": INIT_LAYER, "depth": args.depth, "depth_weight": DEPTH_WEIGHT, "lr": args.lr,
        "epochs": len(history), "seed": args.seed, "data": [Path(p).name for p in paths],
        "cycles": ([len(earlier)] if earlier else []) + [len(history) - len(earlier)],  # epochs done per run
        "sequences": len(records), "validation_sequences": len(validation),
        "continuation_tokens": sum(r["top_ids"].shape[0] for r in records),
        "history": history, "train_seconds": round(time.time() - started), "torch": torch.__version__,
        "stored_dtype": "float16", "warm_start": args.warm_start, "bf16_autocast": args.bf16, "batch": args.batch, "tv_weight": args.tv_weight,
        "validation_data": [Path(p).name for p in chunk_paths(args.validation_chunks or [])],
        }

    out = Path(args.out)

    def save(history: list[dict]) -> None:
        save_feature_draft(head, out, run_record(earlier + history))
        (out / OUTPUT_TOKEN_IDS_FILE).write_text(json.dumps(output_ids))

    history = earlier + train(head, embedding, output, records, validation, token_index, args.epochs, args.depth,
                              args.lr, args.seed + len(earlier), args.bf16, args.batch, on_epoch=save,
                              tv_weight=args.tv_weight)
    print(json.dumps({k: v for k, v in run_record(history).items() if k != "history"}, indent=2))


if __name__ == "__main__":
    main()
