"""AS-BV, adaptive select-then-block-verify (docs/algorithms.md §6.4), exact.

Every exact K-draft rule is bounded by "select one draft, then run GBV with the selected
draft's exact law" (the block canonical decomposition, docs/algorithms.md §6.1). AS-BV is
such a rule:

* Phase 1 (`select_block`) walks down the trie of the K drafts, one token per level. At
  node u it picks one of the alive drafts' next tokens (alive = drafts whose prefix is the
  selected u) with a mixture of three token-level selections, lex, seq and first, whose
  joint laws T_r[n](x, c) are known in closed form. It tracks pi, the law of the alive
  count given the selected prefix, so the selected block's law D = prod_u D_u is known
  exactly.
* Phase 2 (`verify_block`) is plain GBV (docs/algorithms.md §2.3) on the selected block
  with D in place of p; it ends as GBV does (`gbv.stop_law`).

    paper (docs/algorithms.md §6.4)             here
    u, d = |u|                                  node (target/draft rows at depth d)
    A, n = |A|                                  alive drafts, num_alive
    pi(n)                                       alive_law: {n: P(n alive | selected prefix u)}
    omega (phase 1)                             omega: GBV weight of the selected prefix under D
    x > x' (q/p, ties by larger id)             as_bv_fast.NodeOrder (head, top, below)
    G_<(x), R_<(x)                              below_draft, as_bv_laws.Components.below_rejected
    rho*, a(x), beta, r(x)                      spectr.optimal_rho, Components.accept / beta / rejected
    lex, seq, first                             LEX, SEQ, FIRST (this order everywhere, also in lambda)
    T_r[n](x, c)                                as_bv_laws.joint_at(...)
    s_r[n](x) = sum_c T_r[n](x, c)              Components.marginals [3, V]
    lambda[n]                                   NodeLaw.mixture(n), from as_bv_lp (HiGHS, or a vertex search)
    D_u                                         as_bv_laws.NodeLaw.selected
    omega_i, S_i, h_i, tau (phase 2)            gbv.path_weights / block_accept_probs / scan_block

One strict order (ratio q/p, ties broken by the larger token id) is used both to select
and in the laws: an inconsistent tie-break is biased (TV 0.04-0.07, docs/algorithms.md §6.3).

Deviations from paper, none of which costs exactness (any deterministic lambda and any fixed
strict order keep the rule exact, since they depend only on the selected path):
* lambda is the exact LP behind the golden values of docs/algorithms.md §6.7, solved by
  HiGHS, not a fixed grid; on real vocabularies a reduced LP (`as_bv_lp`);
* above ORDER_HEAD tokens the order ranks only the likeliest proposals by ratio, and from
  SUPPORT_FROM_VOCAB tokens on both phases run on the draft's support plus one rest cell
  (`as_bv_fast`; the final token is still drawn on the full vocabulary);
* an alive count of negligible posterior is served by "first" (`node_law`).
On tables of at most 64 tokens the order and the LP are those of docs/algorithms.md §6.4;
the last applies at every size (posterior below 1e-6) and leaves every golden value
unchanged.

Here: the rule, phase 1's walk down the trie and phase 2. The laws at one node are
`as_bv_laws` (host form: small tables, HiGHS's LP, the golden values' bits) and `as_bv_device`
(device form: a real vocabulary, no host read); `node_law` and `child_alive_law` pick one. Both
forms remain because each serves its table size; tests/test_as_bv.py
`test_the_device_joint_laws_are_the_host_ones` and tests/test_as_bv_reads.py
`test_phase_ones_host_values_are_the_values_it_used_to_read` tie them.

Phase 1 spends coins only where a choice is random (the component draw, seq's tests), so
at K = 1 AS-BV draws exactly GBV's uniforms and returns GBV's outcomes.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import torch

from ..probs import token_probs
from ..randomness import HostUniforms, Randomness
from ..replays import remembered
from .as_bv_device import child_alive_law_on_device, next_omega_on_device, node_law_on_device, on_device
from .as_bv_fast import on_support
from .as_bv_host import DraftsOnHost, on_support_with_drafts, read_drafts
from .as_bv_laws import FIRST, ONLY_FIRST, SEQ, NodeLaw, child_alive_law_on_host, next_omega, node_law_on_host
# The node laws' names, importable from here too, as the AS-BV family and its tests import them.
from .as_bv_laws import LEX, CandidateValues, Components, components, joint_at  # noqa: F401
from .base import VerifyInput, VerifyResult, emit
from .gbv import BlockScan, block_accept_probs, expected_from_h, path_weights, scan_block, stop_law


# ------------------------------------------------------------------------------ the rule


def verify(inp: VerifyInput, rng: Randomness) -> VerifyResult:
    small, drafts = on_support_with_drafts(inp, rng)  # one host read for both, or none (`inp.prefetched`)
    work = inp if small is None else small.inp  # both phases run here; ids differ only by renumbering
    selection = select_block(work, rng, drafts)
    scan = verify_block(work, rng, selection)
    # Y on the full vocabulary, so that it can be any token.
    final, kind = stop_law(scan.omega, scan.tau, inp.target_probs[selection.chosen], selection.laws,
                           expand=None if small is None else small.expand)
    return emit(inp, rng, selection.chosen, scan.tau, final, kind, scan.tests, drafted=drafts.emitted)


@dataclass(frozen=True)
class Selection:
    """Phase 1's outcome: the selected draft, its law D row by row, and every node's choice."""

    chosen: int
    laws: torch.Tensor  # [L, V] D_u along the selected path
    nodes: list[NodeChoice]


@dataclass(frozen=True)
class NodeChoice:
    """What phase 1 did at one node of the selected path (kept for AS-BV+H's hand-off)."""

    law: NodeLaw
    alive: list[int]  # the drafts alive there, in draft order
    tokens: list[int]  # their next tokens, the candidates
    selected: int  # y
    component: int  # the component that chose y
    accepted_place: int | None  # seq: the place of the accepted candidate; None otherwise


def select_block(inp: VerifyInput, rng: Randomness, drafts: DraftsOnHost | None = None) -> Selection:
    """Phase 1 (lines 1-8): walk down the drafts' trie, one selected token per level.

    Host reads: `drafts` (read here when not given), then a node's own (`node_law`: on a large
    table only where its candidates carry two tokens or more, `NodeLaw.mixture`), and the coins
    unless `drafts` brought their uniforms. omega stays on the device: only a node's cap uses it."""
    drafts = read_drafts(inp) if drafts is None else drafts
    alive, alive_law, omega, rows, nodes = list(range(inp.num_drafts)), {inp.num_drafts: 1.0}, 1.0, [], []
    for depth in range(inp.draft_length):
        node = alive[0]  # canonical row of u
        target = inp.target_probs[node, depth]
        tokens = [drafts.tokens[k][depth] for k in alive]
        law = node_law(target, inp.draft_probs[node, depth], alive_law, omega, tokens)  # positional: a test wraps it
        y, component, accepted_place = select_with_detail(law, tokens, rng, drafts.uniforms)
        nodes.append(NodeChoice(law, alive, tokens, y, component, accepted_place))
        rows.append(law.selected)
        if depth + 1 < inp.draft_length:  # the last node has no child to pass pi and omega to
            alive_law, omega = descend(law, target, y, omega, drafts.draft_at[node][depth][alive[tokens.index(y)]])
        alive = [k for k, t in zip(alive, tokens) if t == y]
    return Selection(alive[0], torch.stack(rows), nodes)


def descend(law: NodeLaw, target: torch.Tensor, y: int, omega: float | torch.Tensor,
            draft_y: float | None = None) -> tuple[dict[int, float] | torch.Tensor, torch.Tensor]:
    """Lines 7-8 once y is selected at a node of law `law` (q = `target` there): the child's pi
    (`child_alive_law`) and omega (`next_omega_on_device`)."""
    return child_alive_law(law, y, draft_y=draft_y), next_omega_on_device(omega, target[y], law.selected[y])


def verify_block(inp: VerifyInput, rng: Randomness, selection: Selection) -> BlockScan:
    """Phase 2 (lines 9-11): GBV's coins on the selected block with D for p, every h computed
    and the coins read once (`gbv.scan_coins`): the L - 1 rows' passes cost less than a read."""
    chosen, laws = selection.chosen, selection.laws
    omega = phase_two_weights(inp, chosen, laws)
    return scan_block(rng, omega, inp.target_probs[chosen, 1 : inp.draft_length], laws[1:], chosen, every_h=True)


def phase_two_weights(inp: VerifyInput, draft: int, selected: torch.Tensor) -> torch.Tensor:
    """Line 9: GBV's omega on the selected block X^(draft) with D (selected, [L, V]) for p. [L]"""
    return phase_two_weights_of(inp.target_probs[draft], inp.draft_tokens[draft], selected)


def phase_two_weights_of(target_rows: torch.Tensor, tokens: torch.Tensor, selected: torch.Tensor) -> torch.Tensor:
    """`phase_two_weights` from the selected draft's rows: q [L + 1, V], its tokens [L], D [L, V]."""
    # D(y) > 0 for a selected token unless its probability underflowed; the floor keeps the
    # log ratios finite (inf - inf would be NaN in block_weights). It is the smallest subnormal,
    # not the smallest normal: a drafted token of probability 5e-324 must keep q/D = 1 when
    # target == draft (found by hypothesis).
    selected_drafted = token_probs(selected, tokens).clamp(min=math.ulp(0.0))
    return path_weights(token_probs(target_rows[:-1], tokens), selected_drafted)


def phase_two_probs(inp: VerifyInput, draft: int, selected: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(omega, h) of that GBV, every h computed (the theory line)."""
    omega = phase_two_weights(inp, draft, selected)
    return omega, block_accept_probs(omega, inp.target_probs[draft, 1:-1], selected[1:])


def expected_accepted(inp: VerifyInput) -> float:
    """E[tau | drafts] = sum over the <= K selectable paths of P(path selected) x GBV's
    sum_i [1 - prod_{j>=i} (1 - h_j)] on that path with D (docs/algorithms.md §9.2)."""
    L = inp.draft_length
    small = on_support(inp)
    inp = inp if small is None else small.inp  # E[tau] is a sum over the draft's tokens: the same number

    def expected(depth: int, alive: list[int], alive_law: dict[int, float], omega: float, rows: list) -> float:
        if depth == L:
            return expected_from_h(phase_two_probs(inp, alive[0], torch.stack(rows))[1]).item()
        target = inp.target_probs[alive[0], depth]
        law = node_law(target, inp.draft_probs[alive[0], depth], alive_law, omega)
        tokens = inp.draft_tokens[alive, depth].tolist()
        total = 0.0
        for y, prob in selection_probs(law, tokens).items():
            if prob > 0:
                child = [k for k, t in zip(alive, tokens) if t == y]
                total += prob * expected(depth + 1, child, child_alive_law(law, y),
                                         next_omega(omega, float(target[y]), float(law.selected[y])), rows + [law.selected])
        return total

    return expected(0, list(range(inp.num_drafts)), {inp.num_drafts: 1.0}, 1.0, [])


# ------------------------------------------------------------------- phase 1 at one node


def node_law(
    target: torch.Tensor, draft: torch.Tensor, alive_law: dict[int, float] | torch.Tensor, omega: float | torch.Tensor,
    candidates: list[int] | None = None,
) -> NodeLaw:
    """D_u(x) = sum_n pi(n) sum_r lambda[n]_r s_r[n](x).

    One alive draft has law p (all r agree), and so has "first" for any n. Deviation from
    paper: an alive count n >= 2 whose posterior pi(n) is below `as_bv_laws.MIN_ALIVE_MASS` gets lambda =
    first instead of the LP: choosing there moves E[tau] by less than that mass, and it
    saves the O(V log V) node work (drafts that split at the root leave pi(n >= 2) ~ 1e-9
    at every later node).

    omega may be a 0-dim tensor (phase 1 keeps it on the device). `candidates` (the alive
    drafts' tokens here, when known) have their scalars read with lambda
    (`NodeLaw.candidate`) and their places in the order (`NodeOrder.known_ranks`).

    Above MAX_LP_TOKENS tokens (the default pair's 8,193 cells) the law is computed on the device
    (`as_bv_device.node_law_on_device`) and reads nothing until a coin needs its host values. On a
    smaller table (`as_bv_laws.node_law_on_host`), per busy n: one copy for HiGHS's LP (which brings
    beta along where the order has a tail), rho* and beta where it has none (`components`), and
    "first"'s check where the LP mixes components (`_prefer_first`); none elsewhere.
    """
    form = node_law_on_device if on_device(target, alive_law) else node_law_on_host
    # An exact enumeration's replays ask for the same node again and again, and so do the theory
    # line (no candidates) and the verification (its drafts' tokens) of one iteration. The
    # candidates are not in the key: they only choose which scalars come back with the law, and a
    # law asked for others reads theirs where used (`NodeLaw.candidate` is None, the same floats).
    return remembered(
        lambda: (form.__name__, _value_key(target), _value_key(draft), _value_key(alive_law), _value_key(omega)),
        lambda: form(target, draft, alive_law, omega, candidates))


def _value_key(value) -> tuple:
    """A row's, a law's or a scalar's exact value, as a key (read to the host: made only inside an
    exact enumeration, `replays.remembered`)."""
    if isinstance(value, torch.Tensor):
        return value.dtype, tuple(value.shape), value.detach().cpu().numpy().tobytes()
    if isinstance(value, dict):
        return tuple(sorted(value.items()))
    return (float(value),)


def select_with_detail(law: NodeLaw, tokens: list[int], rng: Randomness,
                       uniforms: HostUniforms | None = None) -> tuple[int, int, int | None]:
    """Phase 1 line 6: draw a component from lambda[n], apply it to the candidates t_1..t_n.
    Returns y and how: the component used, and for seq the 0-based place of the accepted
    candidate (None when seq rejected every candidate or another component ran).

    The coins come from `uniforms` where given (read with the drafts; seq's probabilities a(t)
    are then the host values read at the node, `NodeLaw.candidate`), else from `rng`."""
    if len(set(tokens)) == 1:
        # Every component selects the one token the candidates carry, so no coin is spent: y and
        # D_u are what they would be after any draw, and with no loser there is no hand-off that
        # the component could change (`as_bv_handoff.losers`).
        return tokens[0], FIRST, None
    mixture = law.mixture(len(tokens))  # "first" where absent: the count's posterior underflowed to 0
    used = [r for r, w in enumerate(mixture) if w > 0]
    if len(used) == 1:
        component = used[0]
    else:
        component = uniforms.sample(mixture) if uniforms else rng.sample(torch.tensor(mixture, dtype=torch.float64))
    if component == FIRST:
        return tokens[0], FIRST, None
    if component == SEQ:
        n = len(tokens)
        if uniforms:
            known = [law.candidate(t) for t in tokens]
            accept = ([values.by_count[n][0] for values in known] if all(known)
                      else law.components[n].accept[tokens].tolist())
            outcomes, _ = uniforms.coins(accept)
        else:
            outcomes, _ = rng.coins(law.components[n].accept[tokens])
        if True in outcomes:
            place = outcomes.index(True)
            return tokens[place], SEQ, place
    return law.order.top(tokens), component, None  # lex, and seq when every candidate was rejected


def selection_probs(law: NodeLaw, tokens: list[int]) -> dict[int, float]:
    """P(select y | the candidates t_1..t_n), for the theory line."""
    lex, seq, first = law.mixture(len(tokens)) if len(set(tokens)) > 1 else ONLY_FIRST  # one token: no coin
    if first == 1.0:
        return {tokens[0]: 1.0}
    top = law.order.top(tokens)
    probs: dict[int, float] = defaultdict(float)
    probs[top] += lex
    probs[tokens[0]] += first
    reach = seq
    for token, a in zip(tokens, law.components[len(tokens)].accept[tokens].tolist()):
        probs[token] += reach * a
        reach *= 1.0 - a
    probs[top] += reach
    return dict(probs)


def child_alive_law(law: NodeLaw, y: int, draft_y: float | None = None) -> dict[int, float] | torch.Tensor:
    """Phase 1 line 7, Bayes: pi'(c) proportional to sum_n pi(n) sum_r lambda[n]_r T_r[n](y, c).

    p(y | u) may be given (phase 1 has it from `read_drafts`); the scalars of a busy node come
    from `law.at_candidates` where it holds y. Whatever is not given is read here. A device law's
    posterior is a tensor computed there (`child_alive_law_on_device`), with no read."""
    if law.weights_on_device is not None:
        return child_alive_law_on_device(law, y)
    return child_alive_law_on_host(law, y, draft_y)
