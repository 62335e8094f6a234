"""AS-BV with hand-off (AS-BV+H), exact: AS-BV's phases, then the GBV residual at the stop
node is handed to the drafts still alive there (recursive rejection sampling with their known
conditional laws), and an accepted one's remaining block is verified by plain GBV.

The rule and its proof of exactness: docs/proofs/as_bv_handoff.md, summarised in docs/algorithms.md §7.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..probs import normalize
from ..randomness import Randomness, inverse_cdf
from . import as_bv, as_bv_handoff_pair, as_bv_host
from .as_bv import FIRST, LEX, ONLY_FIRST, SEQ, NodeChoice, NodeLaw
from .as_bv_fast import on_support
from .as_bv_host import on_support_with_drafts
from .base import SubBlockTest, VerifyInput, VerifyResult, emit, law_at
from .gbv import (BlockScan, expected_from_h, last_success, scan_block, scan_on_device, scan_probs, scan_weights,
                  stop_law)
from .support import OnSupport


# ------------------------------------------------------------------ the losers' conditional laws


def loser_law(law: NodeLaw, n: int, place: int, y: int, component: int, accepted_place: int | None) -> torch.Tensor:
    """G: the law of the candidate at `place` (0-based among the n) given that the selection at
    this node chose y by `component` (seq: accepted the candidate at `accepted_place`, or None
    for its lex fallback) and that this candidate's token is not y. [V]"""
    if component == FIRST or n not in law.components:
        base, below_only = law.draft, False
    elif component == LEX:
        base, below_only = law.draft, True
    elif accepted_place is None:  # seq rejected all n, then lex over the rejected
        base, below_only = law.components[n].rejected, True
    else:  # seq accepted the candidate at accepted_place: those before it were tested and rejected
        base, below_only = (law.components[n].rejected if place < accepted_place else law.draft), False
    weights = base * law.order.below_mask(y) if below_only else base.clone()
    weights[y] = 0.0
    return normalize(weights, fallback=weights)


def losers(node: NodeChoice) -> list[tuple[int, int, torch.Tensor]]:
    """(draft, its token z, G) for every candidate at the node whose token is not y, in draft order."""
    n, y = len(node.tokens), node.selected
    return [(k, t, loser_law(node.law, n, place, y, node.component, node.accepted_place))
            for place, (k, t) in enumerate(zip(node.alive, node.tokens)) if t != y]


def rrs_step(target: torch.Tensor, proposal: torch.Tensor, token: int) -> tuple[float, torch.Tensor]:
    """Recursive rejection sampling, one proposal: (P(accept token), the target if it is rejected)."""
    accept, rejected = rrs_step_on_device(target, proposal, token)
    return float(accept), rejected  # one host read


def rrs_step_on_device(target: torch.Tensor, proposal: torch.Tensor,
                       token: int | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`rrs_step` with P(accept) a tensor (the laws' float64), min(1, t / g) (0 where g = 0):
    the same IEEE quotient, so the same bits, without a read (`verify` reads it with its coin).
    `token`: an int, or a [1] long tensor on the device (P(accept) is then [1])."""
    g, t = proposal[token], target[token]
    accept = torch.where(g > 0, torch.clamp(t / torch.where(g > 0, g, 1.0), max=1.0), 0.0)
    return accept, normalize(torch.relu(target - proposal), fallback=target)


# ------------------------------------------------------------------------- GBV on a remainder


def remainder_probs(inp: VerifyInput, draft: int, start: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(omega, h) of GBV with p on the rest of `draft` after its first `start` tokens, every h
    computed (the theory line). Empty when start = L."""
    if start == inp.draft_length:
        empty = torch.zeros(0, dtype=torch.float64, device=inp.draft_tokens.device)
        return empty, empty
    return scan_probs(inp, draft, start)


def _gbv_remainder(
    inp: VerifyInput, small: OnSupport | None, rng: Randomness, draft: int, start: int, tests: list[SubBlockTest],
    drafted: list[list[int]],
) -> VerifyResult:
    """GBV on the rest of `draft` after its first `start` tokens, to the end of the iteration
    (`drafted`: inp's draft tokens on the host). On the rule's layout where it has one (`small`):
    the draft proposes no token off its support, so GBV there is the same rule, and a correction
    is lifted back to the full vocabulary as phase 2's is."""
    L = inp.draft_length
    if start == L:
        return emit(inp, rng, draft, L, inp.target_probs[draft, L], "bonus", tests, drafted)
    work = inp if small is None else small.inp
    omega = scan_weights(work, draft, start)
    rows = slice(start + 1, L)
    scan = scan_block(rng, omega, work.target_probs[draft, rows], work.draft_probs[draft, rows], draft, start, every_h=True)
    tests += scan.tests
    final, kind = stop_law(omega, scan.tau, work.target_probs[draft, start:], work.draft_probs[draft, start:])
    if kind == "bonus":  # on the full vocabulary
        final = inp.target_probs[draft, L]
    elif small is not None:
        final = small.lift(final, inp.target_probs[draft, start + scan.tau])
    return emit(inp, rng, draft, start + scan.tau, final, kind, tests, drafted)


# ----------------------------------------------------------------------------------- verify


def prefetch(draft_tokens: torch.Tensor, draft_probs: torch.Tensor, rng: Randomness | None) -> torch.Tensor:
    """`as_bv_host.prefetch`, with no uniforms for phase 1 where the rule decides it on the
    device (`as_bv_handoff_pair`: its coins come from the block it draws itself)."""
    pair = as_bv_handoff_pair.applies(draft_tokens.shape[0], draft_probs.shape[-1])
    return as_bv_host.prefetch(draft_tokens, draft_probs, None if pair else rng)


def verify(inp: VerifyInput, rng: Randomness) -> VerifyResult:
    """Host reads: the drafts with the size of their support and phase 1's uniforms in one copy
    (`as_bv_host.on_support_with_drafts`; none where the engine read them with the drafts'
    tokens, `VerifyInput.prefetched`), then at K = 2 on a large table one more
    (`as_bv_handoff_pair`, where `rng` hands out uniforms ahead); otherwise a node's own where a
    coin must decide there (`as_bv.NodeLaw.mixture`; on tables of at most 64 tokens, a busy
    node's few), then `finish`'s."""
    pair = as_bv_handoff_pair.applies(inp.num_drafts, inp.vocab_size)
    # as AS-BV: the draft's support plus one cell for the rest
    small, drafts = on_support_with_drafts(inp, rng, phase_one_ahead=not pair)
    if pair:
        uniforms = rng.uniform_block(as_bv_handoff_pair.uniform_budget(inp.draft_length), inp.draft_tokens.device)
        if uniforms is not None:
            return as_bv_handoff_pair.verify(inp, small, rng, drafts, uniforms)
    work = inp if small is None else small.inp
    selection = as_bv.select_block(work, rng, drafts)  # phases 1 and 2 are AS-BV's, coin for coin
    return finish(inp, small, rng, selection, drafts.emitted)


def finish(inp: VerifyInput, small: OnSupport | None, rng: Randomness, selection: as_bv.Selection,
           drafted: list[list[int]]) -> VerifyResult:
    """After phase 1: AS-BV's phase 2 on the selected block, the hand-off where it stopped at a
    node with losers, and Y (`drafted`: inp's draft tokens on the host).

    Host reads: the scan's one (`gbv.scan_coins`), which where `rng` hands out uniforms ahead
    also brings Y, drawn on the device from the stop's law (`_scan_and_draw`); then, only where
    the hand-off runs, one per loser's test and one for Y (drawn again: the first draw's uniform is
    discarded, which leaves the law of everything after it unchanged)."""
    L = inp.draft_length
    work = inp if small is None else small.inp
    drawn = _scan_and_draw(inp, small, rng, selection)
    scan = as_bv.verify_block(work, rng, selection) if drawn is None else drawn.scan
    chosen, tau, tests = selection.chosen, scan.tau, scan.tests
    if tau == L:  # AS-BV's bonus, on the full vocabulary
        token = None if drawn is None else drawn.token
        return emit(inp, rng, chosen, L, inp.target_probs[chosen, L], "bonus", tests, drafted, token)
    handing_off = losers(selection.nodes[tau])
    if drawn is not None and not handing_off:  # no loser at the stop: Y is the draw made with the scan
        return emit(inp, rng, chosen, tau, drawn.final, "correction", tests, drafted, drawn.token)
    target, _ = stop_law(scan.omega, tau, work.target_probs[chosen], selection.laws)  # AS-BV's correction law r
    for k, z, proposal in handing_off:
        accept, rejected_target = rrs_step_on_device(target, proposal, z)
        (accepted,), (uniform,), (accept,) = rng.coins_bounded(accept.reshape(1), None)  # with its probability: one read
        tests.append(SubBlockTest(k, tau, 1, accept, accepted, uniform))
        if accepted:  # z is an accepted draft token; GBV on the rest of draft k
            return _gbv_remainder(inp, small, rng, k, tau + 1, tests, drafted)
        target = rejected_target
    if small is not None:  # Y may be any token: the rest cell's mass back on the tokens it stands for
        target = small.lift(target, inp.target_probs[chosen, tau])
    return emit(inp, rng, chosen, tau, target, "correction", tests, drafted)


@dataclass(frozen=True)
class ScanAndDraw:
    """Phase 2's scan with Y drawn, on the device, from the law at its stop as if no hand-off followed."""

    scan: BlockScan
    final: torch.Tensor  # [V] that law: the bonus row at tau = L, else AS-BV's residual on the full vocabulary
    token: int  # Y drawn from it


def _scan_and_draw(inp: VerifyInput, small: OnSupport | None, rng: Randomness,
                   selection: as_bv.Selection) -> ScanAndDraw | None:
    """`as_bv.verify_block`'s coins from L uniforms handed out ahead, decided on the device (eta_t
    < h_t, h_t every one computed and capped as `gbv.scan_coins` does), tau*, and Y drawn from the
    stop's law with the next uniform, all read in one copy. None where `rng` hands out no uniforms
    ahead (exact enumeration, scripted uniforms): the scan then asks for its coins."""
    L, chosen, laws = inp.draft_length, selection.chosen, selection.laws
    work = inp if small is None else small.inp
    device = laws.device
    uniforms = rng.uniform_block(L + 1, device)
    if uniforms is None:
        return None
    omega = as_bv.phase_two_weights(work, chosen, laws)
    scan = scan_on_device(omega, work.target_probs[chosen], laws, uniforms[:L])
    h, tau, correction = scan.h, scan.tau, scan.correction  # the stop's law, chosen by index
    if small is not None:  # then lifted back to the full vocabulary
        correction = small.lift(correction, law_at(tau, inp.target_probs[chosen]))
    final = torch.where(tau == L, inp.target_probs[chosen, L], correction)
    token = inverse_cdf(final, uniforms[L])
    values = torch.cat([uniforms[:L], h, token.to(torch.float64).reshape(1)]).tolist()  # the one read
    etas, hs, y = values[:L], values[L : 2 * L], int(values[2 * L])
    outcomes = [eta < prob for eta, prob in zip(etas, hs)]
    tests = [SubBlockTest(chosen, 0, t + 1, hs[t], outcomes[t], etas[t]) for t in range(L)]
    return ScanAndDraw(BlockScan(omega, tests, last_success(outcomes)), final, y)


# ------------------------------------------------------------------------------ theory line


def selection_outcomes(law: NodeLaw, tokens: list[int]) -> list[tuple[float, int, int, int | None]]:
    """Every way `select_with_detail` can end at this node: (probability, y, component, seq's place)."""
    if len(set(tokens)) == 1:  # one token among the candidates: no coin is spent
        return [(1.0, tokens[0], FIRST, None)]
    lex, seq, first = law.mixture(len(tokens))
    out = []
    if first > 0:
        out.append((first, tokens[0], FIRST, None))
    if lex > 0:
        out.append((lex, law.order.top(tokens), LEX, None))
    if seq > 0:
        reach = seq
        for place, a in enumerate(law.components[len(tokens)].accept[tokens].tolist()):
            out.append((reach * a, tokens[place], SEQ, place))
            reach *= 1.0 - a
        out.append((reach, law.order.top(tokens), SEQ, None))
    return [o for o in out if o[0] > 0]


def _handoff_expected(inp: VerifyInput, target: torch.Tensor, node: NodeChoice, tau: int) -> float:
    """E[accepted tokens beyond the stop at depth tau | the stop]: sum_j P(loser j accepted)
    (1 + GBV's E[tau] on the rest of its block)."""
    total, reach = 0.0, 1.0
    for k, z, proposal in losers(node):
        accept, target = rrs_step(target, proposal, z)
        if reach * accept > 0:
            h = remainder_probs(inp, k, tau + 1)[1]
            total += reach * accept * (1.0 + (expected_from_h(h).item() if h.numel() else 0.0))
        reach *= 1.0 - accept
    return total


def expected_accepted(inp: VerifyInput) -> float:
    """E[tau | drafts]: over the ways phase 1 can select (`selection_outcomes`), GBV's stop law on
    the selected block, and at each stop before L the hand-off's expected gain."""
    L = inp.draft_length
    small = on_support(inp)
    inp = inp if small is None else small.inp  # a sum over the draft's tokens: the same number

    def expected(depth: int, alive: list[int], alive_law: dict[int, float], omega: float, rows: list, nodes: list) -> float:
        if depth == L:
            chosen = alive[0]
            selected = torch.stack(rows)
            omega_path, h = as_bv.phase_two_probs(inp, chosen, selected)
            hs = h.tolist()
            value = 0.0
            for tau in range(L + 1):  # P(tau* = tau) = h_tau prod_{s > tau} (1 - h_s), h_0 = 1
                prob = hs[tau - 1] if tau > 0 else 1.0
                for s in range(tau, L):
                    prob *= 1.0 - hs[s]
                if prob <= 0:
                    continue
                gain = 0.0
                if tau < L:
                    stop_residual = stop_law(omega_path, tau, inp.target_probs[chosen], selected)[0]
                    gain = sum(share * _handoff_expected(inp, stop_residual, node, tau) for share, node in nodes[tau])
                value += prob * (tau + gain)
            return value
        target = inp.target_probs[alive[0], depth]
        law = as_bv.node_law(target, inp.draft_probs[alive[0], depth], alive_law, omega)
        tokens = inp.draft_tokens[alive, depth].tolist()
        # Deeper nodes depend on y only; how y was selected matters only for the losers here,
        # if GBV stops here. So branch on y, keeping each way of selecting it with its share.
        ways: dict[int, list] = {}
        for prob, y, component, accepted_place in selection_outcomes(law, tokens):
            ways.setdefault(y, []).append((prob, NodeChoice(law, alive, tokens, y, component, accepted_place)))
        total = 0.0
        for y, group in ways.items():
            p_y = sum(prob for prob, _ in group)
            child = [k for k, t in zip(alive, tokens) if t == y]
            total += p_y * expected(depth + 1, child, as_bv.child_alive_law(law, y),
                                    as_bv.next_omega(omega, float(target[y]), float(law.selected[y])),
                                    rows + [law.selected], nodes + [[(prob / p_y, node) for prob, node in group]])
        return total

    return expected(0, list(range(inp.num_drafts)), {inp.num_drafts: 1.0}, 1.0, [], [])
