"""Model adapters. `FunctionModel` wraps a Python callable (the toy world).

Also what the app reads about the server a model runs on (`server_note`, `server_costs`), so the
app never imports `cpu_kernel` itself: a model of the default target on a CPU carries the kernel
its probe chose (`cpu_kernel.KernelChoice`); any other model carries none.
"""

from __future__ import annotations

from dataclasses import dataclass

from .base import DecodeSession, LanguageModel
from .function import FeatureFunctionModel, FeatureReadingDraft, FunctionModel

__all__ = ["DecodeSession", "FeatureFunctionModel", "FeatureReadingDraft", "FunctionModel", "LanguageModel",
           "ServerCosts", "server_costs", "server_note"]


def _kernel(model):
    """The `cpu_kernel.KernelChoice` an engine model was loaded with, else None."""
    return getattr(getattr(model, "loaded", None), "kernel", None)


def server_note(model) -> str | None:
    """The kernel note of an engine model (an HFModel of the default target on a CPU), else None."""
    choice = _kernel(model)
    return choice.note() if choice is not None else None


@dataclass(frozen=True)
class ServerCosts:
    """The costs the kernel probe's prediction uses, for a model on this server."""

    alpha: float  # the default draft's held-out acceptance (cpu_kernel.PREDICTION_ALPHA)
    draft_cost: float  # its step against a target step (cpu_kernel.PREDICTION_DRAFT_COST)
    position_cost: float | None  # one-token steps per extra scored position (KernelCost.position_cost); None unprobed
    note: str | None  # server_note, when position_cost is known


def server_costs(model) -> ServerCosts:
    """alpha and c as the kernel probe predicts with, and g from the model's probed kernel: None on a GPU
    (no CPU kernel) or for a kernel forced without its probe."""
    from . import cpu_kernel

    choice = _kernel(model)
    cost = choice.cost() if choice is not None else None
    return ServerCosts(cpu_kernel.PREDICTION_ALPHA, cpu_kernel.PREDICTION_DRAFT_COST,
                       cost.position_cost if cost is not None else None,
                       choice.note() if cost is not None else None)
