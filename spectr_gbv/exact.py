"""Exact laws by enumeration, for tiny vocabularies: the proof that a verifier is exact.

`BranchingRandomness` is a `Randomness` that, instead of drawing, follows every outcome of
every coin and every token draw with its probability. `enumerate_outcomes` runs a
verifier once per path (depth-first, replaying the choices made so far), so the law of
its result is obtained exactly from the production code itself.

`iteration_law` goes one step further: it also enumerates every tuple of K drafts of
length L (V**(K*L) of them, so keep V, K, L tiny), weighting each by its draft
probability, and returns the law of the emitted tokens and the exact E[tau].
`continued_law` extends each emitted string by the target to length L+1; a verifier
preserves the target distribution iff that law equals the target's own law of L+1 tokens
(docs/algorithms.md §1.4).
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

import torch

from .methods.base import MethodSpec, VerifyInput
from .randomness import Randomness
from .replays import remembering

T = TypeVar("T")
# A distribution function: context (tuple of token ids after the fixed prompt) -> [V] probs.
DistributionFn = Callable[[tuple[int, ...]], torch.Tensor]


class BranchingRandomness:
    """Replays `script` (the option index taken at each choice point), then takes option 0
    at every new choice point and remembers how many options it had."""

    def __init__(self, script: Sequence[int]):
        self.script = list(script)
        self.position = 0
        self.weight = 1.0
        self.new_points: list[tuple[int, int]] = []  # (position, number of options)

    def _choose(self, options: list[tuple[T, float]]) -> T:
        options = [(value, prob) for value, prob in options if prob > 0]
        if self.position < len(self.script):
            index = self.script[self.position]
        else:
            index = 0
            self.new_points.append((self.position, len(options)))
        value, prob = options[index]
        self.weight *= prob
        self.position += 1
        return value

    def coins(self, accept_probs: torch.Tensor) -> tuple[list[bool], list[float | None]]:
        probs = accept_probs.reshape(-1).clamp(0.0, 1.0).tolist()
        outcomes = [self._choose([(False, 1.0 - a), (True, a)]) for a in probs]
        return outcomes, [None] * len(outcomes)

    def sample(self, probs: torch.Tensor) -> int:
        return self._choose(list(enumerate(probs.tolist())))

    def coins_bounded(self, upper_bounds, exact):
        # No uniforms to compare with the bounds: every exact probability is needed.
        probs = upper_bounds if exact is None else exact(list(range(upper_bounds.numel())))
        outcomes, uniforms = self.coins(probs)
        return outcomes, uniforms, probs.tolist()

    def uniform_block(self, n: int, device: torch.device) -> None:
        return None  # no uniforms: every coin is asked for, so that it can branch


def enumerate_outcomes(run: Callable[[Randomness], T]) -> list[tuple[float, T]]:
    """Every (probability, result) of `run(rng)` over all its random choices."""
    results: list[tuple[float, T]] = []
    pending: list[list[int]] = [[]]
    with remembering():  # every replay meets the nodes the first one worked out (`replays`)
        while pending:
            script = pending.pop()
            rng = BranchingRandomness(script)
            value = run(rng)
            results.append((rng.weight, value))
            taken = script + [0] * len(rng.new_points)
            for position, count in rng.new_points:
                pending.extend(taken[:position] + [alternative] for alternative in range(1, count))
    return results


def verify_input_for(
    drafts: Sequence[Sequence[int]], target_fn: DistributionFn, draft_fn: DistributionFn
) -> VerifyInput:
    """The VerifyInput of given drafts, with every row computed from the two models."""
    draft_rows = [[draft_fn(tuple(x[:i])) for i in range(len(x))] for x in drafts]
    target_rows = [[target_fn(tuple(x[:i])) for i in range(len(x) + 1)] for x in drafts]
    return VerifyInput.build(
        torch.tensor(drafts, dtype=torch.long),
        torch.stack([torch.stack(r) for r in draft_rows]),
        torch.stack([torch.stack(r) for r in target_rows]),
    )


def sequence_prob(tokens: Sequence[int], fn: DistributionFn, context: tuple[int, ...] = ()) -> float:
    """prod_i fn(context + tokens[:i])[tokens[i]]."""
    prob = 1.0
    for i, token in enumerate(tokens):
        prob *= float(fn(context + tuple(tokens[:i]))[token])
    return prob


@dataclass(frozen=True)
class IterationLaw:
    emitted: dict[tuple[int, ...], float]  # law of the tau+1 emitted tokens
    expected_accepted: float  # exact E[tau]


def iteration_law(
    method: MethodSpec, target_fn: DistributionFn, draft_fn: DistributionFn, num_drafts: int, draft_length: int
) -> IterationLaw:
    """Exact law of one iteration: all K-tuples of drafts, all coins, all token draws."""
    vocab = len(target_fn(()))
    blocks = list(itertools.product(range(vocab), repeat=draft_length))
    block_probs = {x: sequence_prob(x, draft_fn) for x in blocks}
    emitted: dict[tuple[int, ...], float] = defaultdict(float)
    expected = 0.0
    with remembering():  # draft tuples sharing a prefix share its nodes (`replays`)
        for drafts in itertools.product(blocks, repeat=num_drafts):
            weight = 1.0
            for x in drafts:
                weight *= block_probs[x]
            if weight == 0:
                continue
            inp = verify_input_for(drafts, target_fn, draft_fn)
            for prob, result in enumerate_outcomes(lambda rng: method.verify(inp, rng)):
                emitted[tuple(result.tokens)] += weight * prob
                expected += weight * prob * result.num_accepted
    return IterationLaw(dict(emitted), expected)


def continued_law(emitted: dict[tuple[int, ...], float], target_fn: DistributionFn, length: int) -> dict[tuple[int, ...], float]:
    """Extend every emitted string by target sampling to `length` tokens; the law of the result."""
    vocab = len(target_fn(()))
    law: dict[tuple[int, ...], float] = defaultdict(float)
    for prefix, mass in emitted.items():
        for suffix in itertools.product(range(vocab), repeat=length - len(prefix)):
            law[prefix + suffix] += mass * sequence_prob(suffix, target_fn, prefix)
    return dict(law)


def target_law(target_fn: DistributionFn, length: int) -> dict[tuple[int, ...], float]:
    """The target's own law of its first `length` tokens."""
    vocab = len(target_fn(()))
    return {w: sequence_prob(w, target_fn) for w in itertools.product(range(vocab), repeat=length)}


def total_variation_to_target(law: dict[tuple[int, ...], float], target: dict[tuple[int, ...], float]) -> float:
    keys = set(law) | set(target)
    return 0.5 * sum(abs(law.get(w, 0.0) - target.get(w, 0.0)) for w in keys)


def first_tokens_law(
    method: MethodSpec, target_fn: DistributionFn, draft_fn: DistributionFn, num_drafts: int, draft_length: int,
    num_tokens: int,
) -> dict[tuple[int, ...], float]:
    """Exact law of the first `num_tokens` tokens a run emits, for a context-free pair (every
    iteration then has the same law, `iteration_law`): what a fidelity check of `num_tokens`
    tokens measures. Its total variation to `target_law(target_fn, num_tokens)` is the method's bias there."""
    return first_tokens_law_after(method, target_fn, draft_fn, num_drafts, draft_length, num_tokens, (),
                                  state=lambda context: ())


def first_tokens_law_after(
    method: MethodSpec, target_fn: DistributionFn, draft_fn: DistributionFn, num_drafts: int, draft_length: int,
    num_tokens: int, prompt: Sequence[int], state: Callable[[tuple[int, ...]], object] = lambda context: context,
) -> dict[tuple[int, ...], float]:
    """Exact law of the first `num_tokens` tokens a run emits after `prompt`, for a pair whose
    distribution functions read the whole context (prompt, then the tokens emitted). Each iteration
    starts where the emitted tokens left the context and is enumerated by `iteration_law` there;
    `state(context)` names what the laws depend on (a Markov pair: its last token), so contexts with
    the same state share one enumeration."""
    prompt = tuple(prompt)
    steps: dict[object, dict[tuple[int, ...], float]] = {}

    def step(context: tuple[int, ...]) -> dict[tuple[int, ...], float]:
        key = state(context)
        if key not in steps:
            steps[key] = iteration_law(method, lambda c: target_fn(context + tuple(c)),
                                       lambda c: draft_fn(context + tuple(c)), num_drafts, draft_length).emitted
        return steps[key]

    law: dict[tuple[int, ...], float] = {(): 1.0}
    while any(len(prefix) < num_tokens for prefix in law):
        grown: dict[tuple[int, ...], float] = defaultdict(float)
        for prefix, mass in law.items():
            if len(prefix) >= num_tokens:
                grown[prefix] += mass
                continue
            for tokens, prob in step(prompt + prefix).items():
                grown[(prefix + tokens)[:num_tokens]] += mass * prob
        law = dict(grown)
    return law


def target_law_after(target_fn: DistributionFn, length: int, prompt: Sequence[int]) -> dict[tuple[int, ...], float]:
    """The target's own law of its first `length` tokens after `prompt` (`target_law` for a context-free pair)."""
    prompt = tuple(prompt)
    vocab = len(target_fn(prompt))
    return {w: sequence_prob(w, target_fn, prompt) for w in itertools.product(range(vocab), repeat=length)}
