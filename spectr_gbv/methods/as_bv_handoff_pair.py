"""AS-BV+H with two drafts, decided on the device: the rule's one host read an iteration
(above 256 tokens; between 65 and 256 a node's law still reads rho* and beta).

With K = 2 the drafts' trie has at most one node with two candidates: the parting node d*,
the first depth at which the two drafts' tokens differ. Above it both drafts carry one token;
below it each child holds one draft. So phase 1 spends coins only at d* (a node whose
candidates carry one token spends none, `as_bv.select_with_detail`), and AS-BV+H hands off only
where phase 2 stops at d*, to the one draft that lost there (`as_bv_handoff.losers`). The host
knows the trie (the engine read the drafts' tokens to score them), but not the coins.

`verify` therefore lets the coins at d* choose a child on the device, computes that child's
laws from rows taken there by index, and runs phase 2, the hand-off, GBV on the loser's
remaining block and the draw of Y there too. Every branch is computed and the one taken is
picked by index or mask; what the result records is read in one copy.

It spends one block of uniforms in the order in which `as_bv_handoff.verify` asks a
`Randomness` for them where none are handed out ahead: lambda's component draw (where lambda
mixes), seq's two coins (where seq runs), the scan's L coins, the hand-off's coin, the
remaining block's coins, then Y, each at an offset computed on the device. For the same
uniforms both decide the same tokens, tests and final law (tests/test_as_bv_handoff_pair.py),
so this form is exact because that one is (the exact-enumeration tier). On a table of at most
`as_bv_lp.MAX_LP_TOKENS` tokens lambda is HiGHS's, which the device does not reproduce, so the
host path stays there.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..probs import normalize, token_probs
from ..randomness import Randomness, inverse_cdf
from . import as_bv, as_bv_device, as_bv_handoff, as_bv_lp
from .as_bv import FIRST, LEX, SEQ
from .as_bv_host import DraftsOnHost
from .base import SubBlockTest, VerifyInput, VerifyResult, emit, law_at
from .gbv import path_weights, scan_on_device
from .support import OnSupport


def applies(num_drafts: int, vocab_size: int) -> bool:
    """Where `as_bv_handoff.verify` decides on the device, given a stream that hands out uniforms
    ahead: two drafts, on a table whose node laws are the device's (`as_bv_device.on_device`; the
    support layout keeps more than MAX_LP_TOKENS cells)."""
    return num_drafts == 2 and vocab_size > as_bv_lp.MAX_LP_TOKENS


def uniform_budget(draft_length: int) -> int:
    """The most uniforms an iteration spends: phase 1's three (a component, seq's two coins), the
    scan's L, the hand-off's one, the loser's remaining block's at most L - 1, and Y."""
    return 2 * draft_length + 4


@dataclass(frozen=True)
class _Parting:
    """Phase 1's choice at the parting node d*, decided on the device."""

    law: as_bv.NodeLaw
    candidates: torch.Tensor  # [2] long: draft 0's and draft 1's tokens there (the rule's ids)
    chosen: torch.Tensor  # 0-dim long: the selected candidate's place, which is its draft
    component: torch.Tensor  # 0-dim long: LEX, SEQ or FIRST
    seq_won: torch.Tensor  # 0-dim bool: seq ran and accepted a candidate
    seq_place: torch.Tensor  # 0-dim long: that candidate's place (meaningful where seq_won)
    uniforms_used: torch.Tensor  # 0-dim long: 0 to 3


def verify(inp: VerifyInput, small: OnSupport | None, rng: Randomness, drafts: DraftsOnHost,
           uniforms: torch.Tensor) -> VerifyResult:
    """`as_bv_handoff.verify` at K = 2 from `uniforms` [`uniform_budget(L)`], handed out by `rng`
    (which draws nothing more), with one host read of its own (above 256 tokens; between 65 and
    256 every node still reads rho* and beta, `as_bv_device.on_device`). `small`, `drafts`:
    `as_bv_host.on_support_with_drafts(inp, ...)`."""
    L = inp.draft_length
    work = inp if small is None else small.inp
    tokens = drafts.tokens
    depth = next((d for d in range(L) if tokens[0][d] != tokens[1][d]), None)
    laws, parting = _phase_one(work, drafts, depth, uniforms)
    device = laws.device
    zero = torch.zeros((), dtype=torch.long, device=device)
    c = zero if parting is None else parting.chosen
    offset = zero if parting is None else parting.uniforms_used

    # Phase 2 on the selected draft c: AS-BV's GBV with D (`as_bv_handoff._scan_and_draw`).
    target_c = law_at(c, work.target_probs)  # [L + 1, V']
    omega = as_bv.phase_two_weights_of(target_c, law_at(c, work.draft_tokens), laws)
    etas = uniforms.index_select(0, offset + torch.arange(L, device=device))
    scan = scan_on_device(omega, target_c, laws, etas)
    h, tau, correction = scan.h, scan.tau, scan.correction  # r at the stop, on the rule's layout
    at = offset + L  # the next uniform
    # Where Y comes from: the bonus row, or a row on the rule's layout lifted with q of its node.
    ends_in, ends_at, bonus, row = c, tau, tau == L, correction
    empty = torch.zeros(0, dtype=torch.float64, device=device)
    accepted, accept, hand_eta, rest_tau, rest_etas, rest_h = zero.bool(), empty, empty, zero, empty, empty
    start = L if depth is None else depth + 1  # where the loser's remaining block starts
    if parting is not None:
        # The hand-off, where phase 2 stopped at d*: the loser proposes its token z to r with its
        # law G given the selection (`as_bv_handoff.loser_law`), by recursive rejection sampling.
        loser = 1 - c
        z = parting.candidates.index_select(0, loser.reshape(1))
        accept, rejected = as_bv_handoff.rrs_step_on_device(correction, _loser_law(parting), z)
        hand_eta = uniforms.index_select(0, at.reshape(1))
        handoff = tau == depth
        accepted = handoff & (hand_eta < accept)[0]
        # Accepted: GBV with p on the rest of the loser's block.
        rest_row, rest_tau, rest_etas, rest_h = _gbv_remainder(work, loser, start, uniforms, at + 1)
        ends_in = torch.where(accepted, loser, c)
        ends_at = torch.where(accepted, start + rest_tau, tau)
        bonus = torch.where(accepted, rest_tau == L - start, bonus)
        row = torch.where(accepted, rest_row, torch.where(handoff, rejected, correction))
        at = at + torch.where(handoff, 1 + torch.where(accepted, L - start, 0), 0)
    if small is not None:  # Y may be any token: the rest cell's mass spread back over the tokens it stands for
        row = small.lift(row, _row(inp.target_probs, ends_in, ends_at))
    final = torch.where(bonus, _row(inp.target_probs, ends_in, L), row)
    y = inverse_cdf(final, uniforms.index_select(0, at.reshape(1))[0])
    decided = torch.stack([c, tau, accepted.long(), rest_tau, y]).to(torch.float64)
    values = torch.cat([decided, etas, h, accept, hand_eta, rest_etas, rest_h]).tolist()  # the one read

    c, tau, accepted, rest_tau, y = (int(v) for v in values[:5])
    etas, hs, rest = values[5 : 5 + L], values[5 + L : 5 + 2 * L], values[5 + 2 * L :]
    tests = [SubBlockTest(c, 0, t + 1, hs[t], etas[t] < hs[t], etas[t]) for t in range(L)]
    if depth is None or tau != depth:  # no loser at the stop: AS-BV's end
        return emit(inp, rng, c, tau, final, "bonus" if tau == L else "correction", tests, drafts.emitted, y)
    k, m = 1 - c, L - start
    tests.append(SubBlockTest(k, tau, 1, rest[0], bool(accepted), rest[1]))
    if not accepted:
        return emit(inp, rng, c, tau, final, "correction", tests, drafts.emitted, y)
    rest_etas, rest_h = rest[2 : 2 + m], rest[2 + m :]
    tests += [SubBlockTest(k, start, t + 1, rest_h[t], rest_etas[t] < rest_h[t], rest_etas[t]) for t in range(m)]
    return emit(inp, rng, k, start + rest_tau, final, "bonus" if rest_tau == m else "correction", tests, drafts.emitted, y)


def _phase_one(work: VerifyInput, drafts: DraftsOnHost, depth: int | None,
               uniforms: torch.Tensor) -> tuple[torch.Tensor, _Parting | None]:
    """Phase 1 (`as_bv.select_block`): D along the selected path [L, V'], and the choice at d*
    (None where the drafts never part). Below d* the path is the chosen draft's, known only on
    the device: its rows and tokens are taken there by index."""
    L = work.draft_length
    tokens = drafts.tokens
    rows, alive_law, omega = [], {2: 1.0}, 1.0
    for d in range(L if depth is None else depth):  # both drafts carry one token: no coin
        y = tokens[0][d]
        target = work.target_probs[0, d]
        law = as_bv.node_law(target, work.draft_probs[0, d], alive_law, omega, [y, y])
        rows.append(law.selected)
        if d + 1 < L:
            alive_law, omega = as_bv.descend(law, target, y, omega, drafts.draft_at[0][d][0])
    if depth is None:
        return torch.stack(rows), None
    pair = [tokens[0][depth], tokens[1][depth]]
    target = work.target_probs[0, depth]
    law = as_bv.node_law(target, work.draft_probs[0, depth], alive_law, omega, pair)
    rows.append(law.selected)
    parting = _select(law, work.draft_tokens[:, depth], uniforms)
    c = parting.chosen
    chosen_tokens = law_at(c, work.draft_tokens)
    for d in range(depth + 1, L):  # one draft alive below d*: no coin
        # y as a [1] index: taken on the device, never read
        alive_law, omega = as_bv.descend(law, target, chosen_tokens[d - 1 : d], omega)
        target = _row(work.target_probs, c, d)
        law = as_bv.node_law(target, _row(work.draft_probs, c, d), alive_law, omega)
        rows.append(law.selected)
    return torch.stack(rows), parting


def _select(law: as_bv.NodeLaw, candidates: torch.Tensor, uniforms: torch.Tensor) -> _Parting:
    """`as_bv.select_with_detail` at d* (two distinct candidates) on the device: a component
    from lambda[2] (a uniform only where it mixes), seq's coins on both candidates, lex's top."""
    device = candidates.device
    weights = law.weights_on_device.get(2, as_bv_device.only_first(device))  # what `law.mixture(2)` reads
    mixes = (weights > 0).sum() > 1
    component = torch.where(mixes, inverse_cdf(weights, uniforms[0]), weights.argmax())
    used = mixes.long()
    is_seq = component == SEQ
    seq_etas = uniforms.index_select(0, used + torch.arange(2, device=device))
    passed = seq_etas < law.components[2].accept.index_select(0, candidates)
    seq_won = is_seq & passed.any()
    seq_place = passed.long().argmax()  # the first candidate accepted
    chosen = torch.where(component == FIRST, 0, torch.where(seq_won, seq_place, law.order.top_on_device(candidates)))
    return _Parting(law, candidates, chosen, component, seq_won, seq_place, used + torch.where(is_seq, 2, 0))


def _loser_law(parting: _Parting) -> torch.Tensor:
    """`as_bv_handoff.loser_law` of the candidate that lost at d*, on the device. [V']"""
    law, loser = parting.law, 1 - parting.chosen
    y = parting.candidates.index_select(0, parting.chosen.reshape(1))
    seq_lost = (parting.component == SEQ) & ~parting.seq_won  # seq rejected both, then lex over the rejected
    # seq's accepted candidate had the ones before it tested and rejected
    use_rejected = seq_lost | (parting.seq_won & (loser < parting.seq_place))
    base = torch.where(use_rejected, law.components[2].rejected, law.draft)
    below_only = (parting.component == LEX) | seq_lost
    weights = torch.where(below_only, base * law.order.below_mask_on_device(y), base).index_fill(0, y, 0.0)
    return normalize(weights, fallback=weights)


def _gbv_remainder(work: VerifyInput, draft: torch.Tensor, start: int, uniforms: torch.Tensor,
                   at: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """`as_bv_handoff._gbv_remainder` on the device: GBV with p on draft `draft`'s tokens from
    `start`, on the rule's layout, its coins at uniforms[at:]: (the correction there [V'], of no
    use where t* = m, t*, the etas [m], the h [m]). m = 0: nothing to scan, Y is the bonus."""
    m = work.draft_length - start
    if m == 0:
        empty = torch.zeros(0, dtype=torch.float64, device=draft.device)
        return work.target_probs[0, 0], torch.zeros((), dtype=torch.long, device=draft.device), empty, empty
    target = _rows(work.target_probs, draft, start, work.draft_length + 1)  # [m + 1, V']
    proposal = _rows(work.draft_probs, draft, start, work.draft_length)  # [m, V']
    tokens = law_at(draft, work.draft_tokens)[start:]
    omega = path_weights(token_probs(target[:m], tokens), token_probs(proposal, tokens))
    etas = uniforms.index_select(0, at + torch.arange(m, device=draft.device))
    scan = scan_on_device(omega, target, proposal, etas)
    return scan.correction, scan.tau, etas, scan.h


def _row(probs: torch.Tensor, k: torch.Tensor, d: int | torch.Tensor) -> torch.Tensor:
    """probs[k, d] ([K, R, V]) at a 0-dim k (and d), by index: no read, no copy of other rows."""
    return probs.flatten(0, 1).index_select(0, (k * probs.shape[1] + d).reshape(1))[0]


def _rows(probs: torch.Tensor, k: torch.Tensor, start: int, stop: int) -> torch.Tensor:
    """probs[k, start:stop] at a 0-dim k. [stop - start, V]"""
    return probs.flatten(0, 1).index_select(0, k * probs.shape[1] + torch.arange(start, stop, device=k.device))
