"""Pure probability helpers shared by every verifier and by the engine.

No model, no UI, no randomness here: tensors in, tensors out. Everything that the
verifiers compute with (weights, residual masses, residual distributions) is float64,
because small residual masses suffer cancellation in float32 (docs/algorithms.md §1.6).
"""

from __future__ import annotations

import torch

# Probability vectors may come from float32/bf16 softmaxes; their sums are allowed to be
# this far from 1 before we call the input malformed. They are renormalised in float64.
NORMALISATION_TOLERANCE = 1e-3

# A residual whose total mass is at or below this is treated as empty. Exact arithmetic
# only reaches an empty residual on probability-zero branches (for example target == draft
# at a node); in floating point such a branch can be reached by rounding, and normalising
# a vector of rounding residue would produce an arbitrary distribution.
EMPTY_MASS = 1e-12


def checked_float64_distributions(name: str, probs: torch.Tensor) -> torch.Tensor:
    """Validate that the last axis holds probability vectors; return a float64, renormalised copy.

    Raises ValueError naming `name`. One conversion pass plus two reductions, and one host
    synchronisation (a NaN or infinity anywhere makes its row's sum non-finite); details
    are computed only when the check fails.
    """
    if not torch.is_floating_point(probs):
        raise ValueError(f"{name} must be a floating-point tensor, got {probs.dtype}")
    if probs.numel() == 0:
        raise ValueError(f"{name} is empty (shape {tuple(probs.shape)})")
    wide = probs.to(torch.float64, copy=True)
    sums = wide.sum(-1, keepdim=True)
    ok = torch.isfinite(sums).all() & (wide.amin() >= 0) & ((sums - 1).abs() <= NORMALISATION_TOLERANCE).all()
    if not bool(ok):
        _raise_not_distributions(name, wide, sums)
    return wide.div_(sums)


def _raise_not_distributions(name: str, wide: torch.Tensor, sums: torch.Tensor) -> None:
    if not bool(torch.isfinite(wide).all()):
        raise ValueError(f"{name} contains NaN or infinite values")
    if bool((wide < 0).any()):
        raise ValueError(f"{name} contains negative probabilities (min {wide.min().item():.3g})")
    worst = (sums - 1).abs().max().item()
    raise ValueError(
        f"{name} is not normalised: a row sums to 1 {worst:+.3g} away from 1 "
        f"(tolerance {NORMALISATION_TOLERANCE})"
    )


def normalize(weights: torch.Tensor, fallback: torch.Tensor) -> torch.Tensor:
    """weights / sum(weights), or `fallback` where the mass is empty (see EMPTY_MASS)."""
    mass = weights.sum(-1, keepdim=True)
    empty = mass <= EMPTY_MASS
    return torch.where(empty, fallback, weights / torch.where(empty, torch.ones_like(mass), mass))


def residual(target: torch.Tensor, draft: torch.Tensor, weight: float | torch.Tensor = 1.0) -> torch.Tensor:
    """norm((weight * target - draft)_+), the SD / GBV residual (docs/algorithms.md §2.1, §2.3).

    With weight = 1 it is the SD residual; with weight = omega_tau it is GBV's r_tau.
    An empty residual (a probability-zero branch) falls back to the target itself.
    """
    return normalize(torch.relu(weight * target - draft), fallback=target)


def residual_mass(target: torch.Tensor, draft: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """S = sum_x (weight * target(x) - draft(x))_+ over the last axis (GBV's S_i).

    One temporary, edited in place: at V ~ 50k these [K, L, V] passes dominate verification.
    """
    excess = target * weight.unsqueeze(-1)
    return excess.sub_(draft).clamp_(min=0.0).sum(-1)


def one_hot_argmax(logits: torch.Tensor) -> torch.Tensor:
    """The temperature-0 distribution: all mass on the first maximal token."""
    out = torch.zeros_like(logits, dtype=torch.float64 if logits.dtype == torch.float64 else torch.float32)
    return out.scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)


def logits_to_probs(
    logits: torch.Tensor,  # [..., V]
    temperature: float,
    top_k: int | None = None,
    top_p: float | None = None,
) -> torch.Tensor:
    """The processed next-token distribution that is BOTH sampled from and verified.

    Draft and target must go through this same function with the same settings: a
    verifier that sees a different distribution from the one the draft was sampled
    from is no longer exact. Temperature 0 means greedy (one-hot on the argmax).
    """
    if temperature == 0:
        return one_hot_argmax(logits)
    # At least float32 (bf16/fp16 logits are upcast); float64 logits stay float64.
    logits = (logits if logits.dtype == torch.float64 else logits.to(torch.float32)) / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if top_p is not None and top_p < 1.0:
        sorted_probs, order = torch.sort(probs, dim=-1, descending=True)
        # Keep the smallest set of most likely tokens whose mass reaches top_p: a token is
        # dropped when the mass strictly before it already reaches top_p.
        drop_sorted = (sorted_probs.cumsum(-1) - sorted_probs) >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        probs = probs.masked_fill(drop, 0.0)
        probs = probs / probs.sum(-1, keepdim=True)
    return probs


def token_probs(probs: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """The probability each distribution gives its token.

    probs [..., V] with tokens [...] (one token per distribution), or a single
    distribution [V] with tokens [n] (several tokens under one distribution).
    """
    if probs.dim() == 1:
        return probs[tokens]
    return probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1)


def restricted_head_logits(hidden: torch.Tensor, head, token_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """Logits [..., vocab_size] from an output head restricted to `token_ids` (FR-Spec-style):
    only those rows are computed, every other token gets -inf, so the distribution is proper
    over the full vocabulary with zero mass off the head. `head` is the rows' matrix, or a
    module computing hidden -> those logits (an fp16-weight Linear)."""
    logits = torch.full((*hidden.shape[:-1], vocab_size), float("-inf"), device=hidden.device)
    logits[..., token_ids] = (head(hidden) if callable(head) else hidden @ head.T).float()
    return logits
