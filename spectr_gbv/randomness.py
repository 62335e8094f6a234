"""Where the verifiers' randomness comes from.

Verifiers never call `torch.rand` themselves. They ask a `Randomness` for two things:

* `coins(accept_probs)`: independent Bernoulli decisions, coin i succeeding with
  probability accept_probs[i] (drawn as eta_i ~ U(0,1), success iff eta_i < p_i);
* `sample(probs)`: one token from a distribution (inverse CDF of one uniform).

Three sources implement it:

* `TorchRandomness`: a seeded `torch.Generator` (CPU or CUDA), for real runs;
* `ScriptedRandomness`: uniforms given as a list, for scenario tests with injected uniforms;
* `spectr_gbv.exact.BranchingRandomness`: follows every outcome of every coin and every
  token, with its probability, to compute the exact output law of a verifier.

Because the same verifier code runs under all three, the exact-enumeration tests check
the code that runs in the app, not a separate model of it.
"""

from __future__ import annotations

import itertools
from typing import Callable, Protocol, Sequence

import torch


class Randomness(Protocol):
    def coins(self, accept_probs: torch.Tensor) -> tuple[list[bool], list[float | None]]:
        """Independent coins; returns (outcomes, the uniforms drawn or None per coin)."""
        ...

    def sample(self, probs: torch.Tensor) -> int:
        """One token id drawn from the distribution `probs` ([V], sums to 1)."""
        ...

    def coins_bounded(
        self, upper_bounds: torch.Tensor, exact: Callable[[list[int]], torch.Tensor] | None
    ) -> tuple[list[bool], list[float | None], list[float | None]]:
        """Coins whose probabilities are costly but bounded above by `upper_bounds` [m].

        `exact(positions)` returns the true probabilities at those positions. A source
        that draws uniforms calls it only where eta_i < upper_bounds[i], since elsewhere the
        coin fails whatever its exact probability; the outcomes are those of `coins` on the
        exact probabilities. Returns (outcomes, uniforms, the probabilities computed or None).
        `exact` None: the bounds are the probabilities, all known (one host read for a source
        of uniforms, where `coins` takes one too but does not return the probabilities).
        """
        ...

    def uniform_block(self, n: int, device: torch.device) -> torch.Tensor | None:
        """The next n uniforms as a float64 tensor on `device`, for a rule to read with other
        values and spend on the host (`HostUniforms`); None where the source is not a stream of
        uniforms it may hand out ahead (exact enumeration, scripted and budgeted uniforms)."""
        ...


def inverse_cdf(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """The token at quantile `uniform` of `probs`; never a zero-probability token.

    All device-side (no host synchronisation): the first index whose cumulative mass
    exceeds u * total. Rounding can push that index past the end; it is then clamped to
    the last token with positive probability.
    """
    cdf = probs.cumsum(-1)
    index = torch.searchsorted(cdf, (uniform * cdf[-1]).reshape(1), right=True)[0]
    positive = probs > 0
    last_positive = probs.shape[-1] - 1 - torch.flip(positive, dims=[-1]).to(torch.int8).argmax()
    return torch.minimum(index, last_positive)


def inverse_cdf_rows(probs: torch.Tensor, uniforms: torch.Tensor) -> torch.Tensor:
    """`inverse_cdf` for each row of probs [R, V] at its own uniform [R]: [R] token ids.

    The engine draws its drafts and plain decoding's tokens this way: at V ~ 50k one cumulative
    sum and a binary search cost about a tenth of `torch.multinomial`, which draws an exponential
    per token (2.2 ms a call on one core)."""
    cdf = probs.to(torch.float64).cumsum(-1)  # float64: the drawn law is probs / sum(probs), as verified
    quantiles = uniforms.reshape(-1, 1).to(torch.float64) * cdf[:, -1:]
    # the first index whose cumulative mass exceeds the quantile: cdf rises there, so its token has
    # positive probability (a zero adds nothing to a float sum)
    index = torch.searchsorted(cdf, quantiles, right=True)[:, 0]
    # The quantile can round up to the total: the index is then past the end. It is capped at
    # the first index whose cumulative mass reaches the total, a token of positive probability
    # (the sum rises there) and, unless a trailing mass too small to change a float64 sum was
    # absorbed, the last one. Device-side, with no host read on any device.
    reached = torch.searchsorted(cdf, cdf[:, -1:].contiguous(), right=False)[:, 0]
    return torch.minimum(index, reached)


def torch_uniforms(generator: torch.Generator, n: int, device: torch.device) -> torch.Tensor:
    """n uniforms from `generator`, float64 on its device, moved to `device`: what
    `TorchRandomness` draws, and what the tensor rules (`MethodSpec.decide`) draw in its place."""
    return torch.rand(n, generator=generator, dtype=torch.float64, device=generator.device).to(device)


def sample_rows(probs: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """One token per row of probs [R, V], from the uniforms of `generator` (float64, as TorchRandomness)."""
    return inverse_cdf_rows(probs, torch_uniforms(generator, probs.shape[0], probs.device))


class UniformRandomness:
    """Coins and samples built from a stream of U(0,1) draws (`_uniforms`)."""

    def _uniforms(self, n: int, device: torch.device) -> torch.Tensor:
        raise NotImplementedError

    def coins(self, accept_probs: torch.Tensor) -> tuple[list[bool], list[float | None]]:
        uniforms = self._uniforms(accept_probs.numel(), accept_probs.device)
        # The uniforms and the probabilities in one host read, compared there: float64 on both
        # sides, so the same outcomes as comparing on the device.
        etas, probs = _read_pairs(uniforms, accept_probs)
        # eta < p: a probability-0 coin never succeeds and a probability-1 coin always does.
        return [eta < prob for eta, prob in zip(etas, probs)], etas

    def sample(self, probs: torch.Tensor) -> int:
        return int(inverse_cdf(probs, self._uniforms(1, probs.device)[0]))

    def coins_bounded(
        self, upper_bounds: torch.Tensor, exact: Callable[[list[int]], torch.Tensor] | None
    ) -> tuple[list[bool], list[float | None], list[float | None]]:
        uniforms = self._uniforms(upper_bounds.numel(), upper_bounds.device)
        # Two host reads: the uniforms with their bounds, then the exact probabilities where needed.
        etas, bounds = _read_pairs(uniforms, upper_bounds)
        if exact is None:  # the bounds are exact: the first read was the only one
            return [eta < prob for eta, prob in zip(etas, bounds)], etas, bounds
        possible = [i for i, (eta, bound) in enumerate(zip(etas, bounds)) if eta < bound]
        outcomes: list[bool] = [False] * len(etas)
        probs: list[float | None] = [None] * len(etas)
        if possible:
            exact_probs = exact(possible).to(torch.float64).reshape(-1).tolist()
            for position, prob in zip(possible, exact_probs):
                outcomes[position], probs[position] = etas[position] < prob, prob
        return outcomes, etas, probs

    def uniform_block(self, n: int, device: torch.device) -> torch.Tensor | None:
        return None


def _read_pairs(uniforms: torch.Tensor, probs: torch.Tensor) -> tuple[list[float], list[float]]:
    """The uniforms [n] and probabilities (n values) as float64 host lists, in one read."""
    etas, values = torch.stack([uniforms.to(torch.float64), probs.reshape(-1).to(torch.float64)]).tolist()
    return etas, values


class TorchRandomness(UniformRandomness):
    """Uniforms from a `torch.Generator`, drawn in float64 on the generator's device.

    float64 because float32 `torch.rand` can return exactly 0, which would let a
    probability-0 coin succeed under a `<=` test and biases the tail of the CDF.
    """

    def __init__(self, generator: torch.Generator):
        self.generator = generator

    def _uniforms(self, n: int, device: torch.device) -> torch.Tensor:
        return torch_uniforms(self.generator, n, device)

    def uniform_block(self, n: int, device: torch.device) -> torch.Tensor | None:
        return self._uniforms(n, device)


class BudgetRandomness(UniformRandomness):
    """Uniforms served in order from a block drawn at once (`torch_uniforms(generator, budget)`).

    A rule whose number of draws depends on its coins, but is bounded, draws its whole budget
    up front; its tensor form (`MethodSpec.decide`) draws the same block and indexes into it
    on the device, so both decide from the same uniforms. The unused tail is discarded."""

    def __init__(self, uniforms: torch.Tensor):
        self.block = uniforms
        self.used = 0

    def _uniforms(self, n: int, device: torch.device) -> torch.Tensor:
        if self.used + n > self.block.numel():
            raise IndexError(f"budget of {self.block.numel()} uniforms exhausted (wanted {self.used + n})")
        self.used += n
        return self.block[self.used - n : self.used].to(device)


class ScriptedRandomness(UniformRandomness):
    """Uniforms taken in order from a given list (scenario tests)."""

    def __init__(self, uniforms: Sequence[float]):
        self._queue = list(uniforms)
        self.used = 0

    def _uniforms(self, n: int, device: torch.device) -> torch.Tensor:
        if self.used + n > len(self._queue):
            raise IndexError(f"script of {len(self._queue)} uniforms exhausted (wanted {self.used + n})")
        values = self._queue[self.used : self.used + n]
        self.used += n
        return torch.tensor(values, dtype=torch.float64, device=device)


class HostUniforms:
    """Uniforms already on the host (read with other values), spent in order on coins and draws
    whose probabilities are host floats too: the decisions of `UniformRandomness` (eta < p, and
    `inverse_cdf`'s first index whose cumulative mass exceeds u x total) in float64, with no
    read. Uniforms left over are discarded: each one is used at most once, so the decisions
    are independent draws as from any other stream."""

    def __init__(self, uniforms: Sequence[float]):
        self._queue = list(uniforms)
        self.used = 0

    def _next(self, n: int) -> list[float]:
        if self.used + n > len(self._queue):
            raise IndexError(f"{len(self._queue)} uniforms on the host, {self.used + n} wanted")
        self.used += n
        return self._queue[self.used - n : self.used]

    def coins(self, accept_probs: Sequence[float]) -> tuple[list[bool], list[float]]:
        etas = self._next(len(accept_probs))
        return [eta < prob for eta, prob in zip(etas, accept_probs)], etas

    def sample(self, probs: Sequence[float]) -> int:
        (eta,) = self._next(1)
        cdf = list(itertools.accumulate(probs))  # left to right, as torch's cumsum on a short row
        quantile = eta * cdf[-1]
        index = next((i for i, mass in enumerate(cdf) if mass > quantile), len(cdf))
        return min(index, max(i for i, prob in enumerate(probs) if prob > 0))
