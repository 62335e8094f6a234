"""The one interface every verifier implements.

Notation (docs/algorithms.md §1.2; its letters are the reverse of Leviathan et al.'s):

    paper                              here
    p(. | u)   draft distribution      draft_probs[k, d]    (node u = X^(k)_{1:d})
    q(. | u)   target distribution     target_probs[k, d]
    X^(k)_i    i-th token of draft k   draft_tokens[k, i-1]
    K, L       drafts, draft length    num_drafts, draft_length
    tau        accepted draft tokens   num_accepted
    Y          correction/bonus token  final_token

A verifier is a function `verify(inp: VerifyInput, rng: Randomness) -> VerifyResult`
plus `expected_accepted(inp) -> float`, the conditional expectation of tau given the
drafts (the Rao-Blackwellised "theory" line, docs/algorithms.md §9.2).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Literal

import torch

from ..probs import checked_float64_distributions, residual, token_probs
from ..randomness import BudgetRandomness, Randomness, TorchRandomness, inverse_cdf, torch_uniforms

FinalKind = Literal["correction", "bonus"]


def canonical_rows(draft_tokens: torch.Tensor) -> torch.Tensor:
    """c[k, d] = the lowest draft index whose first d tokens equal draft k's. [K, L+1]

    Drafts that share a trie node must be verified against ONE copy of that node's
    distributions (batched forwards can differ in the last bits; docs/algorithms.md §1.5).
    """
    num_drafts, draft_length = draft_tokens.shape
    same = draft_tokens[:, None, :] == draft_tokens[None, :, :]  # [K, K, L]
    ones = torch.ones(num_drafts, num_drafts, 1, dtype=torch.long, device=draft_tokens.device)
    same_prefix = torch.cat([ones, same.long().cumprod(-1)], dim=-1)  # [K, K, L+1]
    return same_prefix.argmax(dim=1)  # first k' with an equal prefix


@dataclass
class Prefetched:
    """What was read to the host with the drafts' tokens, in one copy (`read_with_drafts`).

    Its values may hold uniforms drawn for one verification (`MethodSpec.prefetch`), so the rule
    takes them once (`claim`): a second verification of the same input would reuse them."""

    rows: list[list[int]]  # [K][L] the drafts' tokens
    values: list[float]  # the rule's `MethodSpec.prefetch`, as host floats
    claimed: bool = False

    def claim(self) -> "Prefetched":
        if self.claimed:
            raise RuntimeError("these prefetched values were used by a verification already; prefetch again")
        self.claimed = True
        return self


def read_with_drafts(draft_tokens: torch.Tensor, values: torch.Tensor) -> Prefetched:
    """The tokens [K, L] and `values` (float64 [X]) in one host read. Token ids travel as float64,
    exact below 2**53."""
    K, L = draft_tokens.shape
    flat = torch.cat([draft_tokens.reshape(-1).to(torch.float64), values]).tolist()
    return Prefetched(token_rows(flat, K, L), flat[K * L :])


def token_rows(values: list[float], K: int, L: int) -> list[list[int]]:
    """[K][L] token ids from the first K L of float64 values read from the device (exact below 2**53)."""
    return [[int(t) for t in values[k * L : (k + 1) * L]] for k in range(K)]


@dataclass(frozen=True)
class VerifyInput:
    """One iteration's drafts and distributions, validated and canonicalised.

    Construct with `VerifyInput.build(...)`; the fields are then float64, renormalised,
    and rows of shared trie nodes are identical copies.
    """

    draft_tokens: torch.Tensor  # [K, L] long
    draft_probs: torch.Tensor  # [K, L, V] float64; row d is p(. | X_{1:d})
    target_probs: torch.Tensor  # [K, L+1, V] float64; row d is q(. | X_{1:d}); row L is the bonus
    # The engine's read of the drafts' tokens with the rule's `MethodSpec.prefetch` (None: the rule reads its own).
    prefetched: Prefetched | None = None

    @property
    def num_drafts(self) -> int:
        return self.draft_tokens.shape[0]

    @property
    def draft_length(self) -> int:
        return self.draft_tokens.shape[1]

    @property
    def vocab_size(self) -> int:
        return self.target_probs.shape[-1]

    @classmethod
    def build(
        cls,
        draft_tokens: torch.Tensor,  # [K, L]
        draft_probs: torch.Tensor,  # [K, L, V]
        target_probs: torch.Tensor,  # [K, L+1, V]
    ) -> "VerifyInput":
        _check_shapes(draft_tokens, draft_probs, target_probs)
        draft_probs = checked_float64_distributions("draft_probs", draft_probs)  # fresh copies,
        target_probs = checked_float64_distributions("target_probs", target_probs)  # safe to edit
        tokens = draft_tokens.long()
        if bool((tokens < 0).any() | (tokens >= target_probs.shape[-1]).any()):
            raise ValueError(f"draft_tokens has ids outside [0, {target_probs.shape[-1]})")
        # Shared trie nodes: overwrite each non-canonical row with its canonical copy, in place
        # (only those rows move; the root is shared by every draft).
        rows = canonical_rows(tokens)  # [K, L+1]
        k_idx, d_idx = (rows != torch.arange(rows.shape[0], device=rows.device)[:, None]).nonzero(as_tuple=True)
        target_probs[k_idx, d_idx] = target_probs[rows[k_idx, d_idx], d_idx]
        inner = d_idx < tokens.shape[1]
        draft_probs[k_idx[inner], d_idx[inner]] = draft_probs[rows[k_idx[inner], d_idx[inner]], d_idx[inner]]
        # Checked on the canonical rows: those are the distributions the verifier uses.
        drafted = token_probs(draft_probs, tokens)
        if bool((drafted <= 0).any()):
            k, i = (drafted <= 0).nonzero()[0].tolist()
            raise ValueError(
                f"draft_tokens[{k}, {i}] has zero probability under draft_probs: drafts must be "
                "sampled from the distributions handed to the verifier"
            )
        return cls(tokens, draft_probs, target_probs)

    @classmethod
    def trusted(
        cls,
        draft_tokens: torch.Tensor,  # [K, L] long
        draft_probs: torch.Tensor,  # [K, L, V]
        target_probs: torch.Tensor,  # [K, L+1, V]
    ) -> "VerifyInput":
        """`build` for distributions the engine made itself (softmaxes, drafts sampled from them):
        the same float64 renormalised, canonicalised rows, without the checks and without a host
        read. The canonical copies are gathered on the device (every row, where `build` moves
        only the non-canonical ones after finding them with `nonzero`)."""
        tokens = draft_tokens.long()
        rows = canonical_rows(tokens) if tokens.shape[0] > 1 else None  # [K, L+1]
        return cls(tokens, _canonical64(draft_probs, rows), _canonical64(target_probs, rows))

    @classmethod
    def of_trusted_drafts(
        cls,
        tokens: torch.Tensor,  # [K, L] long
        draft_probs: torch.Tensor,  # [K, L, V] from `trusted_drafts`
        target_probs: torch.Tensor,  # [K, L+1, V] as the target gave them
        prefetched: Prefetched | None = None,
    ) -> "VerifyInput":
        """`trusted`, its draft half done before the target's forward (`trusted_drafts`)."""
        rows = canonical_rows(tokens) if tokens.shape[0] > 1 else None
        return cls(tokens, draft_probs, _canonical64(target_probs, rows), prefetched)


def trusted_drafts(draft_tokens: torch.Tensor, draft_probs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The draft half of `VerifyInput.trusted`: long tokens and the float64 renormalised canonical rows."""
    tokens = draft_tokens.long()
    return tokens, _canonical64(draft_probs, canonical_rows(tokens) if tokens.shape[0] > 1 else None)


def _canonical64(probs: torch.Tensor, rows: torch.Tensor | None) -> torch.Tensor:
    """Each draft's row at each depth replaced by its canonical draft's (`canonical_rows` [K, L+1],
    None for one draft), gathered on the device, then `_renormalised64`: [K, D, V], D = L or L + 1."""
    if rows is not None:
        depth = probs.shape[1]
        probs = probs[rows[:, :depth], torch.arange(depth, device=rows.device)]
    return _renormalised64(probs)


def _renormalised64(probs: torch.Tensor) -> torch.Tensor:
    """A float64 copy divided by its sums, as `checked_float64_distributions` returns it."""
    wide = probs.to(torch.float64, copy=True)
    return wide.div_(wide.sum(-1, keepdim=True))


def _check_shapes(draft_tokens: torch.Tensor, draft_probs: torch.Tensor, target_probs: torch.Tensor) -> None:
    if not isinstance(draft_tokens, torch.Tensor) or draft_tokens.dim() != 2:
        raise ValueError(f"draft_tokens must be a [K, L] tensor, got shape {tuple(getattr(draft_tokens, 'shape', ()))}")
    if torch.is_floating_point(draft_tokens) or draft_tokens.dtype == torch.bool:
        raise ValueError(f"draft_tokens must hold integer token ids, got {draft_tokens.dtype}")
    num_drafts, draft_length = draft_tokens.shape
    if num_drafts < 1:
        raise ValueError("draft_tokens has K = 0 drafts: K must be at least 1")
    if draft_length < 1:
        raise ValueError("draft_tokens has L = 0 tokens per draft: L must be at least 1")
    if draft_probs.dim() != 3 or tuple(draft_probs.shape[:2]) != (num_drafts, draft_length):
        raise ValueError(
            f"draft_probs must have shape [K, L, V] = [{num_drafts}, {draft_length}, V], got {tuple(draft_probs.shape)}"
        )
    if target_probs.dim() != 3 or tuple(target_probs.shape[:2]) != (num_drafts, draft_length + 1):
        raise ValueError(
            f"target_probs must have shape [K, L+1, V] = [{num_drafts}, {draft_length + 1}, V], "
            f"got {tuple(target_probs.shape)}"
        )
    if draft_probs.shape[-1] != target_probs.shape[-1]:
        raise ValueError(
            f"draft_probs and target_probs disagree on the vocabulary size "
            f"({draft_probs.shape[-1]} != {target_probs.shape[-1]})"
        )
    if not (draft_tokens.device == draft_probs.device == target_probs.device):
        raise ValueError("draft_tokens, draft_probs and target_probs must be on one device")


@dataclass(frozen=True)
class SubBlockTest:
    """One acceptance test a verifier made: may X^(draft)_{start+1 .. start+length} be accepted?

    `accept_prob` is the probability the rule gave the test (h for block rules, the ratio
    test for token rules), or None where a block rule decided without computing it (its
    upper bound omega was already <= eta, see `gbv.scan_coins`); `uniform` is the eta
    drawn (None under exact enumeration).
    """

    draft: int
    start: int
    length: int
    accept_prob: float | None
    accepted: bool
    uniform: float | None = None


@dataclass(frozen=True)
class VerifyResult:
    """What one verification decided, and what a viewer needs to draw the decision."""

    accepted_tokens: list[int]  # X_{1:tau} of the winning draft
    final_token: int  # Y
    final_kind: FinalKind  # "correction" (from a residual) or "bonus" (from q_{L+1})
    final_distribution: torch.Tensor  # [V] float64: the distribution Y was drawn from
    final_position: int  # the depth tau at which Y was drawn (Y is token tau+1)
    winning_draft: int | None  # a draft whose first tau tokens are the accepted ones; None when tau = 0
    tests: list[SubBlockTest] = field(default_factory=list)

    @property
    def num_accepted(self) -> int:
        return len(self.accepted_tokens)

    @property
    def tokens(self) -> list[int]:
        """The tau + 1 tokens this iteration emits."""
        return [*self.accepted_tokens, self.final_token]


def emit(
    inp: VerifyInput,
    rng: Randomness,
    draft: int | None,
    depth: int,
    final: torch.Tensor,  # [V]
    kind: FinalKind,
    tests: list[SubBlockTest],
    drafted: list[list[int]] | None = None,
    token: int | None = None,
) -> VerifyResult:
    """The end of a rule: X^(draft)_{1:depth} accepted, then Y ~ `final` (the iteration's
    last draw). `draft` may be None only with depth = 0. `drafted`: inp's draft tokens already
    on the host ([K][L]), which spares reading them again. `token`: Y, where the rule drew it
    from `final` already (on the device, read with its last coins)."""
    if depth == 0:
        accepted = []
    else:
        accepted = inp.draft_tokens[draft, :depth].tolist() if drafted is None else drafted[draft][:depth]
    y = rng.sample(final) if token is None else token
    return VerifyResult(accepted, y, kind, final, depth, draft if depth > 0 else None, tests)


def single_draft_result(inp: VerifyInput, rng: Randomness, tau: int, tests: list[SubBlockTest]) -> VerifyResult:
    """The end of SD: with tau = L a bonus token from q_{L+1}, else a correction token from
    norm((q_{tau+1} - p_{tau+1})_+)."""
    if tau == inp.draft_length:
        return emit(inp, rng, 0, tau, inp.target_probs[0, tau], "bonus", tests)
    return emit(inp, rng, 0, tau, residual(inp.target_probs[0, tau], inp.draft_probs[0, tau]), "correction", tests)


def decision(inp: VerifyInput, winner: int, tau: torch.Tensor, final: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """The end of a tensor rule (`MethodSpec.decide`): Y ~ `final` [V] at `uniform` (the
    iteration's last draw, as in `emit`), packed with the winner, tau and the winner's block
    into one long tensor [3 + L], read back by the engine in one copy."""
    y = inverse_cdf(final, uniform)
    winner = torch.as_tensor(winner, device=tau.device)
    head = torch.stack([winner, tau, y]).long()
    return torch.cat([head, law_at(winner, inp.draft_tokens)])


def law_at(tau: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """rows[tau] for a 0-dim device tensor tau, without reading it. [V]"""
    return rows.index_select(0, tau.reshape(1))[0]


Verify = Callable[[VerifyInput, Randomness], VerifyResult]
# The same rule deciding on tensors, for the lean loop: [winner, tau, Y, X^(winner)_1..L] as one
# long tensor on the device, from the same uniforms in the same order as `verify` under
# `TorchRandomness` (so the same tokens for the same seed), with no host read.
Decide = Callable[[VerifyInput, torch.Generator], torch.Tensor]
ExpectedAccepted = Callable[[VerifyInput], float]


@dataclass(frozen=True)
class MethodSpec:
    """A registered verification method. The engine and UI branch on these flags only."""

    name: str
    label: str
    verify: Verify
    expected_accepted: ExpectedAccepted | None  # None: no closed-form theory line
    multi_draft: bool  # uses all K drafts (otherwise only draft 0 is drafted and read)
    block: bool  # block-level (GBV-style) acceptance rather than token-level
    exact: bool  # the exactness tier: preserves the target distribution (proven by the exactness tests); False: lossy
    description: str
    # How the views show it (the app never tests a method's name: it reads these).
    colour: str  # its one colour in every chart; vermillion (#D55E00) is kept for the lossy rule alone
    symbol: str  # its Plotly marker, a second cue beside the colour
    residual: str  # where its correction token is drawn from, in words a student can check against the chart
    plots_its_residual: bool = False  # the residual is norm((q - p)+) of the explorer's plotted q and p
    compare_by_default: bool = True  # ticked in Compare (and Sweep) when the page opens
    leads_coupled: bool = False  # when selected, its drafts drive the coupled run
    compare_baseline: bool = False  # when ticked, Compare's default baseline (differences over a set are taken against it)
    exact_counterpart: str | None = None  # a lossy rule: the exact rule About and the lesson set it against
    shows_handoff: bool = False  # the explorer tells its hand-off story (which draft took over where the block stopped)
    app_default: bool = False  # the method the page opens on: exactly one entry sets it
    decide: Decide | None = None  # the rule on tensors (the lean loop); None: the lean loop runs `verify`
    # A rule whose number of draws depends on its coins: the most it draws for (K, L). Both
    # `verify` (through `BudgetRandomness`) and `decide` then take one block of that many
    # uniforms an iteration, so they decide from the same draws. None: draws as it goes.
    uniform_budget: Callable[[int, int], int] | None = None
    # Values the rule reads from the drafts alone, float64 [X] from (draft tokens [K, L], the
    # canonical float64 draft rows of `trusted_drafts`, the iteration's `Randomness`): the lean
    # loop computes them before the target's forward and reads them with the drafts' tokens, which
    # it reads anyway (`VerifyInput.prefetched`). None: the rule reads what it needs itself.
    prefetch: Callable[[torch.Tensor, torch.Tensor, Randomness], torch.Tensor] | None = None

    def randomness(self, generator: torch.Generator, num_drafts: int, draft_length: int, device: torch.device) -> Randomness:
        """The `Randomness` the engine hands `verify` for one iteration."""
        if self.uniform_budget is None:
            return TorchRandomness(generator)
        return BudgetRandomness(torch_uniforms(generator, self.uniform_budget(num_drafts, draft_length), device))
