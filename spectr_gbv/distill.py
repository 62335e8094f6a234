"""Distil a small draft for the offline default target (SmolLM2-135M-Instruct).

    python -m spectr_gbv.distill [--out assets/draft] [--sequences 320] [--epochs 6] [--seed 0]

Kangaroo / LayerSkip-style self-distillation, from the installed packages only:

1. prompts: written by the templates below (code, math, story, instructions), seeded;
2. data: the target's own continuations of those prompts (sampled, T = 0.8), and for every
   continuation position the target's full next-token distribution (kept as its top 64)
   and the hidden state after its first REUSED_LAYERS layers;
3. draft: those first layers (frozen, shared with the target), ONE new decoder layer
   (initialised from the target's next layer) and a new final norm, trained to minimise
   the cross-entropy to the target's distribution (KL up to a constant), and the target's
   tied output head restricted to the OUTPUT_TOKENS tokens with the most target mass
   (FR-Spec-style): the draft's distribution is still a proper distribution over the full
   vocabulary, with zero mass on the other tokens;
4. output: the new layer and norm as safetensors, the restricted token ids, and a JSON
   record of the run. `spectr_gbv.models.hf.default_draft_dir()` assembles them with the
   target's shared weights into an ordinary model folder, loaded like any other model.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path

import torch

REUSED_LAYERS = 4
OUTPUT_TOKENS = 8192
TEACHER_TOP = 64
SAMPLE_TEMPERATURE = 0.8
CONTINUATION_TOKENS = 96

# ------------------------------------------------------------------------------- prompts

CODE_TASKS = [
    "reverses a string", "checks whether a number is prime", "returns the factorial of n", "merges two sorted lists",
    "counts the vowels in a sentence", "finds the largest element of a list", "removes duplicates from a list",
    "computes the greatest common divisor of two numbers", "converts Celsius to Fahrenheit", "flattens a nested list",
    "checks whether a word is a palindrome", "sums the digits of an integer", "returns the n-th Fibonacci number",
    "sorts a list of dictionaries by a key", "reads a text file and counts its lines", "computes the mean of a list",
]
LANGUAGES = ["Python", "JavaScript", "Python", "C"]
STORY_SUBJECTS = [
    "a lighthouse keeper", "a robot who learns to paint", "a lost kitten", "two friends on a mountain",
    "a baker in a small town", "a child who finds a map", "an old sailor", "a dragon who is afraid of fire",
    "a girl who talks to trees", "a detective in the rain", "a farmer and a storm", "a musician on a train",
]
STORY_FORMS = ["Tell a short story about {}.", "Write a bedtime story about {}.", "Write a short poem about {}."]
INSTRUCTION_TOPICS = [
    "learning a new language", "staying focused while studying", "saving money", "sleeping better", "writing a good email",
    "preparing for a job interview", "starting to run", "keeping plants alive", "cooking rice", "reducing stress",
    "organising a small party", "learning to play the guitar",
]
INSTRUCTION_FORMS = ["Give three tips for {}.", "Explain how to get better at {}.", "What are common mistakes in {}?"]
QUESTION_FORMS = ["What is the capital of {}?", "Describe the climate of {}.", "Name two famous foods from {}."]
COUNTRIES = ["France", "Japan", "Brazil", "Kenya", "Canada", "India", "Italy", "Mexico", "Egypt", "Norway"]


def math_prompt(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 20), rng.randint(2, 12), rng.randint(5, 99)
    item = rng.choice(["pens", "apples", "books", "tickets", "cups"])
    forms = [
        f"A shop sells {item} at {a} dollars each. How much do {b} {item} cost? Explain step by step.",
        f"Tom has {c} marbles and gives {b} to each of his {a % 5 + 2} friends. How many does he have left?",
        f"What is {a} times {b} plus {c}? Show your work.",
        f"A train travels {c} km in {b} hours. What is its average speed?",
    ]
    return rng.choice(forms)


def make_prompts(count: int, seed: int) -> list[tuple[str, str]]:
    """(kind, prompt) pairs, cycling through the four kinds; deterministic in `seed`."""
    rng = random.Random(seed)
    makers = {
        "code": lambda: f"Write a {rng.choice(LANGUAGES)} function that {rng.choice(CODE_TASKS)}.",
        "math": lambda: math_prompt(rng),
        "story": lambda: rng.choice(STORY_FORMS).format(rng.choice(STORY_SUBJECTS)),
        "instructions": lambda: rng.choice(INSTRUCTION_FORMS + QUESTION_FORMS).format(
            rng.choice(INSTRUCTION_TOPICS + COUNTRIES)
        ).replace("Give three tips for France", "Give three tips for visiting France"),
    }
    kinds = list(makers)
    return [(kinds[i % 4], makers[kinds[i % 4]]()) for i in range(count)]


HELD_OUT_PROMPTS = [  # the app's kinds of example; none of them is produced by the templates
    ("code", "Write a Python class for a simple bank account with deposit and withdraw methods."),
    ("code", "Write a function that returns all even numbers from a list."),
    ("math", "If a rectangle is 7 cm long and 4 cm wide, what is its area and its perimeter?"),
    ("math", "Anna reads 15 pages a day. How many days does she need for a 240-page book?"),
    ("story", "Write a short story about a clockmaker who can stop time."),
    ("story", "Tell a story about a penguin who wants to fly."),
    ("instructions", "How do I make a cup of tea?"),
    ("instructions", "List four ways to be more productive in the morning."),
]

# ------------------------------------------------------------------------------- data


def sample_continuations(target, tokenizer, prompts: list[str], seed: int, batch: int = 16) -> list[tuple[list[int], int]]:
    """(full token ids, prompt length) per prompt: the target's own sampled continuation."""
    from .models.hf import chat_prompt_ids

    torch.manual_seed(seed)  # transformers samples from the global generator
    encoded = [chat_prompt_ids(tokenizer, p) for p in prompts]
    pad = tokenizer.eos_token_id
    out: list[tuple[list[int], int]] = []
    for start in range(0, len(encoded), batch):
        group = encoded[start : start + batch]
        width = max(len(ids) for ids in group)
        ids = torch.tensor([[pad] * (width - len(x)) + x for x in group])  # left padding
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in group])
        with torch.inference_mode():
            generated = target.generate(
                ids, attention_mask=mask, do_sample=True, temperature=SAMPLE_TEMPERATURE, top_k=None, top_p=None,
                max_new_tokens=CONTINUATION_TOKENS, pad_token_id=pad,
            )
        for x, row in zip(group, generated[:, width:].tolist()):
            if pad in row:
                row = row[: row.index(pad) + 1]
            out.append((x + row, len(x)))
    return out


def teacher_records(target, sequences: list[tuple[list[int], int]], reused: int = REUSED_LAYERS) -> list[dict]:
    """Per sequence: hidden state after the `reused` first layers, and the target's top-k
    next-token distributions at the positions that predict continuation tokens."""
    records = []
    for ids, prompt_length in sequences:
        if len(ids) - prompt_length < 2:
            continue
        with torch.inference_mode():
            out = target(torch.tensor([ids]), output_hidden_states=True)
        probs = torch.softmax(out.logits[0, prompt_length - 1 : -1].float(), -1)
        top = torch.topk(probs, TEACHER_TOP, dim=-1)
        records.append({
            "hidden": out.hidden_states[reused][0].clone(),  # [S, H], the input of layer `reused`
            "start": prompt_length - 1,
            "top_ids": top.indices,
            "top_probs": top.values,
        })
    return records


def choose_output_tokens(records: list[dict], vocab: int, always: list[int]) -> list[int]:
    """The OUTPUT_TOKENS tokens carrying the most target probability over the data."""
    mass = torch.zeros(vocab, dtype=torch.float64)
    for r in records:
        mass.index_add_(0, r["top_ids"].reshape(-1), r["top_probs"].reshape(-1).double())
    mass[always] = float("inf")
    return sorted(torch.topk(mass, OUTPUT_TOKENS).indices.tolist())


# ------------------------------------------------------------------------------- draft


class DraftHead(torch.nn.Module):
    """The trained part: one decoder layer and a final norm, over frozen reused layers."""

    def __init__(self, target, init_layer: int = REUSED_LAYERS, reused: int = REUSED_LAYERS):
        super().__init__()
        import copy

        inner = target.model
        self.layer = copy.deepcopy(inner.layers[init_layer])
        self.layer.self_attn.layer_idx = reused
        self.norm = copy.deepcopy(inner.norm)
        for parameter in [*self.layer.parameters(), *self.norm.parameters()]:
            parameter.requires_grad_(True)  # copies of frozen target weights: these are trained
        self.rotary = inner.rotary_emb

    def forward(self, hidden: torch.Tensor, head: torch.Tensor) -> torch.Tensor:
        """hidden [1, S, H] after the reused layers -> log-probs over the restricted head [1, S, V']."""
        length = hidden.shape[1]
        positions = torch.arange(length).unsqueeze(0)
        causal = torch.full((length, length), float("-inf")).triu(1)[None, None]
        out = self.layer(hidden, attention_mask=causal, position_ids=positions,
                         position_embeddings=self.rotary(hidden, positions))
        out = out[0] if isinstance(out, tuple) else out
        return torch.log_softmax(self.norm(out) @ head.T, dim=-1)


def train(draft: DraftHead, head: torch.Tensor, records: list[dict], token_index: torch.Tensor, epochs: int, seed: int,
          lr: float) -> list[float]:
    """Cross-entropy of the draft to the target's (top-k, restricted) distribution."""
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW([p for p in draft.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    steps = epochs * len(records)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps, pct_start=0.05)
    order = random.Random(seed)
    losses = []
    for epoch in range(epochs):
        indices = list(range(len(records)))
        order.shuffle(indices)
        total = 0.0
        for i in indices:
            r = records[i]
            log_probs = draft(r["hidden"].unsqueeze(0), head)[0, r["start"] :]  # [T, V']
            restricted = token_index[r["top_ids"]]  # -1 where outside the head
            weights = torch.where(restricted >= 0, r["top_probs"], 0.0)
            picked = log_probs.gather(-1, restricted.clamp(min=0))
            loss = -(weights * picked).sum(-1).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            total += loss.item()
        losses.append(total / len(records))
        print(f"epoch {epoch + 1}/{epochs}: loss {losses[-1]:.4f}", flush=True)
    return losses


def save(draft: DraftHead, output_ids: list[int], out: Path, meta: dict) -> None:
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    tensors = {f"layer.{k}": v.detach().contiguous().clone() for k, v in draft.layer.state_dict().items()}
    tensors.update({f"norm.{k}": v.detach().contiguous().clone() for k, v in draft.norm.state_dict().items()})
    save_file(tensors, str(out / "draft_layer.safetensors"))
    (out / "output_token_ids.json").write_text(json.dumps(output_ids))
    (out / "draft.json").write_text(json.dumps(meta, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="assets/draft")
    parser.add_argument("--sequences", type=int, default=320)
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--init-layer", type=int, default=REUSED_LAYERS, help="target layer the new layer starts from")
    parser.add_argument("--samples-cache", help="reuse/save the sampled sequences here (a .pt file)")
    parser.add_argument("--reused-layers", type=int, default=REUSED_LAYERS, help="frozen target layers under the new one")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    started = time.time()
    from .models.hf import load_model

    loaded = load_model("default", device="cpu", dtype=torch.float32)
    target, tokenizer = loaded.model, loaded.tokenizer
    for p in target.parameters():
        p.requires_grad_(False)
    prompts = make_prompts(args.sequences, args.seed)
    cache = Path(args.samples_cache) if args.samples_cache else None
    if cache is not None and cache.is_file():
        sequences = torch.load(cache)
    else:
        sequences = sample_continuations(target, tokenizer, [p for _, p in prompts], args.seed)
        if cache is not None:
            torch.save(sequences, cache)
    print(f"sampled {sum(len(s) - n for s, n in sequences)} continuation tokens in {time.time() - started:.0f} s", flush=True)
    records = teacher_records(target, sequences, args.reused_layers)
    special = [t for t in {tokenizer.eos_token_id, tokenizer.bos_token_id} if t is not None]
    output_ids = choose_output_tokens(records, len(tokenizer), special)
    token_index = torch.full((len(tokenizer),), -1, dtype=torch.long)
    token_index[output_ids] = torch.arange(len(output_ids))
    coverage = sum((torch.where(token_index[r["top_ids"]] >= 0, r["top_probs"], 0.0)).sum().item() for r in records)
    coverage /= sum(r["top_probs"].shape[0] for r in records)
    print(f"teacher data ready after {time.time() - started:.0f} s; head covers {coverage:.3f} of the target's mass", flush=True)
    head = target.get_output_embeddings().weight[output_ids].detach()
    draft = DraftHead(target, args.init_layer, args.reused_layers)
    losses = train(draft, head, records, token_index, args.epochs, args.seed, args.lr)
    meta = {
        "base": "default", "reused_layers": args.reused_layers, "new_layers": 1, "output_tokens": OUTPUT_TOKENS,
        "init_layer": args.init_layer, "lr": args.lr,
        "sequences": len(records), "continuation_tokens": sum(r["top_ids"].shape[0] for r in records),
        "sample_temperature": SAMPLE_TEMPERATURE, "epochs": args.epochs, "seed": args.seed,
        "train_loss_per_epoch": losses, "head_mass_coverage": coverage,
        "train_seconds": round(time.time() - started), "torch": torch.__version__,
    }
    save(draft, output_ids, Path(args.out), meta)
    print(json.dumps(meta, indent=2))


if __name__ == "__main__":
    main()
