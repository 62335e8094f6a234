"""The default target's CPU kernel, chosen per machine by measurement.

Speculation pays when scoring L + 1 positions costs little more than one decoding step, and
how much more depends on the CPU's matrix kernels (issue "A draft that is accepted"):

| CPU | fp32 (MKL) | fp16 weights (fbgemm) | bf16 |
|---|---|---|---|
| AVX512-BF16 / AMX | about 1.8 steps for 5 positions | | about 1.1 (oneDNN, native) |
| AVX2 only | 2.21 | 1.83 (and a one-token step 1.6x faster) | emulated: several times slower |

So on first load a short probe times, for every candidate this CPU supports, a one-token
step, a PROBE_POSITIONS-position scoring forward (the yardstick the page quotes) and the
ITERATION_POSITIONS-position forward of the app's default iteration, over a PROBE_CONTEXT-token
KV cache, and picks the candidate with the most predicted speculative tokens per second at the
app's default (the theory of `spectr_gbv.theory` at its draft length, with the draft's measured
acceptance and step cost). A kernel can win for speculation and lose for plain decoding (on
this project's AVX512-BF16 EPYC, packed bf16 scores 9 positions in about 1.15 one-token steps
but its step is slower than fp16 weights'); `make bench` then also times plain decoding in the
kernel with the fastest step. The choice is cached per CPU model, flags, torch version and
thread count.
`$SPECTR_GBV_CPU_KERNEL` (float32, fp16-weights, bfloat16, int4) overrides it, and so does the older
`$SPECTR_GBV_CPU_DTYPE`.

Exactness does not depend on the choice: AR and every method decode with the same target (the
model as converted), so "the target's distribution" is that model's, for all of them alike.
Candidates:
* `float32`: the model as loaded;
* `fp16-weights`: every Linear, the output head included, swapped for fbgemm's fp16-weight
  Linear (`Fp16WeightLinear`: the kernel of torch.ao's dynamic fp16 Linear, weights stored in
  fp16, products in fp32, in a form torch.compile traces). The embedding stays an fp32 lookup table. The head is a third
  of the bytes a one-token step reads (49,152 x 576 in fp32 against 30 layers in fp16) and, kept
  in fp32, took a third of a scoring forward; the feature draft takes its
  rows from `output_weight`;
* `bfloat16`: the whole model in bf16, a candidate only where the CPU computes bf16 natively.
  Its Linears hold their weights pre-packed for oneDNN (`PackedLinear`): the same products, bit
  for bit, as `F.linear` in bf16, which re-packs the weight on every call and so made a
  one-token bf16 step 1.6x slower than an fp16-weight one;
* `int4`: the default target in its file's own format (`int4_linear`): the Q4_1 projections kept
  in 4 bits with their group-32 d and m (as bf16 scale d and zero m + 8 d) for torch's CPU int4
  weight-only kernel, the rest as in `bfloat16`. Only a model that remembers its Q4_1 file
  (`GGUF_SOURCE`, set by `hf.load_model("default")`) can take it, and it is probed only where bf16
  is native: its vectorised loop takes bf16 activations, and on the AVX2 machine (shared and loaded,
  so roughly) one int4 product of a single row timed 2.5 to 3.5 times an fp16-weight GEMM of the
  same shape, before any emulated bf16 elementwise work.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import platform
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

KERNEL_ENV = "SPECTR_GBV_CPU_KERNEL"
DTYPE_ENV = "SPECTR_GBV_CPU_DTYPE"  # the older override: float32 or bfloat16
KERNELS = ("float32", "fp16-weights", "bfloat16", "int4")
KERNEL_LABELS = {"float32": "fp32", "fp16-weights": "fp16 weights (fbgemm)", "bfloat16": "bf16 (oneDNN, packed)",
                 "int4": "Q4_1 in 4 bits (torch int4, bf16)"}
# The attribute of a model loaded from a Q4_1 GGUF file: a function that finds the file, whose blocks the
# int4 kernel reads (`gguf_source`).
GGUF_SOURCE = "spectr_gbv_gguf_file"
PROBE_POSITIONS = 4  # the yardstick: a 4-position scoring forward, in one-token steps
# The scoring forward of the app's default iteration (K = 2 drafts of L = 4: one pending token and
# up to 8 drafted ones in one tree forward): what the choice is made on.
ITERATION_POSITIONS = 9
PROBE_CONTEXT = 100
PROBE_REPEATS = 7
PROBE_VERSION = 4  # bumped when a candidate or what is timed changes, so old probes are not reused
# The prediction's draft (assets/results/default_draft.md): held-out acceptance and a draft step
# as a fraction of a target step, at the app's default draft length. Tokens per iteration come
# from the single-draft theory at that alpha, a lower bound for K = 2; they are the same for every
# kernel, so the choice depends on the iteration's time alone.
PREDICTION_ALPHA = 0.50
PREDICTION_DRAFT_COST = 0.06
PREDICTION_DRAFT_LENGTH = 4


def cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


NATIVE_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})  # /proc/cpuinfo's word for bf16 products in hardware
NATIVE_BF16_CLASSES = frozenset({"AMX-BF16", "AVX512-BF16"})


def describe_cpu(flags: set[str]) -> str:
    """The CPU model, its class and its native bf16 flags, for the header of every benchmark."""
    native = sorted(flags & NATIVE_BF16_FLAGS)
    return f"CPU: {cpu_model()} ({cpu_class(flags)}; native bf16 flags: {', '.join(native) or 'none'})"


def cpu_class(flags: set[str]) -> str:
    """The class that decides which kernels are fast: AMX, AVX512-BF16, AVX512, AVX2 or other."""
    if "amx_bf16" in flags:
        return "AMX-BF16"
    if "avx512_bf16" in flags:
        return "AVX512-BF16"
    if "avx512f" in flags:
        return "AVX512"
    if "avx2" in flags and "fma" in flags:
        return "AVX2"
    return "other"


def candidates(flags: set[str], model: torch.nn.Module | None = None) -> list[str]:
    """The kernels worth probing on this CPU: bf16 only where it is native (emulated bf16 is several
    times slower), and int4 only there too and only for a `model` that remembers its Q4_1 file."""
    found = ["float32"]
    if "fbgemm" in torch.backends.quantized.supported_engines and "f16c" in flags:
        found.append("fp16-weights")
    if cpu_class(flags) in NATIVE_BF16_CLASSES:
        found.append("bfloat16")
        from .int4_linear import available

        if model is not None and getattr(model, GGUF_SOURCE, None) is not None and available():
            found.append("int4")
    return found


def gguf_source(model: torch.nn.Module) -> Path | None:
    """The Q4_1 GGUF file `model` was loaded from, if it says so: its `GGUF_SOURCE` attribute is a
    function that finds the (verified) file, called only when the int4 kernel is applied."""
    find = getattr(model, GGUF_SOURCE, None)
    return None if find is None else Path(find())


# The fbgemm fp16 GEMM behind torch.ao's dynamic fp16 Linear, called directly; torch marks these
# two entry points deprecated (one warning each per process), but they are the kernel ao uses.
warnings.filterwarnings("ignore", message="fbgemm_.*is deprecated")


@torch.library.custom_op("spectr_gbv::linear_fp16_weight", mutates_args=())
def _linear_fp16_weight(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor, out_features: int) -> torch.Tensor:
    return torch.fbgemm_linear_fp16_weight(x, packed, bias)


@_linear_fp16_weight.register_fake
def _(x, packed, bias, out_features):
    return x.new_empty((*x.shape[:-1], out_features))


def _fp32_bias(linear: torch.nn.Linear) -> torch.Tensor:
    """fbgemm takes a bias tensor: the Linear's in fp32, zeros for a bias-free one (y + 0 is y)."""
    return torch.zeros(linear.out_features) if linear.bias is None else linear.bias.detach().float()


class Fp16WeightLinear(torch.nn.Module):
    """A Linear whose weight is stored in fp16, packed once for fbgemm's fp16 GEMM; products and
    outputs in fp32. The same kernel, and the same bits, as torch.ao's dynamic fp16 Linear
    (tests/test_cpu_kernel.py compares them), in a form torch.compile can trace: the ao module
    keeps its weight in a TorchScript object, at which dynamo breaks the graph (seven breaks in
    every layer, and a recompile per layer index past its limit left most layers eager). Under
    compile the product is one custom op with a shape rule; eagerly it is the aten call itself,
    without the custom op's dispatch. `keep_dense` keeps the fp16 weight too, for a head whose
    rows the feature draft reads (`output_weight`)."""

    def __init__(self, linear: torch.nn.Linear, keep_dense: bool = False):
        super().__init__()
        weight = linear.weight.detach().float()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.packed = torch.fbgemm_pack_gemm_matrix_fp16(weight)  # not a parameter: .to() leaves it alone
        self.bias = _fp32_bias(linear)
        self.dense_weight = weight.half() if keep_dense else None

    @classmethod
    def side_by_side(cls, linears: list[torch.nn.Linear]) -> "Fp16WeightLinear":
        """One fp16-weight Linear whose output is `linears`' outputs side by side: their weights
        stacked by rows (`models.fused_linear`). Built on the meta device, so nothing is initialised
        only to be overwritten."""
        out_features = sum(linear.out_features for linear in linears)
        stacked = torch.nn.Linear(linears[0].in_features, out_features, bias=False, device="meta")
        stacked.weight = torch.nn.Parameter(torch.cat([linear.weight.detach().float() for linear in linears]),
                                            requires_grad=False)
        stacked.bias = torch.nn.Parameter(torch.cat([_fp32_bias(linear) for linear in linears]), requires_grad=False)
        return cls(stacked)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return _linear_fp16_weight(x, self.packed, self.bias, self.out_features)
        return torch.fbgemm_linear_fp16_weight(x, self.packed, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, fp16 weights (fbgemm)"


def swap_linears(module: torch.nn.Module, make, keep_dense: tuple[torch.nn.Module, ...] = ()) -> torch.nn.Module:
    """`module` with every Linear swapped in place for `make(linear, keep_dense=...)`; `keep_dense`
    names the Linears whose plain weight the replacement keeps too (`output_weight` reads it)."""
    for name, child in list(module.named_children()):
        if isinstance(child, torch.nn.Linear):
            setattr(module, name, make(child, keep_dense=any(child is m for m in keep_dense)))
        else:
            swap_linears(child, make, keep_dense)
    return module


def fp16_weight_linears(module: torch.nn.Module, keep_dense: tuple[torch.nn.Module, ...] = ()) -> torch.nn.Module:
    """`module` with every Linear swapped in place for an `Fp16WeightLinear`: weights stored in
    fp16, products in fp32."""
    return swap_linears(module, Fp16WeightLinear, keep_dense)


# Under torch.compile the packed product is one custom op with a shape rule, as the fp16-weight
# one is: inductor's own lowering of mkldnn's linear expects a weight it packed itself (at
# freezing) and fails an assertion on ours, so it must not see inside.
@torch.library.custom_op("spectr_gbv::linear_packed", mutates_args=())
def _linear_packed(x: torch.Tensor, packed: torch.Tensor, bias: torch.Tensor | None, out_features: int) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x.contiguous(), packed, bias, "none", [], "")


@_linear_packed.register_fake
def _(x, packed, bias, out_features):
    return x.new_empty((*x.shape[:-1], out_features))


class PackedLinear(torch.nn.Module):
    """A bias-free or biased Linear whose weight is stored pre-packed for oneDNN
    (`torch.ops.mkldnn._reorder_linear_weight`), for inference on the CPU.

    `F.linear` in bf16 reorders the weight into oneDNN's blocked layout on every call, which
    at one or a few rows costs more than the product; packed once, the product is the same
    (tests/test_cpu_kernel.py compares them bit for bit). `keep_dense` keeps the plain weight
    too, for a head whose rows the feature draft reads (`output_weight`)."""

    def __init__(self, linear: torch.nn.Linear, keep_dense: bool = False):
        super().__init__()
        weight = linear.weight.detach()
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight, 1)  # not a parameter: .to() leaves it alone
        self.bias = None if linear.bias is None else linear.bias.detach()
        self.dense_weight = weight if keep_dense else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():
            return _linear_packed(x, self.packed, self.bias, self.out_features)
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.packed, self.bias, "none", [], "")

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, packed {self.packed.dtype}"


def packed_linears(module: torch.nn.Module, keep_dense: tuple[torch.nn.Module, ...] = ()) -> torch.nn.Module:
    """`module` with every Linear swapped in place for a `PackedLinear` of its own dtype."""
    return swap_linears(module, PackedLinear, keep_dense)


def apply_kernel(model: torch.nn.Module, kernel: str) -> torch.nn.Module:
    """`model` (fp32, on the CPU) converted to `kernel`, in place where possible; returns the model to use."""
    if kernel == "float32":
        return model.float()
    if kernel == "bfloat16":
        model = model.to(torch.bfloat16)
        if not torch.ops.mkldnn._is_mkldnn_bf16_supported():  # forced on a CPU oneDNN has no bf16 for
            return model
        return packed_linears(model, keep_dense=(model.get_output_embeddings(),))
    if kernel == "int4":
        from .int4_linear import int4_linears

        source = gguf_source(model)
        if source is None:
            raise ValueError("the int4 kernel keeps the weights of a Q4_1 GGUF file in 4 bits: only the default target, "
                             "loaded from its file, has one")
        return int4_linears(model, source)
    if kernel == "fp16-weights":
        from .fused_linear import fuse_sibling_linears

        fuse_sibling_linears(model)  # q/k/v and gate/up as one GEMM each, the same bits
        return fp16_weight_linears(model, keep_dense=(model.get_output_embeddings(),))
    raise ValueError(f"unknown CPU kernel {kernel!r}; choose one of: {', '.join(KERNELS)}")


def output_weight(model: torch.nn.Module) -> torch.Tensor:
    """The output head's weight [V, H] as a float tensor, whichever kernel the model is in (an
    fbgemm fp16-weight Linear keeps it packed and unpacks it through `weight()`)."""
    head = model.get_output_embeddings()
    if isinstance(head, PackedLinear):
        return head.dense_weight
    if isinstance(head, Fp16WeightLinear):
        return head.dense_weight.float()
    weight = head.weight
    return (weight() if callable(weight) else weight).detach()


@dataclass(frozen=True)
class KernelCost:
    kernel: str
    step_ms: float  # one-token decoding step, the fastest of the probe
    score_ms: float  # PROBE_POSITIONS positions in one forward, the fastest of the probe
    iteration_ms: float | None = None  # ITERATION_POSITIONS positions (the app's default iteration's forward)

    @property
    def ratio(self) -> float:
        """Scoring PROBE_POSITIONS positions, in one-token steps."""
        return self.score_ms / self.step_ms

    @property
    def iteration_ratio(self) -> float | None:
        """Scoring ITERATION_POSITIONS positions, in one-token steps."""
        return None if self.iteration_ms is None else self.iteration_ms / self.step_ms

    @property
    def position_cost(self) -> float:
        """g: what each scored position beyond the first adds, in one-token steps (the theory's
        1 + g K L; `spectr_gbv.theory`), fitted through the probe's forwards: least squares of
        ratio - 1 on positions - 1, never below 0."""
        points = [(PROBE_POSITIONS, self.ratio)]
        if self.iteration_ratio is not None:
            points.append((ITERATION_POSITIONS, self.iteration_ratio))
        slope = sum((n - 1) * (r - 1) for n, r in points) / sum((n - 1) ** 2 for n, _ in points)
        return max(slope, 0.0)

    def predicted_tokens_per_second(self) -> float:
        """Speculative decoding's predicted rate with this kernel at the app's default iteration
        (its scoring forward, plus L draft steps; tokens from the single-draft theory)."""
        from ..theory import single_draft_tokens

        tokens = single_draft_tokens(PREDICTION_ALPHA, PREDICTION_DRAFT_LENGTH)
        scoring = self.iteration_ms if self.iteration_ms is not None else self.score_ms
        seconds = (scoring + PREDICTION_DRAFT_LENGTH * PREDICTION_DRAFT_COST * self.step_ms) / 1000
        return tokens / seconds

    def predicted_speedup(self) -> float:
        """The same, against plain decoding with the same kernel."""
        return self.predicted_tokens_per_second() * self.step_ms / 1000


@dataclass(frozen=True)
class KernelChoice:
    kernel: str
    cpu_class: str
    cpu_model: str
    costs: tuple[KernelCost, ...] = field(default_factory=tuple)
    reason: str = "measured"  # or the override that set it

    @property
    def native_bf16(self) -> bool:
        return self.cpu_class in NATIVE_BF16_CLASSES

    def cost(self) -> KernelCost | None:
        return next((c for c in self.costs if c.kernel == self.kernel), None)

    def note(self) -> str:
        """One line for the page, beside every speedup: why speculation pays here, or does not."""
        line = f"this server: {self.cpu_class}, {KERNEL_LABELS.get(self.kernel, self.kernel)}"
        cost = self.cost()
        if cost is not None:
            line += f"; scoring {PROBE_POSITIONS} positions costs {cost.ratio:.2f} one-token steps"
            if cost.iteration_ratio is not None:
                line += f", {ITERATION_POSITIONS} positions (K = 2, L = 4) {cost.iteration_ratio:.2f}"
        return line + ("" if self.reason == "measured" else f" ({self.reason})")


    def summary(self) -> dict:
        return {"cpu_class": self.cpu_class, "cpu_model": self.cpu_model, "kernel": self.kernel, "reason": self.reason,
                "probe_positions": PROBE_POSITIONS, "iteration_positions": ITERATION_POSITIONS,
                "probe_context": PROBE_CONTEXT,
                "costs": [asdict(c) | {"ratio": round(c.ratio, 3),
                                       "iteration_ratio": None if c.iteration_ratio is None else round(c.iteration_ratio, 3),
                                       "predicted_speedup": round(c.predicted_speedup(), 3)} for c in self.costs]}


def best(costs: list[KernelCost]) -> KernelCost:
    return max(costs, key=lambda c: c.predicted_tokens_per_second())


def override() -> tuple[str, str] | None:
    """(kernel, reason) from the environment, or None."""
    chosen = os.environ.get(KERNEL_ENV, "").strip().lower()
    if chosen:
        if chosen not in KERNELS:
            raise ValueError(f"${KERNEL_ENV}={chosen!r}: choose one of {', '.join(KERNELS)}")
        return chosen, f"${KERNEL_ENV}={chosen}"
    older = os.environ.get(DTYPE_ENV, "").strip().lower()
    if older in ("float32", "fp32"):
        return "float32", f"${DTYPE_ENV}={older}"
    if older in ("bfloat16", "bf16"):
        return "bfloat16", f"${DTYPE_ENV}={older}"
    return None


@torch.inference_mode()
def time_forward_set(model: torch.nn.Module, positions: tuple[int, ...], context: int = PROBE_CONTEXT,
                     repeats: int = PROBE_REPEATS) -> tuple[float, dict[int, float]]:
    """(one-token step ms, {n: n-position forward ms}), each the fastest of `repeats` interleaved
    timings over a `context`-token KV cache."""
    from transformers import DynamicCache

    vocab = model.config.vocab_size
    ids = torch.randint(0, vocab, (1, context + max(positions)), generator=torch.Generator().manual_seed(0))
    cache = DynamicCache(config=model.config)
    model(input_ids=ids[:, :context], past_key_values=cache, use_cache=True)

    def timed(n: int) -> float:
        started = time.perf_counter()
        model(input_ids=ids[:, context : context + n], past_key_values=cache, use_cache=True)
        elapsed = time.perf_counter() - started
        cache.crop(-n)  # transformers crops by a count of tokens to remove
        return elapsed * 1000

    for n in (1, *positions):  # warm-up
        timed(n)
    times: dict[int, list[float]] = {n: [] for n in (1, *positions)}
    for _ in range(repeats):  # interleaved, so a drifting machine moves them all
        for n in times:
            times[n].append(timed(n))
    # the fastest of the repeats: another process on the machine only ever adds time
    return min(times[1]), {n: min(times[n]) for n in positions}


def time_forwards(model: torch.nn.Module, positions: int = PROBE_POSITIONS, context: int = PROBE_CONTEXT,
                  repeats: int = PROBE_REPEATS) -> tuple[float, float]:
    """(one-token step ms, `positions`-position forward ms), the fastest of `repeats`."""
    step, forwards = time_forward_set(model, (positions,), context, repeats)
    return step, forwards[positions]


def probe(model: torch.nn.Module, kernels: list[str]) -> list[KernelCost]:
    """Each kernel's costs, timed on a converted copy of the fp32 `model`."""
    costs = []
    for kernel in kernels:
        candidate = apply_kernel(copy.deepcopy(model), kernel)
        step, forwards = time_forward_set(candidate, (PROBE_POSITIONS, ITERATION_POSITIONS))
        costs.append(KernelCost(kernel, step, forwards[PROBE_POSITIONS], forwards[ITERATION_POSITIONS]))
        del candidate
    return costs


def _cache_file(cache: Path, model_name: str, cpu: str, flags: set[str], kernels: list[str]) -> Path:
    key = json.dumps([cpu, sorted(flags), torch.__version__, torch.get_num_threads(), model_name, PROBE_VERSION, kernels])
    return cache / "cpu-kernel" / f"{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def choose(model: torch.nn.Module, model_name: str, cache: Path | None = None) -> KernelChoice:
    """The kernel for `model` (fp32, CPU) on this machine: the override or the best probed candidate.

    The probe (or its cached result) times every candidate; an override times only the kernel it
    names, so the page can still say what scoring costs there ("fp32 forced: scoring costs ...")."""
    flags = cpu_flags()
    klass, name = cpu_class(flags), cpu_model()
    forced = override()
    kernels = [forced[0]] if forced is not None else candidates(flags, model)

    def chosen(costs: tuple[KernelCost, ...]) -> KernelChoice:
        if forced is not None:
            return KernelChoice(forced[0], klass, name, costs, reason=forced[1])
        return KernelChoice(best(list(costs)).kernel, klass, name, costs)

    path = _cache_file(cache, model_name, name, flags, kernels) if cache is not None else None
    if path is not None and path.is_file():
        try:
            saved = json.loads(path.read_text())
            return chosen(tuple(KernelCost(c["kernel"], c["step_ms"], c["score_ms"], c.get("iteration_ms"))
                                for c in saved["costs"]))
        except (OSError, ValueError, KeyError, TypeError):
            pass  # a damaged cache entry: probe again
    choice = chosen(tuple(probe(model, kernels)))
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(choice.summary(), indent=2))
    return choice
