"""SpecTr-GBV Explorer: exact speculative-decoding verifiers and a model-agnostic engine.

Public API:
    generate(target, draft, prompt_ids, method=..., num_drafts=K, draft_length=L,
             temperature=T, max_new_tokens=n, seed=s) -> RunRecord
    decode_iterations(target, draft, prompt_ids, DecodeConfig(...)) -> iterator of IterationRecord
    METHODS: the verifiers ("sd", "rrs", "spectr", "gbv", "spectr_gbv", "as_bv", "as_bv_handoff",
             "traversal", "spectr_gbv_released")
    models.FunctionModel(probs_fn, vocab_size): any callable as a model (the toy world)
    load_pair("default" | hub id | folder, draft=None) -> (target, draft, tokenizer): transformers models

`spectr_gbv` is the exact multi-draft block verifier (docs/algorithms.md §4).
`spectr_gbv_released` is the authors' released rule, which does NOT preserve the target
distribution; it is kept, labelled lossy, to measure that bias.
"""

from . import models
from .config import AUTOREGRESSIVE, DecodeConfig
from .engine import decode_iterations, generate
from .methods import METHODS, MethodSpec, SubBlockTest, VerifyInput, VerifyResult
from .randomness import ScriptedRandomness, TorchRandomness
from .records import IterationRecord, RunRecord


def load_pair(target: str = "default", draft: str | None = None, **kwargs):
    """(target_model, draft_model, tokenizer) for `generate`; see `spectr_gbv.models.hf.load_pair`.

    Imported lazily so that `import spectr_gbv` never loads transformers.
    """
    from .models.hf import load_pair as _load_pair

    return _load_pair(target, draft, **kwargs)

__all__ = [
    "AUTOREGRESSIVE",
    "DecodeConfig",
    "IterationRecord",
    "METHODS",
    "MethodSpec",
    "RunRecord",
    "ScriptedRandomness",
    "SubBlockTest",
    "TorchRandomness",
    "VerifyInput",
    "VerifyResult",
    "decode_iterations",
    "generate",
    "load_pair",
    "models",
]
