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
    G_<(x), R_<(x)                              below_draft, Components.below_rejected
    rho*, a(x), beta, r(x)                      spectr.optimal_rho, Components.accept / beta / rejected
    lex, seq, first                             LEX, SEQ, FIRST (this order everywhere, also in lambda)
    T_r[n](x, c)                                joint_at(...)
    s_r[n](x) = sum_c T_r[n](x, c)              Components.marginals [3, V]
    lambda[n]                                   NodeLaw.mixture(n), from as_bv_lp (HiGHS, or a vertex search)
    D_u                                         NodeLaw.selected
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

Phase 1 spends coins only where a choice is random (the component draw, seq's tests), so
at K = 1 AS-BV draws exactly GBV's uniforms and returns GBV's outcomes.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections import defaultdict
from dataclasses import dataclass, field

import torch

from ..probs import token_probs
from ..randomness import HostUniforms, Randomness
from . import as_bv_fast, as_bv_lp
from .as_bv_fast import NodeOrder, count_sum, on_support, powers, strict_order
from .as_bv_host import DraftsOnHost, on_support_with_drafts, read_drafts
from .as_bv_lp import node_mixture
from .base import VerifyInput, VerifyResult, emit
from .gbv import BlockScan, block_accept_probs, expected_from_h, path_weights, scan_block, stop_law

LEX, SEQ, FIRST = range(3)
ONLY_FIRST = (0.0, 0.0, 1.0)

# An alive count this unlikely given the selected prefix is served by "first" (`node_law`).
MIN_ALIVE_MASS = 1e-6

# Below this, a difference of the node objective is the LP solver's noise, not a preference.
FIRST_TOLERANCE = 1e-12


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


@dataclass(frozen=True)
class NodeLaw:
    """Everything phase 1 decides at node u before looking at the drafts there."""

    draft: torch.Tensor  # [V] p(. | u)
    order: NodeOrder | None  # None when no alive count needs lex or seq
    below_draft: torch.Tensor | None  # [V] G_<(x)
    alive_law: dict[int, float] | torch.Tensor  # pi: {n: P(n alive)}, or [N + 1] on a device law
    components: dict[int, Components]  # per alive count n >= 2 that mixes lex and seq in
    mixtures: dict[int, tuple[float, float, float]]  # lambda[n], every n >= 2 in supp(pi) (host laws)
    selected: torch.Tensor  # [V] D_u: the law of the selected block's next token
    # Read with the LP's inputs where the candidates were known: for each candidate y, G_<(y)
    # and per busy n (a(y), r(y), R_<(y)), which `child_alive_law` needs once y is selected (host laws).
    at_candidates: dict[int, CandidateValues] = field(default_factory=dict)
    # A large table's law is computed on the device (`_node_law_on_device`): lambda[n] per n
    # computed, pi a tensor for alive_law, and the host values a coin needs read only when first
    # asked for (`host_values`, which keeps them: `mixture` and `candidate` answer from it, so a
    # copy of the law can never select with another lambda than its D_u's). None: a host law.
    weights_on_device: dict[int, torch.Tensor] | None = None
    host_values: _HostValues | None = None

    def mixture(self, n: int) -> tuple[float, float, float]:
        """lambda[n] on the host ("first" where n has no LP here); on a device law, the first call
        reads it with the candidates' values (one host read for the node)."""
        if self.host_values is not None:
            return self.host_values.read().mixtures.get(n, ONLY_FIRST)
        return self.mixtures.get(n, ONLY_FIRST)

    def candidate(self, y: int) -> CandidateValues | None:
        """The host values at candidate y, where they were read (None elsewhere)."""
        if self.host_values is not None:
            return self.host_values.read().at_candidates.get(y)
        return self.at_candidates.get(y)


@dataclass(frozen=True)
class CandidateValues:
    """A busy node's scalars at one candidate token y, on the host."""

    below_draft: float  # G_<(y)
    by_count: dict[int, tuple[float, float, float]]  # n -> (a(y), r(y), R_<(y)) of Components[n]


def node_law(
    target: torch.Tensor, draft: torch.Tensor, alive_law: dict[int, float] | torch.Tensor, omega: float | torch.Tensor,
    candidates: list[int] | None = None,
) -> NodeLaw:
    """D_u(x) = sum_n pi(n) sum_r lambda[n]_r s_r[n](x).

    One alive draft has law p (all r agree), and so has "first" for any n. Deviation from
    paper: an alive count n >= 2 whose posterior pi(n) is below MIN_ALIVE_MASS gets lambda =
    first instead of the LP: choosing there moves E[tau] by less than that mass, and it
    saves the O(V log V) node work (drafts that split at the root leave pi(n >= 2) ~ 1e-9
    at every later node).

    omega may be a 0-dim tensor (phase 1 keeps it on the device). `candidates` (the alive
    drafts' tokens here, when known) have their scalars read with lambda
    (`NodeLaw.candidate`) and their places in the order (`NodeOrder.known_ranks`).

    Above MAX_LP_TOKENS tokens (the default pair's 8,193 cells) the law is computed on the device
    (`_node_law_on_device`) and reads nothing until a coin needs its host values. On a smaller
    table, per busy n: one copy for HiGHS's LP (which brings beta along where the order has a
    tail), rho* and beta where it has none (`components`), and "first"'s check where the LP mixes
    components (`_prefer_first`); none elsewhere.
    """
    if _on_device(target, alive_law):
        return _node_law_on_device(target, draft, alive_law, omega, candidates)
    busy = [n for n, weight in alive_law.items() if n >= 2 and weight >= MIN_ALIVE_MASS]
    # positive is not checked: that check is a host read, and `components`' guarded path gives
    # the same values (tests/test_as_bv_fast.py) on any draft row.
    order = strict_order(target, draft, check_positive=False) if busy else None
    below_draft = order.below(draft) if busy else None
    idle = sum(w for n, w in alive_law.items() if n not in busy)
    selected = idle * draft if idle or not busy else None  # None: no pass for a zero term
    comps, mixtures = {}, {n: ONLY_FIRST for n in alive_law if n >= 2}
    cap = omega * target if busy else None
    distinct = list(dict.fromkeys(candidates)) if busy and candidates is not None else []
    at = torch.tensor(distinct, dtype=torch.long, device=draft.device) if distinct else None
    node_values = None  # G_<(y) and the candidates' places in the order, from the first LP copy
    by_count: dict[int, list[float]] = {}  # per busy n, `_count_parts` as read
    for n in busy:
        comp = components(target, draft, order, below_draft, n)
        extra = []
        if at is not None:
            extra += _count_parts(comp, at)
            if node_values is None:
                extra += _node_parts(below_draft, order, at)
        beta_on_device = isinstance(comp.beta, torch.Tensor)
        if beta_on_device:  # an order with a tail (tests lower ORDER_HEAD to reach it here): beta travels with the LP's inputs
            extra.append(comp.beta.reshape(1))
        # the sums serve the "first" check too
        mixture = node_mixture(comp.marginals, cap, torch.cat(extra) if extra else None)
        extra_values = mixture.extra
        if beta_on_device:
            comp = dataclasses.replace(comp, beta=extra_values.pop())
        comps[n] = comp
        if at is not None:
            by_count[n] = extra_values[: 3 * len(distinct)]
            if node_values is None:
                node_values = extra_values[3 * len(distinct) :]
        mixtures[n], mixed = _prefer_first(comp.marginals, cap, mixture.weights)
        selected = alive_law[n] * mixed if selected is None else selected + alive_law[n] * mixed
    at_candidates = {} if node_values is None else _candidate_values(order, distinct, by_count, node_values)
    return NodeLaw(draft, order, below_draft, alive_law, comps, mixtures, selected, at_candidates)


def _count_parts(comp: Components, at: torch.Tensor) -> list[torch.Tensor]:
    """What a read brings of one count's components at the candidates `at`: a, r, R_< ([m] each)."""
    return [comp.accept[at], comp.rejected[at], comp.below_rejected[at]]


def _node_parts(below_draft: torch.Tensor, order: NodeOrder, at: torch.Tensor) -> list[torch.Tensor]:
    """What a read brings of the node at the candidates `at`: G_< and their places in the order."""
    return [below_draft[at], order.places(at)]


def _candidate_values(order: NodeOrder, candidates: list[int], by_count: dict[int, list[float]],
                      node_values: list[float]) -> dict[int, CandidateValues]:
    """`NodeLaw.at_candidates` from the values read of `_count_parts` (per n, 3 m) and `_node_parts`
    (2 m); the places go into the order's `known_ranks`."""
    m = len(candidates)
    order.known_ranks.update((y, int(place) if place >= 0 else None) for y, place in zip(candidates, node_values[m:]))
    scalars = {n: list(zip(*(values[i * m : (i + 1) * m] for i in range(3)))) for n, values in by_count.items()}
    return {y: CandidateValues(node_values[i], {n: scalars[n][i] for n in scalars}) for i, y in enumerate(candidates)}


def _prefer_first(
    marginals: torch.Tensor, cap: torch.Tensor, weights: tuple[float, float, float],
) -> tuple[tuple[float, float, float], torch.Tensor]:
    """"first" where it does as well as the solver's lambda, to the solver's precision.

    F(first) = sum_x min(p(x), cap(x)); when it is within FIRST_TOLERANCE of F(lambda), the two
    are tied as far as the LP can tell, and "first" keeps D = p at this node. Without this,
    a draft probability far below the solver's tolerance (1e-240, found by hypothesis) let
    HiGHS return "lex" for target == draft, whose law is not p, and a block that should be
    accepted whole was not. Exactness holds for any lambda; this is about acceptance only.

    Returns the weights and their mixture lambda . s [V], which the caller adds into D_u. A small
    table's check (`_prefer_first_on_device` is a large table's)."""
    mixed = _mix(weights, marginals)
    if weights == ONLY_FIRST:
        return weights, mixed
    first = torch.minimum(marginals[FIRST], cap).sum()
    value = torch.minimum(mixed, cap).sum()
    return (ONLY_FIRST, _mix(ONLY_FIRST, marginals)) if bool(first >= value - FIRST_TOLERANCE) else (weights, mixed)


def _mix(weights: tuple[float, float, float], marginals: torch.Tensor) -> torch.Tensor:
    if max(weights) == 1.0:  # one component (the usual case): its row, which is what the product gives
        return marginals[weights.index(1.0)]
    return torch.tensor(weights, dtype=torch.float64, device=marginals.device) @ marginals


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
    posterior is a tensor computed there (`_child_alive_law_on_device`), with no read."""
    if law.weights_on_device is not None:
        return _child_alive_law_on_device(law, y)
    known = law.at_candidates.get(y)
    draft_y = float(law.draft[y]) if draft_y is None else draft_y
    if law.below_draft is None:
        below_y = 0.0
    else:
        below_y = known.below_draft if known is not None else float(law.below_draft[y])
    mass: dict[int, float] = defaultdict(float)
    for n, weight in law.alive_law.items():
        if n not in law.components:  # "first": the selected draft plus Bin(n-1, p(y)) others
            for c in range(1, n + 1):
                mass[c] += weight * draft_y * _binomial(n - 1, draft_y, c - 1)
            continue
        joint = joint_at(law.components[n], draft_y, below_y, y, None if known is None else known.by_count[n])
        for c in range(1, n + 1):
            mass[c] += weight * sum(w * joint[r][c] for r, w in enumerate(law.mixtures[n]))
    total = sum(mass.values())
    if total <= 0:  # y's selection probability underflowed (a drafted token of probability ~1e-320)
        return {1: 1.0}
    return {c: m / total for c, m in mass.items() if m > 0}


def next_omega(omega: float, target_y: float, selected_y: float) -> float:
    """Phase 1 line 8: omega <- min(omega q(y|u) / D_u(y), 1)."""
    return min(omega * target_y / selected_y, 1.0) if selected_y > 0 else 1.0


def next_omega_on_device(omega: float | torch.Tensor, target_y: torch.Tensor, selected_y: torch.Tensor) -> torch.Tensor:
    """`next_omega` on 0-dim float64 tensors, without a host read: the same float64 operations
    in the same order (a product, a quotient, then the min with 1), so the same bits."""
    return torch.where(selected_y > 0, torch.clamp(omega * target_y / selected_y, max=1.0), 1.0)


# --------------------------------------------------- phase 1 at one node, on the device


def _on_device(target: torch.Tensor, alive_law: dict[int, float] | torch.Tensor) -> bool:
    """Whether a node's law is computed on the device: on a table above MAX_LP_TOKENS tokens (where
    lambda is the vertex search's, `as_bv_lp.vertex_mixture_on_device`), where two drafts or more
    may be alive. Above ORDER_HEAD tokens rho* and beta are on the device too (`components`), so
    such a node reads nothing; between the two sizes they are still read."""
    most = alive_law.shape[0] - 1 if isinstance(alive_law, torch.Tensor) else max(alive_law)
    return target.shape[-1] > as_bv_lp.MAX_LP_TOKENS and most >= 2


def _alive_tensor(alive_law: dict[int, float] | torch.Tensor, device: torch.device) -> torch.Tensor:
    """pi as float64 [N + 1] (index n: P(n alive)) on the device, filled there (no host copy)."""
    if isinstance(alive_law, torch.Tensor):
        return alive_law
    pi = torch.zeros(max(alive_law) + 1, dtype=torch.float64, device=device)
    for n, weight in alive_law.items():
        pi[n] = weight
    return pi


def _node_law_on_device(target: torch.Tensor, draft: torch.Tensor, alive_law: dict[int, float] | torch.Tensor,
                        omega: float | torch.Tensor, candidates: list[int] | None) -> NodeLaw:
    """`node_law` of a large table with no host read: lambda[n] from the LP's vertex search on the
    device (`as_bv_lp.vertex_mixture_on_device`), "first"'s check there (`_prefer_first_on_device`),
    and an n of posterior below MIN_ALIVE_MASS served by "first" by a mask rather than skipped
    (which branch would need pi on the host). Every n = 2..N is computed, but where pi is still a
    host dict (the root) only those it holds. The host values a node with a coin needs (lambda,
    the candidates' scalars and places) are read only when asked for."""
    pi = _alive_tensor(alive_law, target.device)
    counts = [n for n in range(2, pi.shape[0]) if isinstance(alive_law, torch.Tensor) or alive_law.get(n, 0.0) > 0]
    order = strict_order(target, draft, check_positive=False)
    below_draft = order.below(draft)
    cap = omega * target
    selected = pi[1] * draft
    comps, weights = {}, {}
    for n in counts:
        comp = components(target, draft, order, below_draft, n)
        lam, capped_sums = as_bv_lp.vertex_mixture_on_device(comp.marginals, cap)
        weights[n], mixed = _prefer_first_on_device(comp.marginals, cap, lam, capped_sums, pi[n] >= MIN_ALIVE_MASS)
        comps[n] = comp
        selected = selected + pi[n] * mixed
    distinct = list(dict.fromkeys(candidates)) if candidates is not None else []
    host_values = _HostValues(weights, comps, below_draft, order, distinct)
    return NodeLaw(draft, order, below_draft, pi, comps, {}, selected, {}, weights, host_values)


def _prefer_first_on_device(marginals: torch.Tensor, cap: torch.Tensor, weights: torch.Tensor, capped_sums: torch.Tensor,
                            busy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`_prefer_first` on the device: "first" where F(first) >= F(lambda) - FIRST_TOLERANCE, or
    where the count is not busy; returns (lambda [3], lambda . s [V])."""
    mixed = weights @ marginals  # one component: its row, exactly (the other weights are 0)
    single = weights.max() == 1.0
    value = torch.where(single, weights @ capped_sums, torch.minimum(mixed, cap).sum())
    use_first = (capped_sums[FIRST] >= value - FIRST_TOLERANCE) | ~busy
    return torch.where(use_first, _only_first(weights.device), weights), torch.where(use_first, marginals[FIRST], mixed)


@functools.lru_cache(maxsize=8)
def _only_first(device: torch.device) -> torch.Tensor:
    """ONLY_FIRST as a float64 tensor on `device`, made once (a copy from the host each time would
    wait for the device on CUDA)."""
    return torch.tensor(ONLY_FIRST, dtype=torch.float64, device=device)


class _HostValues:
    """What a node with a coin needs on the host from a device law, read in one copy when first
    asked for (`NodeLaw.mixture`, `NodeLaw.candidate`) and kept here: lambda[n] for every n
    computed and, at the candidates, G_<, their places in the order (into the order's
    `known_ranks`) and per n (a, r, R_<). A node whose candidates carry one token never asks."""

    def __init__(self, weights: dict[int, torch.Tensor], comps: dict[int, Components], below_draft: torch.Tensor,
                 order: NodeOrder, candidates: list[int]):
        self.weights, self.comps, self.below_draft, self.order, self.candidates = weights, comps, below_draft, order, candidates
        self.mixtures: dict[int, tuple[float, float, float]] | None = None
        self.at_candidates: dict[int, CandidateValues] = {}

    def read(self) -> _HostValues:
        if self.mixtures is not None:
            return self
        counts = list(self.weights)
        parts = [self.weights[n] for n in counts]
        at = torch.tensor(self.candidates, dtype=torch.long, device=self.below_draft.device) if self.candidates else None
        if at is not None:
            for n in counts:
                parts += _count_parts(self.comps[n], at)
            parts += _node_parts(self.below_draft, self.order, at)
        values = torch.cat(parts).tolist() if parts else []  # the one read
        self.mixtures = {n: tuple(values[3 * i : 3 * i + 3]) for i, n in enumerate(counts)}
        if at is None:
            return self
        block, start = 3 * len(self.candidates), 3 * len(counts)
        by_count = {n: values[start + block * i : start + block * (i + 1)] for i, n in enumerate(counts)}
        self.at_candidates = _candidate_values(self.order, self.candidates, by_count, values[start + block * len(counts) :])
        return self


def _child_alive_law_on_device(law: NodeLaw, y: int) -> torch.Tensor:
    """`child_alive_law` of a device law: pi' [N + 1] on the device, Bayes' rule with the joint laws
    T_r[n](y, .) of `joint_at` as vectors over c (`_joint_on_device`) and lambda[n] a device row
    (where n is not busy, "first", whose law is the one the host uses for such n)."""
    pi = law.alive_law
    draft_y, below_y = law.draft[y], law.below_draft[y]
    mass = torch.zeros_like(pi)
    mass[1] = pi[1] * draft_y  # one alive draft: "first", c = 1
    for n, weights in law.weights_on_device.items():
        comp = law.components[n]
        joint = _joint_on_device(comp, draft_y, below_y, comp.accept[y], comp.rejected[y], comp.below_rejected[y])
        mass[: n + 1] += pi[n] * (weights @ joint)
    total = mass.sum()
    one = torch.zeros_like(mass)
    one[1] = 1.0  # y's selection probability underflowed: as the host, one alive draft
    return torch.where(total > 0, mass / torch.where(total > 0, total, 1.0), one)


def _joint_on_device(comp: Components, draft_y: torch.Tensor, below_y: torch.Tensor, a: torch.Tensor, r: torch.Tensor,
                     below_r: torch.Tensor) -> torch.Tensor:
    """`joint_at` on 0-dim device tensors, each T_r[n](y, c) a vector over c = 0..n: [3, n + 1].

    seq's first acceptance at candidate k leaves k - 1 rejected candidates (tokens ~ r) and n - k
    untouched ones (tokens ~ p); the count of those carrying y is the sum of two binomials, whose
    law is the product of their pmfs summed along each anti-diagonal (`_count_grids`)."""
    n = comp.num_alive
    g = _count_grids(n, draft_y.device)
    lex = g.comb_n * draft_y ** g.c * below_y ** (n - g.c) * g.positive
    first = draft_y * _binomial_rows(draft_y, g.first_m, g.first_j, g.first_comb)  # c - 1 of n - 1 others carry y
    rejected = _binomial_rows(r, g.rejected_m, g.rejected_j, g.rejected_comb)  # [n, n]: k - 1 rejected, j carry y
    untouched = _binomial_rows(draft_y, g.untouched_m, g.untouched_j, g.untouched_comb)  # [n, n]: n - k untouched
    # carried[k, c - 1] = sum_j rejected[k, j] untouched[k, c - 1 - j]
    carried = (rejected[:, :, None] * untouched[:, g.shift].mul_(g.shift_ok)).sum(1)
    missed = 1.0 - comp.beta
    reach = missed ** g.k_minus_one  # (1 - beta)^(k - 1)
    seq = g.comb_n * r ** g.c * below_r ** (n - g.c) * (missed ** n) * g.positive
    seq[1:] += draft_y * a * (reach @ carried)
    return torch.stack([lex, seq, first])


def _binomial_rows(prob: torch.Tensor, trials: torch.Tensor, hits: torch.Tensor, comb: torch.Tensor) -> torch.Tensor:
    """C(m, j) prob^j (1 - prob)^(m - j) on grids of m and j (comb 0 where j is out of range)."""
    return comb * prob ** hits * (1.0 - prob) ** (trials - hits).clamp(min=0)


@dataclass(frozen=True)
class _CountGrids:
    c: torch.Tensor  # [n + 1] c = 0..n
    comb_n: torch.Tensor  # C(n, c)
    positive: torch.Tensor  # 1 where c >= 1
    first_m: torch.Tensor  # n - 1 (first: c - 1 of the n - 1 others carry y)
    first_j: torch.Tensor  # c - 1
    first_comb: torch.Tensor  # C(n - 1, c - 1), 0 at c = 0
    rejected_m: torch.Tensor  # [n, 1] k - 1, k = 1..n
    rejected_j: torch.Tensor  # [1, n] j
    rejected_comb: torch.Tensor  # [n, n] C(k - 1, j)
    untouched_m: torch.Tensor  # [n, 1] n - k
    untouched_j: torch.Tensor  # [1, n] j
    untouched_comb: torch.Tensor  # [n, n] C(n - k, j)
    shift: torch.Tensor  # [n, n] (j, c - 1) -> c - 1 - j, clamped into range
    shift_ok: torch.Tensor  # [n, n] 1 where c - 1 - j >= 0
    k_minus_one: torch.Tensor  # [n]


@functools.lru_cache(maxsize=64)
def _count_grids(n: int, device: torch.device) -> _CountGrids:
    def f64(values) -> torch.Tensor:
        return torch.tensor(values, dtype=torch.float64, device=device)

    c = list(range(n + 1))
    ks, js = range(1, n + 1), range(n)
    shift = [[(i - j) if i >= j else 0 for i in range(n)] for j in range(n)]
    return _CountGrids(
        c=f64(c), comb_n=f64([math.comb(n, x) for x in c]), positive=f64([float(x > 0) for x in c]),
        first_m=f64([n - 1] * (n + 1)), first_j=f64([max(x - 1, 0) for x in c]),
        first_comb=f64([math.comb(n - 1, x - 1) if x else 0 for x in c]),
        rejected_m=f64([[k - 1] for k in ks]), rejected_j=f64([list(js)]),
        rejected_comb=f64([[math.comb(k - 1, j) if j <= k - 1 else 0 for j in js] for k in ks]),
        untouched_m=f64([[n - k] for k in ks]), untouched_j=f64([list(js)]),
        untouched_comb=f64([[math.comb(n - k, j) if j <= n - k else 0 for j in js] for k in ks]),
        shift=torch.tensor(shift, dtype=torch.long, device=device),
        shift_ok=f64([[float(i >= j) for i in range(n)] for j in range(n)]),
        k_minus_one=f64([k - 1 for k in ks]),
    )


# ------------------------------------------------------------- the components' laws T_r[n]


@dataclass(frozen=True)
class Components:
    """The three selections among n alive drafts at node u, with their laws."""

    num_alive: int
    accept: torch.Tensor  # [V] a(x) = min(1, q / (rho p)) of seq
    beta: float | torch.Tensor  # sum_x p(x) a(x); a 0-dim tensor until `node_law` reads it (large tables)
    rejected: torch.Tensor  # [V] r(x) = p(x) (1 - a(x)) / (1 - beta): a rejected candidate's token
    below_rejected: torch.Tensor  # [V] R_<(x)
    marginals: torch.Tensor  # [3, V] s_lex, s_seq, s_first


def components(target: torch.Tensor, draft: torch.Tensor, order: NodeOrder, below_draft: torch.Tensor, n: int) -> Components:
    """The three components at a node with n alive drafts.

    Without a tail in the order (small tables: every golden value) rho* ends in a bisection on
    the host (its device search differs in the last bits) and beta enters the marginals through
    Python's float powers (1 - beta)**k, which torch's products need not match bit for bit: two
    host reads, kept so that those values keep their bits. With a tail (a real vocabulary) rho* is
    searched on the device and beta and its powers stay there: `beta` is then a 0-dim tensor,
    which `node_law` reads with the LP's inputs and replaces by its host float."""
    rho = order.rho(target, draft, n)
    if order.positive:  # no p = 0 to guard: the same values in three passes instead of seven
        accept = torch.clamp(target / (rho * draft), max=1.0)
    else:
        accept = torch.where(draft > 0, torch.clamp(target / (rho * torch.where(draft > 0, draft, 1.0)), max=1.0), 0.0)
    accepted_mass = draft * accept
    if order.compressed is None:
        beta = float(accepted_mass.sum())
        # beta = 1 only when every candidate is accepted surely; then the fallback never runs.
        rejected = draft * (1.0 - accept) / (1.0 - beta) if beta < 1.0 else torch.zeros_like(draft)
        reach = sum((1.0 - beta) ** k for k in range(n))  # sum_k (1-beta)^(k-1): no 1/beta
        all_rejected = (1.0 - beta) ** n
    else:
        beta = accepted_mass.sum()
        missed = 1.0 - beta
        rejected = torch.where(beta < 1.0, draft * (1.0 - accept) / missed, 0.0)
        missed_to = powers(missed, n)
        reach = sum(missed_to[1:n], start=torch.ones_like(missed))
        all_rejected = missed_to[n]
    below_rejected = order.below(rejected)
    marginals = torch.empty((3, draft.shape[-1]), dtype=draft.dtype, device=draft.device)
    marginals[LEX] = count_sum(draft, below_draft, n)
    torch.add(accepted_mass * reach, all_rejected * count_sum(rejected, below_rejected, n), out=marginals[SEQ])
    marginals[FIRST] = draft
    return Components(n, accept, beta, rejected, below_rejected, marginals)


def _binomial(m: int, prob: float, c: int) -> float:
    return math.comb(m, c) * prob**c * (1.0 - prob) ** (m - c) if 0 <= c <= m else 0.0


def joint_at(comp: Components, draft_y: float, below_y: float, y: int,
             at_y: tuple[float, float, float] | None = None) -> list[list[float]]:
    """T_r[n](y, c) for r in (LEX, SEQ, FIRST) and c = 0..n: P(token y selected, c candidates carry y).
    `at_y`: (a(y), r(y), R_<(y)) already on the host; read here when not given."""
    n = comp.num_alive
    a, r, below_r = at_y if at_y is not None else (float(t[y]) for t in (comp.accept, comp.rejected, comp.below_rejected))
    lex = [math.comb(n, c) * draft_y**c * below_y ** (n - c) if c else 0.0 for c in range(n + 1)]
    first = [draft_y * _binomial(n - 1, draft_y, c - 1) for c in range(n + 1)]
    seq = [0.0] * (n + 1)
    for c in range(1, n + 1):
        # first acceptance at candidate k: k-1 rejected (tokens ~ r), n-k untouched (tokens ~ p)
        accepted = sum(
            (1.0 - comp.beta) ** (k - 1) * draft_y * a
            * sum(_binomial(k - 1, r, j) * _binomial(n - k, draft_y, c - 1 - j) for j in range(c))
            for k in range(1, n + 1)
        )
        seq[c] = accepted + (1.0 - comp.beta) ** n * math.comb(n, c) * r**c * below_r ** (n - c)
    return [lex, seq, first]
