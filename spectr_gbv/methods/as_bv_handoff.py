"""AS-BV with hand-off (the open lever of ALGORITHMS.md 4.9), exact.

AS-BV (`as_bv`) selects one draft and runs GBV on it with the selected block's law D. When
GBV stops at node u = y_{1:tau} (tau < L), AS-BV draws the correction Y from the GBV residual
r = norm((omega_tau q(. | u) - D_u)_+) and the iteration ends. Other drafts may still be alive
at u: their first tau tokens are u, but at depth tau + 1 they carry a token other than the
selected y_{tau+1}. Here they get the residual handed to them, as SpecTr-GBV★ hands a failed
attempt's residual to the next draft:

1. Phase 1 and phase 2 are AS-BV's, coin for coin (the same `node_law`, `select`, D, h).
2. At the stop node u, the *losers* there (alive at u, next token z_j != y_{tau+1}, in draft
   order) propose their tokens to r by recursive rejection sampling (SpecInfer's rule with
   non-identical proposals): loser j is accepted with min(1, R(z_j) / G_j(z_j)), else
   R <- norm((R - G_j)_+); R starts at r. If none is accepted, Y ~ R and the iteration ends
   as in AS-BV.
3. If loser j is accepted, Y = z_j is an accepted draft token, and the rest of draft j's
   block (depths tau + 2 .. L, never looked at) is verified by plain GBV against q with p.

    symbols                                      here
    u, tau, y_{tau+1}                            stop node (depth), tau, `selected_token`
    losers at u, z_j                             `losers(...)`: (draft, token, G_j)
    G_j: z_j's law given the selection at u      `loser_law`
    R (the hand-off target)                      `handoff_target`, updated by `rrs_step`

*Why it is exact.* (a) Given everything phase 1 and 2 did, the correction must be a draw from
r (GBV's proof, 3.3, with D for p); AS-BV draws it directly. (b) A loser's next token is
independent of everything after node u given what the selection at u did (which component
ran, and for seq which candidate it accepted): deeper nodes only look at drafts carrying
y_{tau+1}, and the GBV coins are fresh. Its conditional law G_j is therefore known in closed
form (`loser_law`): with "first", lex, and seq, candidates are i.i.d. p(. | u) before the
selection looks; "first" keeps t_1, so a loser is p conditioned on != y; lex keeps the
maximum, so a loser is p conditioned on being below y in the strict order; seq tests
t_1, t_2, ... in turn, so a loser tested and rejected before the accepted one is r_seq
(Components.rejected) conditioned on != y, an untested one p conditioned on != y, and when seq
rejected all of them and fell back to lex, a loser is r_seq conditioned on being below y.
Losers are independent of each other given that. (c) Recursive rejection sampling with
independent proposals of known laws returns a draw from its target, here r: so Y ~ r, as (a)
asks. (d) Given Y = z_j from loser j, loser j's tokens after z_j are an untouched draw from p
(never looked at by the selection, the coins or the hand-off), so GBV on them with p emits
the target's continuation of u + z_j (3.3). Together, the emitted tokens, continued by the
target, have the target's law. Reductions: K = 1 has no losers, so it is AS-BV, which is GBV.
On a draft head narrower than the vocabulary it runs on AS-BV's support layout
(`spectr_gbv.methods.support`); a correction drawn from the hand-off target is lifted back
to the full vocabulary (`OnSupport.lift`: off the draft's support every residual here is
proportional to q). *Theory line*: AS-BV's sum over selectable paths, now also over how each node selected, plus
at each stop the hand-off's acceptance probabilities times 1 + GBV's E[tau] on the remainder.
"""

from __future__ import annotations

import torch

from ..probs import normalize, residual, token_probs
from ..randomness import Randomness
from . import as_bv
from .as_bv import FIRST, LEX, ONLY_FIRST, SEQ, NodeChoice, NodeLaw
from .base import SubBlockTest, VerifyInput, VerifyResult
from .gbv import block_accept_probs, block_weights, expected_from_h, last_success, log_ratios, scan_coins


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
    g = float(proposal[token])
    accept = min(1.0, float(target[token]) / g) if g > 0 else 0.0
    return accept, normalize(torch.relu(target - proposal), fallback=target)


# ------------------------------------------------------------------------- GBV on a remainder


def remainder_weights(inp: VerifyInput, draft: int, start: int) -> torch.Tensor:
    """GBV's omega with p on draft `draft`'s tokens at depths start .. L-1 (0-based), from its
    node after `start` tokens ([L - start]; start < L)."""
    L = inp.draft_length
    tokens = inp.draft_tokens[draft, start:]
    q, p = token_probs(inp.target_probs[draft, start:L], tokens), token_probs(inp.draft_probs[draft, start:], tokens)
    return block_weights((q[0] / p[0]).clamp(max=1.0), log_ratios(q[1:], p[1:]))


def remainder_probs(inp: VerifyInput, draft: int, start: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(omega, h) of that GBV, every h computed (the theory line). Empty when start = L."""
    L = inp.draft_length
    if start == L:
        empty = torch.zeros(0, dtype=torch.float64, device=inp.draft_tokens.device)
        return empty, empty
    omega = remainder_weights(inp, draft, start)
    return omega, block_accept_probs(omega, inp.target_probs[draft, start + 1 : L], inp.draft_probs[draft, start + 1 :])


def _gbv_remainder(inp: VerifyInput, rng: Randomness, draft: int, start: int, tests: list[SubBlockTest]):
    """GBV on the rest of `draft` after its first `start` tokens: (accepted count, final distribution, kind)."""
    L = inp.draft_length
    if start == L:
        return 0, inp.target_probs[draft, L], "bonus"
    omega = remainder_weights(inp, draft, start)
    outcomes, uniforms, h = scan_coins(rng, omega, inp.target_probs[draft, start + 1 : L], inp.draft_probs[draft, start + 1 :])
    tests += [SubBlockTest(draft, start, t + 1, h[t], outcomes[t], uniforms[t]) for t in range(L - start)]
    extra = last_success(outcomes)
    if extra == L - start:
        return extra, inp.target_probs[draft, L], "bonus"
    weight = omega[extra - 1] if extra > 0 else 1.0
    return extra, residual(inp.target_probs[draft, start + extra], inp.draft_probs[draft, start + extra], weight), "correction"


# ----------------------------------------------------------------------------------- verify


def verify(inp: VerifyInput, rng: Randomness) -> VerifyResult:
    L = inp.draft_length
    small = as_bv._on_support(inp)  # as AS-BV: the draft's support plus one cell for the rest
    work = inp if small is None else small.inp
    selection = as_bv.select_block(work, rng)  # phases 1 and 2 are AS-BV's, coin for coin
    verdict = as_bv.verify_block(work, rng, selection)
    chosen, tau, tests = selection.chosen, verdict.tau, verdict.tests
    if tau == L:
        final = inp.target_probs[chosen, L]
        return VerifyResult(inp.draft_tokens[chosen].tolist(), rng.sample(final), "bonus", final, L, chosen, tests)
    weight = verdict.omega[tau - 1] if tau > 0 else 1.0
    target = residual(work.target_probs[chosen, tau], selection.laws[tau], weight)  # AS-BV's correction law r
    for k, z, proposal in losers(selection.nodes[tau]):
        accept, rejected_target = rrs_step(target, proposal, z)
        (accepted,), (uniform,) = rng.coins(torch.tensor([accept], dtype=torch.float64))
        tests.append(SubBlockTest(k, tau, 1, accept, accepted, uniform))
        if accepted:  # z is an accepted draft token; GBV on the rest of draft k (full vocabulary: a few passes)
            extra, final, kind = _gbv_remainder(inp, rng, k, tau + 1, tests)
            depth = tau + 1 + extra
            return VerifyResult(inp.draft_tokens[k, :depth].tolist(), rng.sample(final), kind, final, depth, k, tests)
        target = rejected_target
    if small is not None:  # Y may be any token: the rest cell's mass back on the tokens it stands for
        target = small.lift(target, inp.target_probs[chosen, tau])
    return VerifyResult(inp.draft_tokens[chosen, :tau].tolist(), rng.sample(target), "correction", target, tau,
                        chosen if tau > 0 else None, tests)


# ------------------------------------------------------------------------------ theory line


def selection_outcomes(law: NodeLaw, tokens: list[int]) -> list[tuple[float, int, int, int | None]]:
    """Every way `select_with_detail` can end at this node: (probability, y, component, seq's place)."""
    if len(tokens) == 1:
        return [(1.0, tokens[0], FIRST, None)]
    lex, seq, first = law.mixtures.get(len(tokens), ONLY_FIRST)
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
    small = as_bv._on_support(inp)
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
                    weight = omega_path[tau - 1] if tau > 0 else 1.0
                    stop_residual = residual(inp.target_probs[chosen, tau], selected[tau], weight)
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
