"""Hardware-free costs of a decoding loop: host reads per iteration and aten ops per token.

    python -m spectr_gbv.bench.counts [--methods ar sd spectr gbv spectr_gbv as_bv_handoff] [--drafts 2]
                                      [--lengths 4] [--tokens 32] [--detail] [--target default]

On a GPU every host read (a tensor's value brought to Python: `item`, `tolist`, `int`,
`float`, `bool`, `cpu`, `nonzero`, indexing a list with a tensor) waits for the device to
finish everything queued before it, and every aten op dispatched is a kernel launch. Counting
both on the CPU therefore says how host-bound a loop is on any machine, without one: the
counts do not depend on the hardware, only on the code path and on the tokens drawn (which
the seed fixes).

Reads are counted with a `TorchFunctionMode` (it sees the Python-level Tensor methods), ops
with a `TorchDispatchMode` (it sees every aten op after autograd, as a backend would).
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# The Tensor methods that bring a value to the host. `__index__` is `int()` by another name
# (a tensor used as a list index); `numpy` shares memory on the CPU but syncs on a GPU.
HOST_READS = frozenset({
    torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__int__, torch.Tensor.__float__, torch.Tensor.__bool__,
    torch.Tensor.__index__, torch.Tensor.cpu, torch.Tensor.nonzero, torch.nonzero, torch.Tensor.numpy,
})


class HostReadCounter(TorchFunctionMode):
    """Counts host reads inside its `with` block, by method name (`by_name`)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_name: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.by_name.values())

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in HOST_READS:
            self.by_name[func.__name__] += 1
        return func(*args, **(kwargs or {}))


class OpCounter(TorchDispatchMode):
    """Counts aten ops dispatched inside its `with` block (each one a kernel launch on a GPU)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_op: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.by_op.values())

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.by_op[str(func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))


@dataclass
class LoopCounts:
    """One run's counts, and what they are per iteration and per token."""

    method: str
    num_drafts: int
    draft_length: int
    detail: bool
    iterations: int
    tokens: int
    host_reads: int
    aten_ops: int
    reads_by_name: dict[str, int] = field(default_factory=dict)

    @property
    def reads_per_iteration(self) -> float:
        return self.host_reads / max(self.iterations, 1)

    @property
    def ops_per_token(self) -> float:
        return self.aten_ops / max(self.tokens, 1)

    def as_dict(self) -> dict:
        return {**self.__dict__, "reads_per_iteration": self.reads_per_iteration, "ops_per_token": self.ops_per_token}


def count_loop(target, draft, prompt_ids, method: str, num_drafts: int, draft_length: int, temperature: float,
               max_new_tokens: int, seed: int = 0, detail: bool = False) -> LoopCounts:
    """Decode once, counting the loop's host reads and aten ops.

    The session start (prefill, and the feature draft's first features) is left out: it runs
    once per request, not per iteration. What is counted is every iteration and its commit."""
    from ..config import DecodeConfig
    from ..engine import DecodeRun, run_iterations, run_lean

    config = DecodeConfig(method=method, num_drafts=num_drafts, draft_length=draft_length, temperature=temperature,
                          max_new_tokens=max_new_tokens, seed=seed, with_theory=False)
    run = DecodeRun(target, draft, prompt_ids, config)
    loop = run_iterations(run) if detail else run_lean(run)
    reads, ops = HostReadCounter(), OpCounter()
    iterations = tokens = 0
    with reads, ops:
        for step in loop:
            iterations += 1
            tokens += len(step.emitted)
    return LoopCounts(method, num_drafts, draft_length, detail, iterations, tokens, reads.total, ops.total,
                      dict(reads.by_name))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", default="default")
    parser.add_argument("--draft", default=None)
    parser.add_argument("--methods", nargs="+", default=["ar", "sd", "spectr", "gbv", "spectr_gbv", "as_bv_handoff"])
    parser.add_argument("--drafts", type=int, default=2)
    parser.add_argument("--lengths", type=int, default=4)
    parser.add_argument("--temperature", type=float, default=0.7)
    parser.add_argument("--tokens", type=int, default=32)
    parser.add_argument("--detail", action="store_true", help="count the detailed loop (the app's), not the lean one")
    parser.add_argument("--json")
    args = parser.parse_args()
    from .. import load_pair
    from ..models.hf import chat_prompt_ids
    from ..prompt_sets import bench_prompts

    target, draft, tokenizer = load_pair(args.target, args.draft)
    ids = chat_prompt_ids(tokenizer, next(iter(bench_prompts().values())))
    rows = [count_loop(target, draft, ids, m, args.drafts, args.lengths, args.temperature, args.tokens,
                       detail=args.detail).as_dict() for m in args.methods]
    print(markdown(rows))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


def markdown(rows: list[dict]) -> str:
    lines = ["| method | K | L | loop | iterations | host reads / iteration | aten ops / token | reads by kind |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(r["reads_by_name"].items()))
        lines.append(f"| {r['method']} | {r['num_drafts']} | {r['draft_length']} | {'detail' if r['detail'] else 'lean'} "
                     f"| {r['iterations']} | {r['reads_per_iteration']:.1f} | {r['ops_per_token']:.0f} | {kinds} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
