"""Distil a small draft for the offline default target (SmolLM2-135M-Instruct).

    python -m spectr_gbv.training.distill [--out assets/draft] [--samples-cache PREFIX] [--seed 0]

(the defaults are the shipped draft's recipe). Kangaroo / LayerSkip-style
self-distillation, from the installed packages only:

1. prompts: written by the templates below (code, math, story, instructions), in
   `--rounds` rounds of `--sequences` prompts, round r seeded with seed + r;
2. data: the target's own continuations of those prompts (sampled, T = 0.8), with the
   target's next-token distribution at every continuation position (its top 64, taken from
   the very forwards that sampled the tokens) and the hidden state after its first
   `--reused-layers` layers; the last `--validation` sequences are held out of training;
3. draft: those first layers (frozen, shared with the target), `--new-layers` new decoder
   layers (initialised from the target's layers right after the reused ones, so training
   starts from the target cut short) and a new final norm, trained to
   minimise the cross-entropy to the target's distribution (KL up to a constant), and the
   target's tied output head restricted to the OUTPUT_TOKENS tokens with the most target
   mass (FR-Spec-style): the draft's distribution is still a proper distribution over the
   full vocabulary, with zero mass on the other tokens;
4. output: the new layers and norm as safetensors, the restricted token ids, and a JSON
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

from ..prompt_sets import bench_prompts, held_out_prompts

REUSED_LAYERS = 5
NEW_LAYERS = 2
ROUNDS = 2  # sampling rounds of SEQUENCES prompts each: the draft is data-limited, so more is better
SEQUENCES = 2048  # prompts per round
OUTPUT_TOKENS = 8192
TEACHER_TOP = 64
SAMPLE_TEMPERATURE = 0.8
CONTINUATION_TOKENS = 96

# ------------------------------------------------------------------------------- prompts
# Word lists and templates the project wrote. They combine into thousands of distinct
# prompts of the app's kinds (code, math, story, instructions), with a little news text and
# non-English math so the draft also sees the paper suite's families. None of the held-out
# prompts below, nor any prompt of assets/prompts/paper_suite.json, can be produced (tested).

LANGUAGES = ["Python", "Python", "Python", "JavaScript", "C", "Java", "Rust", "Go", "TypeScript", "C++"]
CODE_TASKS = [
    "reverses a string", "checks whether a number is prime", "returns the factorial of n", "merges two sorted lists",
    "counts the vowels in a sentence", "finds the largest element of a list", "removes duplicates from a list",
    "computes the greatest common divisor of two numbers", "converts Celsius to Fahrenheit", "flattens a nested list",
    "checks whether a word is a palindrome", "sums the digits of an integer", "returns the n-th Fibonacci number",
    "sorts a list of dictionaries by a key", "reads a text file and counts its lines", "computes the mean of a list",
    "counts how often each word appears in a text", "checks whether two strings are anagrams", "finds the median of a list",
    "converts a decimal number to binary", "returns the second smallest number in a list", "capitalises every word",
    "checks whether a year is a leap year", "computes the power of a number without using the built-in operator",
    "splits a list into chunks of a given size", "finds the longest word in a sentence", "rotates an array by k places",
    "validates an email address with a simple rule", "returns the intersection of two lists", "squares every number",
    "computes the area of a circle from its radius", "counts the words in a string", "converts minutes to hours and minutes",
    "finds all prime numbers below n", "returns the index of an item or -1", "removes whitespace from both ends of a string",
    "checks whether a list is sorted", "generates a random password", "computes a running total of a list",
    "finds the most common character in a string", "converts a string to title case", "sums all odd numbers up to n",
    "multiplies two matrices", "parses a date string", "checks whether a string contains only digits",
]
CODE_THINGS = [
    "a to-do list", "a stack", "a queue", "a shopping cart", "a student with a list of grades", "a library book",
    "a countdown timer", "a point in two dimensions", "a deck of playing cards", "an inventory of items", "a rectangle",
    "a simple calculator", "a temperature sensor reading", "a contact in an address book", "a playlist of songs",
]
CODE_CONCEPTS = [
    "a for loop", "recursion", "a dictionary", "a list comprehension", "exception handling", "a class and an object",
    "a lambda function", "string formatting", "reading a file", "a while loop", "sorting with a key function",
    "default arguments", "a generator", "a set", "unit testing",
]
CODE_FORMS = [
    "Write a {lang} function that {task}.", "Write a {lang} function that {task}, with comments.",
    "How do I write {lang} code that {task}?", "Implement a function in {lang} that {task} and show an example call.",
    "Write a short {lang} program that {task}.", "Write a {lang} class that represents {thing}.",
    "Explain {concept} in {lang} with a small example.", "Show me how to use {concept} in {lang}.",
    "Write a {lang} function that {task}, then explain how it works.",
]

STORY_SUBJECTS = [
    "a lighthouse keeper", "a robot who learns to paint", "a lost kitten", "two friends on a mountain",
    "a baker in a small town", "a child who finds a map", "an old sailor", "a dragon who is afraid of fire",
    "a girl who talks to trees", "a detective in the rain", "a farmer and a storm", "a musician on a train",
    "a fox who wants to be a chef", "a boy who builds a kite", "a tired astronaut", "a talking umbrella",
    "a grandmother and her garden", "a shy giant", "a postman with a secret", "a snail in a race", "an owl who cannot sleep",
    "a painter who loses her colours", "a knight who hates swords", "a cat who runs a bookshop", "a little cloud",
    "a mouse in a museum", "a teacher on her last day", "a bear who opens a café", "a pirate who is seasick",
    "a river that changes its course", "an inventor and her broken machine", "a dog waiting at a station",
]
STORY_PLACES = [
    "", "", " in a snowy village", " on the moon", " under the sea", " in a big city", " in a quiet forest",
    " on a small island", " in the desert", " in a castle", " on a farm", " in the future",
]
STORY_FORMS = [
    "Tell a short story about {}.", "Write a bedtime story about {}.", "Write a short poem about {}.",
    "Write the opening paragraph of a novel about {}.", "Write a funny story about {}.", "Write a fable about {}.",
    "Describe a day in the life of {}.", "Write a story for children about {}.",
]
NEWS_OPENINGS = [
    "The town opened a new public swimming pool this week, and", "A storm knocked out power to thousands of homes",
    "The university announced a new scholarship programme that", "Local shops reported a busy holiday season as",
    "A team of researchers has found that", "The river burst its banks on Monday after",
    "Ticket prices for the concert sold out within hours when", "The hospital opened a new children's ward that",
]

INSTRUCTION_TOPICS = [
    "learning a new language", "staying focused while studying", "saving money", "sleeping better", "writing a good email",
    "preparing for a job interview", "starting to run", "keeping plants alive", "cooking rice", "reducing stress",
    "organising a small party", "learning to play the guitar", "making new friends", "public speaking", "eating healthier",
    "taking better photos", "keeping a clean kitchen", "planning a trip", "learning to swim", "drawing faces",
    "working from home", "remembering names", "training a puppy", "writing a cover letter", "learning to code",
    "reading more books", "staying hydrated", "painting a room", "growing tomatoes", "managing time at work",
]
INSTRUCTION_FORMS = [
    "Give three tips for {}.", "Explain how to get better at {}.", "What are common mistakes in {}?",
    "Give me a step-by-step plan for {}.", "What should a beginner know about {}?", "List five ideas for {}.",
]
CONCEPTS = [
    "gravity", "the water cycle", "how vaccines work", "inflation", "electricity", "the seasons", "volcanoes",
    "how airplanes fly", "the internet", "recycling", "the immune system", "earthquakes", "how a compass works",
    "compound interest", "evolution", "the moon's phases", "democracy", "how bread rises", "solar power", "tides",
]
CONCEPT_FORMS = ["Explain {} in simple terms.", "What is {}? Answer briefly.", "Explain {} to a child.",
                 "Why is {} important?"]
COUNTRIES = ["France", "Japan", "Brazil", "Kenya", "Canada", "India", "Italy", "Mexico", "Egypt", "Norway", "Peru",
             "Vietnam", "Spain", "Australia", "Ghana", "Chile", "Greece", "Turkey", "Poland", "Thailand"]
COUNTRY_FORMS = ["What is the capital of {}?", "Describe the climate of {}.", "Name two famous foods from {}.",
                 "Give three tips for visiting {}.", "Tell me three facts about {}."]
WRITING_TASKS = [
    "Write a short thank-you message to a neighbour.", "Write a polite complaint about a late delivery.",
    "Write a birthday message for a colleague.", "Write an invitation to a picnic.", "Write a product description for a water bottle.",
    "Write a short speech for a school prize day.", "Write a note asking a friend to water my plants.",
    "Write a slogan for a bicycle shop.",
]

NAMES = ["Tom", "Lucy", "Omar", "Mia", "Ravi", "Ella", "Ken", "Zoe", "Ali", "Nina"]
ITEMS = ["pens", "apples", "books", "tickets", "cups", "oranges", "stickers", "cookies", "bottles", "plates"]


def math_prompt(rng: random.Random) -> str:
    a, b, c = rng.randint(2, 20), rng.randint(2, 12), rng.randint(5, 99)
    d, e = rng.randint(10, 90), rng.choice([10, 20, 25, 30, 40, 50])
    name, item = rng.choice(NAMES), rng.choice(ITEMS)
    forms = [
        f"A shop sells {item} at {a} dollars each. How much do {b} {item} cost? Explain step by step.",
        f"{name} has {c} marbles and gives {b} to each of {a % 5 + 2} friends. How many are left?",
        f"What is {a} times {b} plus {c}? Show your work.",
        f"A train travels {c} km in {b} hours. What is its average speed?",
        f"{name} buys {b} {item} for {a * b} dollars. What does one cost?",
        f"A jacket costs {d} dollars and is {e}% off. What is the new price?",
        f"Solve for x: {a}x + {c} = {a * b + c}.",
        f"What is {e}% of {d * 4}? Explain.",
        f"A square has sides of {b} cm. What are its area and perimeter?",
        f"A circle has a radius of {b} cm. What is its area?",
        f"{name} is {a} years old and her brother is {b} years older. How old will he be in {c % 10 + 2} years?",
        f"There are {c} {item} shared equally among {b} children. How many does each child get, and how many are left?",
        f"A recipe uses {b} eggs for {a} pancakes. How many eggs are needed for {a * 3} pancakes?",
        f"What is the mean of {a}, {b}, {c} and {d}?",
        f"A car uses {b} litres of fuel per 100 km. How much fuel does it need for {c * 10} km?",
        f"Convert {c * 10} minutes into hours and minutes.",
        f"Responde paso a paso: {name} tiene {c} caramelos y come {b}. ¿Cuántos le quedan?",
        f"Réponds étape par étape : un cahier coûte {a} euros. Combien coûtent {b} cahiers ?",
        f"Antworte Schritt für Schritt: Ein Bus fährt {c} km in {b} Stunden. Wie schnell fährt er?",
    ]
    return rng.choice(forms)


def code_prompt(rng: random.Random) -> str:
    form = rng.choice(CODE_FORMS)
    return form.format(lang=rng.choice(LANGUAGES), task=rng.choice(CODE_TASKS), thing=rng.choice(CODE_THINGS),
                       concept=rng.choice(CODE_CONCEPTS))


def story_prompt(rng: random.Random) -> str:
    if rng.random() < 0.15:
        return "Continue this news report: " + rng.choice(NEWS_OPENINGS)
    return rng.choice(STORY_FORMS).format(rng.choice(STORY_SUBJECTS) + rng.choice(STORY_PLACES))


def instruction_prompt(rng: random.Random) -> str:
    roll = rng.random()
    if roll < 0.45:
        return rng.choice(INSTRUCTION_FORMS).format(rng.choice(INSTRUCTION_TOPICS))
    if roll < 0.7:
        return rng.choice(CONCEPT_FORMS).format(rng.choice(CONCEPTS))
    if roll < 0.9:
        return rng.choice(COUNTRY_FORMS).format(rng.choice(COUNTRIES))
    return rng.choice(WRITING_TASKS)


def make_prompts(count: int, seed: int) -> list[tuple[str, str]]:
    """(kind, prompt) pairs, cycling through the four kinds; deterministic in `seed`."""
    rng = random.Random(seed)
    makers = {"code": code_prompt, "math": math_prompt, "story": story_prompt, "instructions": instruction_prompt}
    kinds = list(makers)
    return [(kinds[i % 4], makers[kinds[i % 4]](rng)) for i in range(count)]


# The measured prompts (bench.draft's held-out prompts and make bench's), never trained on.
HELD_OUT_TEXTS = {text for _, text in held_out_prompts()} | set(bench_prompts().values())


def drop_held_out(prompts: list[tuple[str, str]], samples: list[dict]) -> list[dict]:
    """The samples whose prompt is none of the measured prompts. The templates can write one
    of them by chance (round 1 writes the leap-year prompt); dropping it after sampling keeps
    every other sample, and the random stream, as they were."""
    return [s for (_, text), s in zip(prompts, samples, strict=True) if text not in HELD_OUT_TEXTS]


# ------------------------------------------------------------------------------- data


def sample_continuations(target, tokenizer, prompts: list[str], seed: int, batch: int = 64) -> list[dict]:
    """Per prompt: the target's own sampled continuation and, at every continuation position,
    the target's next-token distribution (T = 1) as its TEACHER_TOP most likely tokens.

    The distributions come from the same forwards that sampled the tokens (generate's raw
    logits), so the data costs one pass of the target. Batches of 64 keep the 2-core CPU
    busy: larger batches gave no more tokens per second.
    """
    from ..models.hf import chat_prompt_ids

    torch.manual_seed(seed)  # transformers samples from the global generator
    encoded = [chat_prompt_ids(tokenizer, p) for p in prompts]
    pad = tokenizer.eos_token_id
    out: list[dict] = []
    for start in range(0, len(encoded), batch):
        group = encoded[start : start + batch]
        width = max(len(ids) for ids in group)
        ids = torch.tensor([[pad] * (width - len(x)) + x for x in group])  # left padding
        mask = torch.tensor([[0] * (width - len(x)) + [1] * len(x) for x in group])
        with torch.inference_mode():
            generated = target.generate(
                ids, attention_mask=mask, do_sample=True, temperature=SAMPLE_TEMPERATURE, top_k=None, top_p=None,
                max_new_tokens=CONTINUATION_TOKENS, pad_token_id=pad, return_dict_in_generate=True, output_logits=True,
            )
            k = min(TEACHER_TOP, generated.logits[0].shape[-1])
            top = [torch.topk(torch.softmax(step.float(), -1), k, dim=-1) for step in generated.logits]
        top_ids = torch.stack([t.indices for t in top], 1)  # [B, steps, TEACHER_TOP]
        top_probs = torch.stack([t.values for t in top], 1)
        for row, (x, continuation) in enumerate(zip(group, generated.sequences[:, width:].tolist())):
            if pad in continuation:
                continuation = continuation[: continuation.index(pad) + 1]  # keep the EOS, drop the padding
            n = len(continuation)
            out.append({"ids": x + continuation, "prompt_length": len(x),
                        "top_ids": top_ids[row, :n].clone(), "top_probs": top_probs[row, :n].clone()})
        print(f"sampled {len(out)}/{len(encoded)} sequences", flush=True)
    return out


class _StopForward(Exception):
    """Raised by a hook to end a forward once the layers the draft reuses have run."""


def reused_hidden_states(target, ids: list[int], reused: int) -> torch.Tensor:
    """[S, H]: the input of target layer `reused` (the output of the layers the draft reuses),
    computed by running only those layers."""
    captured = {}

    def capture(module, args, kwargs):
        captured["hidden"] = (args[0] if args else kwargs["hidden_states"])[0].clone()
        raise _StopForward

    handle = target.model.layers[reused].register_forward_pre_hook(capture, with_kwargs=True)
    try:
        with torch.inference_mode():
            target(torch.tensor([ids]))
    except _StopForward:
        pass
    finally:
        handle.remove()
    return captured["hidden"]


def teacher_records(target, samples: list[dict], reused: int = REUSED_LAYERS) -> list[dict]:
    """Per sample: the draft's input (hidden states after the reused layers) and the target's
    top-k next-token distributions at the positions that predict continuation tokens."""
    records = []
    for s in samples:
        if len(s["ids"]) - s["prompt_length"] < 2:
            continue
        records.append({
            "hidden": reused_hidden_states(target, s["ids"][:-1], reused),  # [S - 1, H]
            "start": s["prompt_length"] - 1,  # position whose next token is the first continuation token
            "top_ids": s["top_ids"],
            "top_probs": s["top_probs"],
        })
    return records


def choose_output_tokens(records: list[dict], vocab: int, always: list[int], size: int = OUTPUT_TOKENS) -> list[int]:
    """The `size` tokens carrying the most target probability over the data (and every one of `always`)."""
    mass = torch.zeros(vocab, dtype=torch.float64)
    for r in records:
        mass.index_add_(0, r["top_ids"].reshape(-1), r["top_probs"].reshape(-1).double())
    mass[always] = float("inf")
    return sorted(torch.topk(mass, size).indices.tolist())


# ------------------------------------------------------------------------------- draft


class DraftHead(torch.nn.Module):
    """The trained part: `new_layers` decoder layers and a final norm, over frozen reused layers.

    The new layers start as copies of the target's layers ending at `init_layer`; by default
    the ones right after the reused layers, so the untrained draft is the target cut short.
    (Copies of the target's last layers, whose output suits the final norm, did worse: on
    half the data and 4 epochs, alpha at T = 0.7 on the validation sequences was 0.432 against 0.459.)"""

    def __init__(self, target, init_layer: int | None = None, reused: int = REUSED_LAYERS, new_layers: int = NEW_LAYERS):
        super().__init__()
        import copy

        inner = target.model
        first = reused if init_layer is None else init_layer - new_layers + 1
        self.init_layer = first + new_layers - 1  # the target layer the last new layer was copied from
        self.layers = torch.nn.ModuleList(copy.deepcopy(inner.layers[first + j]) for j in range(new_layers))
        for j, layer in enumerate(self.layers):
            layer.self_attn.layer_idx = reused + j  # its place in the assembled draft
        self.norm = copy.deepcopy(inner.norm)
        for parameter in [*self.layers.parameters(), *self.norm.parameters()]:
            parameter.requires_grad_(True)  # copies of frozen target weights: these are trained
        self.rotary = inner.rotary_emb

    def forward(self, hidden: torch.Tensor, head: torch.Tensor, start: int = 0) -> torch.Tensor:
        """hidden [1, S, H] after the reused layers -> log-probs over the restricted head at
        positions start.. [1, S - start, V'] (the head is the costliest part: skip what is not scored)."""
        length = hidden.shape[1]
        positions = torch.arange(length).unsqueeze(0)
        causal = torch.full((length, length), float("-inf")).triu(1)[None, None]
        rotary = self.rotary(hidden, positions)
        for layer in self.layers:
            hidden = layer(hidden, attention_mask=causal, position_ids=positions, position_embeddings=rotary)
            hidden = hidden[0] if isinstance(hidden, tuple) else hidden
        return torch.log_softmax(self.norm(hidden[:, start:]) @ head.T, dim=-1)


def record_loss(draft: DraftHead, head: torch.Tensor, record: dict, token_index: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of the draft to the target's (top-k, restricted) distribution, per token."""
    log_probs = draft(record["hidden"].unsqueeze(0), head, record["start"])[0]  # [T, V']
    restricted = token_index[record["top_ids"]]  # -1 where outside the head
    weights = torch.where(restricted >= 0, record["top_probs"], 0.0)
    picked = log_probs.gather(-1, restricted.clamp(min=0))
    return -(weights * picked).sum(-1).mean()


def train(draft: DraftHead, head: torch.Tensor, records: list[dict], token_index: torch.Tensor, epochs: int, seed: int,
          lr: float, validation: list[dict] = ()) -> tuple[list[float], list[float]]:
    """AdamW on `records`; returns the mean training and validation loss per epoch. The
    validation records are never trained on: they show whether the draft generalises."""
    torch.manual_seed(seed)
    optimizer = torch.optim.AdamW([p for p in draft.parameters() if p.requires_grad], lr=lr, weight_decay=0.0)
    steps = epochs * len(records)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps, pct_start=0.05)
    order = random.Random(seed)
    losses, validation_losses = [], []
    for epoch in range(epochs):
        indices = list(range(len(records)))
        order.shuffle(indices)
        total = 0.0
        for i in indices:
            loss = record_loss(draft, head, records[i], token_index)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            total += loss.item()
        losses.append(total / len(records))
        with torch.no_grad():
            validation_losses.append(
                sum(record_loss(draft, head, r, token_index).item() for r in validation) / max(len(validation), 1))
        print(f"epoch {epoch + 1}/{epochs}: loss {losses[-1]:.4f}, validation loss {validation_losses[-1]:.4f}",
              flush=True)
    return losses, validation_losses


def save(draft: DraftHead, output_ids: list[int], out: Path, meta: dict, dtype: torch.dtype = torch.float32) -> None:
    """The new layers as `layers.J.*` and the norm as `norm.*` (safetensors, `dtype`), the
    restricted token ids and the run record; models.hf.default_draft_dir() reads them."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    tensors = {f"layers.{k}": v.detach().to(dtype).contiguous().clone() for k, v in draft.layers.state_dict().items()}
    tensors.update({f"norm.{k}": v.detach().to(dtype).contiguous().clone() for k, v in draft.norm.state_dict().items()})
    save_file(tensors, str(out / "draft_layer.safetensors"))
    (out / "output_token_ids.json").write_text(json.dumps(output_ids))
    (out / "draft.json").write_text(json.dumps(meta, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="assets/draft")
    parser.add_argument("--sequences", type=int, default=SEQUENCES, help="prompts sampled per round")
    parser.add_argument("--rounds", type=int, default=ROUNDS,
                        help="sampling rounds, each with its own prompts and seed (the last --validation sequences are held out)")
    parser.add_argument("--validation", type=int, default=64, help="sampled sequences kept out of training")
    parser.add_argument("--epochs", type=int, default=6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--init-layer", type=int,
                        help="target layer the last new layer starts from (default: the layers right after the reused ones)")
    parser.add_argument("--samples-cache", help="reuse/save each round's sampled data as PREFIX.roundR.pt")
    parser.add_argument("--reused-layers", type=int, default=REUSED_LAYERS, help="frozen target layers under the new ones")
    parser.add_argument("--new-layers", type=int, default=NEW_LAYERS, help="trained decoder layers on top of the reused ones")
    parser.add_argument("--float32", action="store_true",
                        help="store the trained weights in float32 (two layers then exceed the 25 MB the repository allows)")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    started = time.time()
    from ..models.hf import load_model

    loaded = load_model("default", device="cpu", dtype=torch.float32)
    target, tokenizer = loaded.model, loaded.tokenizer
    for p in target.parameters():
        p.requires_grad_(False)
    samples = []
    for round_ in range(args.rounds):  # round r: its own prompts and sampling, seeded with seed + r
        cache = Path(f"{args.samples_cache}.round{round_}.pt") if args.samples_cache else None
        prompts = make_prompts(args.sequences, args.seed + round_)
        if cache is not None and cache.is_file():
            sampled = torch.load(cache)
        else:
            sampled = sample_continuations(target, tokenizer, [p for _, p in prompts], args.seed + round_)
            if cache is not None:
                torch.save(sampled, cache)
        samples += drop_held_out(prompts, sampled)
    sampled_tokens = sum(len(s["ids"]) - s["prompt_length"] for s in samples)
    print(f"sampled {sampled_tokens} continuation tokens in {time.time() - started:.0f} s", flush=True)
    records = teacher_records(target, samples, args.reused_layers)
    records, validation = records[: len(records) - args.validation], records[len(records) - args.validation :]
    special = [t for t in {tokenizer.eos_token_id, tokenizer.bos_token_id} if t is not None]
    output_ids = choose_output_tokens(records, len(tokenizer), special)
    token_index = torch.full((len(tokenizer),), -1, dtype=torch.long)
    token_index[output_ids] = torch.arange(len(output_ids))
    coverage = sum((torch.where(token_index[r["top_ids"]] >= 0, r["top_probs"], 0.0)).sum().item() for r in records)
    coverage /= sum(r["top_probs"].shape[0] for r in records)
    print(f"teacher data ready after {time.time() - started:.0f} s; head covers {coverage:.3f} of the target's mass", flush=True)
    head = target.get_output_embeddings().weight[output_ids].detach()
    draft = DraftHead(target, args.init_layer, args.reused_layers, args.new_layers)
    losses, validation_losses = train(draft, head, records, token_index, args.epochs, args.seed, args.lr, validation)
    meta = {
        "base": "default", "reused_layers": args.reused_layers, "new_layers": args.new_layers, "output_tokens": OUTPUT_TOKENS,
        "init_layer": draft.init_layer, "lr": args.lr,
        "rounds": args.rounds, "sequences": len(records), "continuation_tokens": sum(r["top_ids"].shape[0] for r in records),
        "validation_sequences": len(validation), "sample_temperature": SAMPLE_TEMPERATURE, "epochs": args.epochs,
        "seed": args.seed, "train_loss_per_epoch": losses, "validation_loss_per_epoch": validation_losses,
        "head_mass_coverage": coverage, "train_seconds": round(time.time() - started), "torch": torch.__version__,
        "stored_dtype": "float32" if args.float32 else "float16",
    }
    save(draft, output_ids, Path(args.out), meta, torch.float32 if args.float32 else torch.float16)
    print(json.dumps(meta, indent=2))


if __name__ == "__main__":
    main()
