"""Hardware-free costs of a decoding loop: host reads per iteration and aten ops per token.

    python -m spectr_gbv.bench.counts [--methods ar sd spectr gbv spectr_gbv as_bv_handoff] [--drafts 2]
                                      [--lengths 4] [--tokens 32] [--detail] [--target default]

On a GPU every host read (a tensor's value brought to Python: `item`, `tolist`, `int`,
`float`, `bool`, `cpu`, `nonzero`, indexing a list with a tensor; and indexing a tensor with a
boolean mask, `masked_select` and `unique`, whose result's size must reach the host) waits for
the device to finish everything queued before it, and every aten op dispatched is a kernel
launch. Counting
both on the CPU therefore says how host-bound a loop is on any machine, without one: the
counts do not depend on the hardware, only on the code path and on the tokens drawn (which
the seed fixes).

Reads are counted with a `TorchFunctionMode` (it sees the Python-level Tensor methods), ops
with a `TorchDispatchMode` (it sees every aten op after autograd, as a backend would).

`--compiled` also counts the ops of the compiled target (torch.compile, `models.compiled`). A
dispatch mode cannot see inside a compiled graph, so both the eager and the compiled loop are
counted there by torch.profiler instead (`ProfiledOpCounter`): each top-level operator call
(an aten op, or a custom op such as the fp16-weight Linear) and each kernel inductor generated
(its kernel profiling switched on before the compile), which is what a compiled loop launches.
The same counter on the eager loop agrees with the dispatch mode to within a few percent, so
the two modes compare like for like.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# The Tensor methods that bring a value to the host. `__index__` is `int()` by another name
# (a tensor used as a list index); `numpy` shares memory on the CPU but syncs on a GPU.
HOST_READS = frozenset({
    torch.Tensor.item, torch.Tensor.tolist, torch.Tensor.__int__, torch.Tensor.__float__, torch.Tensor.__bool__,
    torch.Tensor.__index__, torch.Tensor.cpu, torch.Tensor.nonzero, torch.nonzero, torch.Tensor.numpy,
})


# Indexing a tensor with a boolean mask reads too: the result's size is the mask's count, which
# the host must know before it can allocate (a device sync on a GPU, though no value reaches Python).
# So do the functions whose result's size is data (`masked_select`, `unique`), by their names. Not
# seen: a mask inside a list index, and assigning through a mask (`x[mask] = t`, a sync on CUDA);
# the lean loop has neither (a dispatch-mode scan of its aten index ops found none).
MASK_INDEX = "mask_index"
# Indexing with a 0-dim integer tensor (`x[i]`, i a tensor) is `x[i.item()]`: the position is read
# first (aten's _local_scalar_dense, a sync on a GPU). Counted too, in reads and in assignments.
SCALAR_INDEX = "scalar_index"
DATA_SIZED = frozenset({
    torch.masked_select, torch.Tensor.masked_select, torch.unique, torch.Tensor.unique, torch.unique_consecutive,
    torch.Tensor.unique_consecutive,
})


def _index_read(func, args) -> str | None:
    """MASK_INDEX or SCALAR_INDEX where `x[index]` (or `x[index] = v`) reads the host, else None."""
    if func not in (torch.Tensor.__getitem__, torch.Tensor.__setitem__) or len(args) < 2:
        return None
    index = args[1] if isinstance(args[1], tuple) else (args[1],)
    tensors = [i for i in index if isinstance(i, torch.Tensor)]
    if func is torch.Tensor.__getitem__ and any(i.dtype == torch.bool for i in tensors):
        return MASK_INDEX
    if any(i.dim() == 0 and not i.dtype.is_floating_point and i.dtype != torch.bool for i in tensors):
        return SCALAR_INDEX
    return None


class HostReadCounter(TorchFunctionMode):
    """Counts host reads inside its `with` block, by method name (`by_name`; a boolean-mask
    index as MASK_INDEX, a 0-dim integer tensor index as SCALAR_INDEX)."""

    def __init__(self) -> None:
        super().__init__()
        self.by_name: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.by_name.values())

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func in HOST_READS or func in DATA_SIZED:
            self.by_name[func.__name__] += 1
        elif (kind := _index_read(func, args)) is not None:
            self.by_name[kind] += 1
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


class ProfiledOpCounter:
    """Counts the operator calls torch.profiler records inside its `with` block at top level:
    aten and custom ops not called from within another op, and inductor's generated kernels
    (recorded when `torch._inductor.config.cpp.enable_kernel_profile` was on at compile time;
    their names hold `cpp_fused`/`triton_`). What runs inside an op (aten::linear's mm) is the
    op's own business and is not counted again, as a dispatch mode would see the op once."""

    def __init__(self) -> None:
        from torch.profiler import ProfilerActivity, profile

        self._profile = profile(activities=[ProfilerActivity.CPU])
        self.by_op: Counter[str] = Counter()

    @property
    def total(self) -> int:
        return sum(self.by_op.values())

    @staticmethod
    def is_op(name: str) -> bool:
        return "::" in name or "cpp_fused" in name or "triton_" in name

    def __enter__(self) -> "ProfiledOpCounter":
        self._profile.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._profile.__exit__(*exc)
        for event in self._profile.events():
            if not self.is_op(event.name):
                continue
            parent = event.cpu_parent
            while parent is not None and not self.is_op(parent.name):
                parent = parent.cpu_parent
            if parent is None:
                self.by_op[event.name] += 1


def record_compiled_kernels() -> None:
    """Have inductor record each call of a kernel it generates as a profiler event, so that
    `ProfiledOpCounter` counts it. Set before the compile: it is read when the code is generated."""
    import torch._inductor.config as inductor_config

    inductor_config.cpp.enable_kernel_profile = True


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
    ops_by_name: dict[str, int] = field(default_factory=dict)

    @property
    def reads_per_iteration(self) -> float:
        return self.host_reads / max(self.iterations, 1)

    @property
    def ops_per_token(self) -> float:
        return self.aten_ops / max(self.tokens, 1)

    def as_dict(self) -> dict:
        return {**self.__dict__, "reads_per_iteration": self.reads_per_iteration, "ops_per_token": self.ops_per_token}


def count_loop(target, draft, prompt_ids, method: str, num_drafts: int, draft_length: int, temperature: float,
               max_new_tokens: int, seed: int = 0, detail: bool = False, profiled: bool = False) -> LoopCounts:
    """Decode once, counting the loop's host reads and aten ops.

    The session start (prefill, and the feature draft's first features) is left out: it runs
    once per request, not per iteration. What is counted is every iteration and its commit
    (plain decoding's first iteration is its prefill). `profiled`: ops counted by
    `ProfiledOpCounter`, which sees into a compiled target, instead of the dispatch mode."""
    from ..config import DecodeConfig
    from ..engine import DecodeRun, run_iterations, run_lean

    config = DecodeConfig(method=method, num_drafts=num_drafts, draft_length=draft_length, temperature=temperature,
                          max_new_tokens=max_new_tokens, seed=seed, with_theory=False)
    run = DecodeRun(target, draft, prompt_ids, config)
    loop = run_iterations(run) if detail else run_lean(run)
    reads, ops = HostReadCounter(), (ProfiledOpCounter() if profiled else OpCounter())
    iterations = tokens = 0
    with reads, ops:
        for step in loop:
            iterations += 1
            tokens += len(step.emitted)
    return LoopCounts(method, num_drafts, draft_length, detail, iterations, tokens, reads.total, ops.total,
                      dict(reads.by_name), dict(ops.by_op))


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
    parser.add_argument("--compiled", action="store_true",
                        help="also count ops per token of the compiled target, eager and compiled alike by torch.profiler")
    parser.add_argument("--json")
    parser.add_argument("--markdown", help="write the table (with its command) here too")
    parser.add_argument("--results", help="write it as RESULTS/cpu_<class>/<kernel>/counts.md (ops_compiled.md with "
                                          "--compiled), beside the bench's files for this CPU and kernel")
    args = parser.parse_args()
    from .. import load_pair
    from ..models.hf import chat_prompt_ids
    from ..prompt_sets import bench_prompts

    target, draft, tokenizer = load_pair(args.target, args.draft, compile=False)
    ids = chat_prompt_ids(tokenizer, next(iter(bench_prompts().values())))

    def counted(**kwargs) -> list[dict]:
        return [count_loop(target, draft, ids, m, args.drafts, args.lengths, args.temperature, args.tokens,
                           detail=args.detail, **kwargs).as_dict() for m in args.methods]

    rows = counted()
    text = markdown(rows)
    if args.compiled:
        text += "\n\n" + compiled_markdown(rows, *compiled_counts(target, draft, args.drafts * args.lengths, counted))
    command = "python -m spectr_gbv.bench.counts " + " ".join(sys.argv[1:])
    print(text)
    if args.results and not args.markdown:
        from .__main__ import results_folder_for

        folder = results_folder_for(args.results, target)  # as the bench names it
        args.markdown = str(folder / ("ops_compiled.md" if args.compiled else "counts.md"))
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        print(f"-> {args.markdown}")
        Path(args.markdown).write_text(f"{target.name}; {args.tokens} tokens at T = {args.temperature}, seed 0, "
                                       f"the first bench prompt. Command: `{command}`.\n\n{text}\n")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


def compiled_counts(target, draft, most_drafted: int, counted) -> tuple[list[dict], list[dict], str]:
    """(eager rows, compiled rows, the target's mode after the compile), both counted by the
    profiler: the eager loop first, then the target compiled with inductor's kernel profiling on
    (its step and every scoring bucket the trees can need, before counting, as the bench does)."""
    from ..models import compiled
    from .__main__ import compile_buckets

    eager = counted(profiled=True)
    record_compiled_kernels()
    layers = tuple(getattr(draft, "feature_layers", ()))
    mode = compiled.attach(target).compile_now(scoring_layers=layers)
    if mode == compiled.COMPILED:
        compile_buckets(target, draft, most_drafted)
    counted(profiled=True)  # a compiled function's first calls set up its caches and guards: not steady state
    return eager, counted(profiled=True), mode


def compiled_markdown(rows: list[dict], eager: list[dict], compiled_rows: list[dict], mode: str) -> str:
    """Ops per token: the dispatch mode's eager count, the profiler's eager and compiled counts."""
    lines = [f"Ops per token, counted by torch.profiler (top-level operator calls and inductor's kernels); the "
             f"target {mode} in the last column.", "",
             "| method | K | L | eager (dispatch mode) | eager (profiler) | compiled (profiler) | compiled / eager |",
             "|---|---|---|---|---|---|---|"]
    for r, e, c in zip(rows, eager, compiled_rows):
        lines.append(f"| {r['method']} | {r['num_drafts']} | {r['draft_length']} | {r['ops_per_token']:.0f} | "
                     f"{e['ops_per_token']:.0f} | {c['ops_per_token']:.0f} | {c['ops_per_token'] / e['ops_per_token']:.2f} |")
    return "\n".join(lines)


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
