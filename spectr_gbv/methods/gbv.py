"""Greedy block verification, GBV (Sun, Mendlovic, Leviathan, et al.; arXiv 2403.10444).

docs/algorithms.md §2.3, §2.4. Single draft: only draft 0 is read.

    paper (docs/algorithms.md §2.3)       here
    omega_i  residual weight              omega[i-1]
    S_i      residual mass after i        residual_mass(...)
    h_i      sub-block acceptance prob    h[i-1]

The helpers `block_weights` and `block_accept_probs` are shared with SpecTr-GBV, whose
per-draft scan is GBV with a different first weight (docs/algorithms.md §4.3).
GBV, SpecTr-GBV, AS-BV and AS-BV+H all scan a block with `scan_block` and end the
scan with `stop_law`: the bonus after a whole block, else GBV's residual at the stop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..probs import residual, residual_mass, token_probs
from ..randomness import Randomness, torch_uniforms
from .base import FinalKind, SubBlockTest, VerifyInput, VerifyResult, decision, emit, law_at


def block_weights(first_weight: torch.Tensor, later_log_ratios: torch.Tensor) -> torch.Tensor:
    """omega_1 = first_weight, omega_t = min(omega_{t-1} * ratio_t, 1).  [..., m]

    first_weight: [...] in [0, 1]; later_log_ratios: [..., m-1], log ratio_t = log q_t(y_t) -
    log p_t(y_t) for t = 2..m (see `log_ratios`). Closed form of the recursion, no loop: with
    C_t the cumulative log ratios (C_0 = 0, C_1 = log omega_1), log omega_t = C_t - max_{j<=t} C_j.
    """
    log_steps = torch.cat([first_weight.unsqueeze(-1).log(), later_log_ratios], dim=-1)
    cumulative = log_steps.cumsum(-1)
    running_max = torch.cummax(cumulative, dim=-1).values.clamp(min=0.0)
    return torch.exp(cumulative - running_max)


def log_ratios(target: torch.Tensor, draft: torch.Tensor) -> torch.Tensor:
    """log q - log p, taken in log space: q / p overflows to inf for a subnormal p (a drafted
    token of probability 5e-324 gives 2e323), and inf - inf in `block_weights` would be NaN."""
    return target.log() - draft.log()


def sub_block_probs(omega: torch.Tensor, mass: torch.Tensor) -> torch.Tensor:
    """h_t = S_t / (S_t + 1 - omega_t), 1 where the denominator is 0 (then S_t = 0, omega_t = 1)."""
    denominator = mass + 1.0 - omega
    return torch.where(denominator > 0, mass / torch.where(denominator > 0, denominator, 1.0), 1.0).clamp(0.0, 1.0)


def block_accept_probs(
    omega: torch.Tensor,  # [..., m]
    target_next: torch.Tensor,  # [..., m-1, V]: q at the node after t tokens, t = 1..m-1
    draft_next: torch.Tensor,  # [..., m-1, V]: p at the same nodes
) -> torch.Tensor:
    """All of h_1..h_m at once: h_t = S_t / (S_t + 1 - omega_t) for t < m; h_m = omega_m."""
    mass = residual_mass(target_next, draft_next, omega[..., :-1])
    return torch.cat([sub_block_probs(omega[..., :-1], mass), omega[..., -1:]], dim=-1)


def scan_coins(
    rng: Randomness,
    omega: torch.Tensor,  # [m]
    target_next: torch.Tensor,  # [m-1, V]
    draft_next: torch.Tensor,  # [m-1, V]
    every_h: bool = False,
) -> tuple[list[bool], list[float | None], list[float | None]]:
    """The m coins of one GBV scan, computing h_t only where the coin can succeed.

    S_t <= omega_t, hence h_t <= omega_t: a coin with eta_t >= omega_t fails whatever
    S_t is, and its O(V) residual mass is never computed. Deviation from paper: an
    evaluation shortcut only; the outcomes equal those of the eager rule for the same eta.
    That shortcut costs a second host read (the uniforms first, to know where h_t is needed).
    `every_h`: every h_t computed up front (capped at omega_t, which it exceeds only by rounding),
    the coins in one read, the same outcomes for the same uniforms; for a caller whose passes are
    cheap (a layout on the draft's support) or few, where a device sync costs more than the passes
    saved.
    """
    if every_h:
        return rng.coins_bounded(capped_accept_probs(omega, target_next, draft_next), None)
    return rng.coins_bounded(omega, lambda positions: _accept_probs_at(omega, target_next, draft_next, positions))


def capped_accept_probs(omega: torch.Tensor, target_next: torch.Tensor, draft_next: torch.Tensor) -> torch.Tensor:
    """Every h_t of a scan (shapes as `scan_coins`), capped at omega_t: h_t <= omega_t but for
    rounding, and the min makes eta_t < h_t decide as the lazy scan does, exactly. [m]

    `block_accept_probs`: the values `_accept_probs_at` gives at every position, with no index
    built from a Python list (on CUDA each such index is a copy from the host that waits for
    the device, and the device forms call this twice an iteration)."""
    return torch.minimum(block_accept_probs(omega, target_next, draft_next), omega)


def _accept_probs_at(omega: torch.Tensor, target_next: torch.Tensor, draft_next: torch.Tensor,
                     positions: list[int]) -> torch.Tensor:
    """h_t at the given 0-based positions of a scan. [len(positions)]"""
    last = omega.shape[-1] - 1
    h = omega[positions].clone()  # h_m = omega_m
    inner = [i for i, t in enumerate(positions) if t < last]
    if inner:
        rows = [positions[i] for i in inner]
        mass = residual_mass(target_next[rows], draft_next[rows], omega[rows])
        h[inner] = sub_block_probs(omega[rows], mass)
    return h


def last_success(outcomes: list[bool]) -> int:
    """t* = max{t : coin t succeeded}, 1-based; 0 if none did (GBV's forward scan)."""
    return max((t + 1 for t, ok in enumerate(outcomes) if ok), default=0)


@dataclass(frozen=True)
class BlockScan:
    """One GBV scan of a block of m tokens: its weights, its coins and where it stopped."""

    omega: torch.Tensor  # [m]
    tests: list[SubBlockTest]  # the m coins, in order
    tau: int  # t*, 0..m


def scan_block(
    rng: Randomness,
    omega: torch.Tensor,  # [m]
    target_next: torch.Tensor,  # [m-1, V]
    draft_next: torch.Tensor,  # [m-1, V]
    draft: int = 0,
    start: int = 0,
    every_h: bool = False,
) -> BlockScan:
    """GBV's coins on the m tokens of X^(draft) after its first `start` (`scan_coins`, with
    `every_h`), and t*."""
    outcomes, uniforms, h = scan_coins(rng, omega, target_next, draft_next, every_h)
    tests = [SubBlockTest(draft, start, t + 1, h[t], outcomes[t], uniforms[t]) for t in range(len(outcomes))]
    return BlockScan(omega, tests, last_success(outcomes))


def stop_law(
    omega: torch.Tensor,  # [m]
    tau: int,
    target_rows: torch.Tensor,  # [m+1, V]: q at the nodes after 0..m of the block's tokens
    draft_rows: torch.Tensor,  # [m, V']: p (AS-BV: D) at the same nodes
    expand: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, FinalKind]:
    """The law Y is drawn from when a GBV scan of m tokens stops at tau (docs/algorithms.md §2.3):
    q_{m+1} ("bonus") when tau = m, else the correction r_tau = norm((omega_tau q_{tau+1} -
    p_{tau+1})_+), omega_0 = 1 (the plain SD residual). `expand` puts a draft row kept on a
    compressed layout (V' != V, `support.OnSupport.expand`) back on the target's vocabulary."""
    if tau == omega.shape[-1]:
        return target_rows[tau], "bonus"
    draft = draft_rows[tau] if expand is None else expand(draft_rows[tau])
    return residual(target_rows[tau], draft, omega[tau - 1] if tau > 0 else 1.0), "correction"


def path_weights(target_drafted: torch.Tensor, draft_drafted: torch.Tensor) -> torch.Tensor:
    """omega of a block from q(y_t) and p(y_t) at its m tokens ([m] each): omega_1 = min(q_1 / p_1, 1),
    then GBV's recursion. [m]"""
    q, p = target_drafted, draft_drafted
    return block_weights((q[0] / p[0]).clamp(max=1.0), log_ratios(q[1:], p[1:]))


def scan_weights(inp: VerifyInput, draft: int = 0, start: int = 0) -> torch.Tensor:
    """omega of X^(draft)'s tokens at depths start .. L-1 with p, from its node after `start`
    tokens ([L - start]; start < L). GBV itself scans draft 0 from the root."""
    L = inp.draft_length
    tokens = inp.draft_tokens[draft, start:]
    target, draft_rows = inp.target_probs[draft, start:L], inp.draft_probs[draft, start:]
    return path_weights(token_probs(target, tokens), token_probs(draft_rows, tokens))


def scan_probs(inp: VerifyInput, draft: int = 0, start: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """(omega, h) of that scan, each [L - start], all computed (theory, tests, viewers)."""
    omega = scan_weights(inp, draft, start)
    rows = slice(start + 1, inp.draft_length)  # the nodes after 1 .. m-1 of the block's tokens
    return omega, block_accept_probs(omega, inp.target_probs[draft, rows], inp.draft_probs[draft, rows])


def verify(inp: VerifyInput, rng: Randomness) -> VerifyResult:
    scan = scan_block(rng, scan_weights(inp), inp.target_probs[0, 1:-1], inp.draft_probs[0, 1:])
    final, kind = stop_law(scan.omega, scan.tau, inp.target_probs[0], inp.draft_probs[0])
    return emit(inp, rng, 0, scan.tau, final, kind, scan.tests)


def decide(inp: VerifyInput, generator: torch.Generator) -> torch.Tensor:
    """`verify` on tensors: every h_t computed (no shortcut: no host read to skip one), the
    same coins (eta_t < omega_t and eta_t < h_t, as `scan_coins` decides them), t*, then Y."""
    L = inp.draft_length
    omega = scan_weights(inp)
    uniforms = torch_uniforms(generator, L, omega.device)
    target = inp.target_probs[0]
    # eta_t < min(h_t, omega_t): the capped h of `scan_on_device` decides as eta_t < omega_t and eta_t < h_t
    scan = scan_on_device(omega, target, inp.draft_probs[0], uniforms)
    final = torch.where(scan.tau == L, target[L], scan.correction)
    return decision(inp, 0, scan.tau, final, torch_uniforms(generator, 1, omega.device)[0])


@dataclass(frozen=True)
class ScanOnDevice:
    """A GBV scan decided on the device: its h, t* (0-dim long) and the correction at t*."""

    h: torch.Tensor  # [m], capped as `scan_coins` caps them
    tau: torch.Tensor
    correction: torch.Tensor  # [V] r_tau (`stop_law`'s correction; of no use where tau = m)


def scan_on_device(omega: torch.Tensor, target_rows: torch.Tensor, draft_rows: torch.Tensor,
                   etas: torch.Tensor) -> ScanOnDevice:
    """`scan_block` and `stop_law`'s correction with the coins' uniforms `etas` [m] given, no read:
    every h_t computed and capped, eta_t < h_t, t*. Rows as `stop_law`'s ([m + 1, V], [m, V'])."""
    m = omega.shape[-1]
    h = capped_accept_probs(omega, target_rows[1:m], draft_rows[1:])
    tau = last_success_on_device(etas < h)
    return ScanOnDevice(h, tau, correction_on_device(omega, tau, target_rows, draft_rows))


def last_success_on_device(succeeded: torch.Tensor) -> torch.Tensor:
    """`last_success` of coins decided on the device ([m] bool): t*, a 0-dim long, 0 if none."""
    return (succeeded.long() * torch.arange(1, succeeded.shape[-1] + 1, device=succeeded.device)).max()


def correction_on_device(omega: torch.Tensor, tau: torch.Tensor, target_rows: torch.Tensor,
                         draft_rows: torch.Tensor) -> torch.Tensor:
    """`stop_law`'s correction r_tau at a 0-dim tensor tau, by index and with no host read (shapes
    as `stop_law`'s; a row of no use at tau = m, where the caller takes the bonus)."""
    m = omega.shape[-1]
    weight = torch.where(tau > 0, law_at((tau - 1).clamp(min=0), omega), 1.0)  # omega_0 = 1
    return residual(law_at(tau, target_rows), law_at(tau.clamp(max=m - 1), draft_rows), weight)


def all_fail_from(h: torch.Tensor) -> torch.Tensor:
    """prod_{s>=t} (1 - h_s) for every t: P(no coin from t on succeeds). h: [..., m] -> [..., m]"""
    return torch.flip(torch.cumprod(torch.flip(1.0 - h, [-1]), -1), [-1])


def expected_from_h(h: torch.Tensor) -> torch.Tensor:
    """E[tau | draft] = sum_i [1 - prod_{j>=i} (1 - h_j)] (docs/algorithms.md §2.6). h: [..., m]"""
    return (1.0 - all_fail_from(h)).sum(-1)


def expected_accepted(inp: VerifyInput) -> float:
    return expected_from_h(scan_probs(inp)[1]).item()
