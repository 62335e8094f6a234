"""AS-BV's laws at one node of the drafts' trie (docs/algorithms.md §6.4), host form.

The three token-level selections among n alive drafts, lex, seq and first, and their laws: the
marginals s_r[n] and the joint laws T_r[n](x, c) (`components`, `joint_at`); the node's law
D_u = sum_n pi(n) sum_r lambda[n]_r s_r[n] (`node_law_on_host`); the alive count's Bayes step once
y is selected (`child_alive_law_on_host`) and omega's (`next_omega`). `as_bv.node_law` and
`as_bv.child_alive_law` pick this form or the device's.

Why two forms: on a small table (every golden value) these laws are computed here with the
host's floats, so that lambda comes from HiGHS's LP and the golden values keep their bits; on a
real vocabulary the same laws are computed on the device without a host read
(`as_bv_device`). Tests tie the two: tests/test_as_bv.py
`test_the_device_joint_laws_are_the_host_ones`, tests/test_as_bv_fast.py
`test_firsts_check_on_the_device_decides_as_the_host_check` and tests/test_as_bv_reads.py
`test_phase_ones_host_values_are_the_values_it_used_to_read`.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from .as_bv_fast import NodeOrder, count_sum, powers, strict_order
from .as_bv_lp import node_mixture

if TYPE_CHECKING:
    from .as_bv_device import HostValues

LEX, SEQ, FIRST = range(3)
ONLY_FIRST = (0.0, 0.0, 1.0)

# An alive count this unlikely given the selected prefix is served by "first" (`node_law_on_host`,
# `as_bv_device.node_law_on_device`, which reads it here: a test lowers it here).
MIN_ALIVE_MASS = 1e-6

# Below this, a difference of the node objective is the LP solver's noise, not a preference.
FIRST_TOLERANCE = 1e-12


# ------------------------------------------------------------------------ the law at one node


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
    # A large table's law is computed on the device (`as_bv_device.node_law_on_device`): lambda[n] per n
    # computed, pi a tensor for alive_law, and the host values a coin needs read only when first
    # asked for (`host_values`, which keeps them: `mixture` and `candidate` answer from it, so a
    # copy of the law can never select with another lambda than its D_u's). None: a host law.
    weights_on_device: dict[int, torch.Tensor] | None = None
    host_values: HostValues | None = None
    # pi' per (y, p(y | u)) once worked out (`child_alive_law_on_host`): the theory line asks for
    # every child, the verification for the selected one, and a teaching pair's remembered laws
    # (`replays`) are asked again by every run that meets the node.
    children: dict[tuple[int, float], dict[int, float]] = field(default_factory=dict, compare=False, repr=False)

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


def node_law_on_host(
    target: torch.Tensor, draft: torch.Tensor, alive_law: dict[int, float], omega: float | torch.Tensor,
    candidates: list[int] | None = None,
) -> NodeLaw:
    """`as_bv.node_law` on a table of at most MAX_LP_TOKENS tokens (or where one draft at most can
    be alive): per busy n, one copy for HiGHS's LP (which brings beta along where the order has a
    tail), rho* and beta where it has none (`components`), and "first"'s check where the LP mixes
    components (`_prefer_first`); none elsewhere."""
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
    by_count: dict[int, list[float]] = {}  # per busy n, `count_parts` as read
    for n in busy:
        comp = components(target, draft, order, below_draft, n)
        extra = []
        if at is not None:
            extra += count_parts(comp, at)
            if node_values is None:
                extra += node_parts(below_draft, order, at)
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
    at_candidates = {} if node_values is None else candidate_values(order, distinct, by_count, node_values)
    return NodeLaw(draft, order, below_draft, alive_law, comps, mixtures, selected, at_candidates)


def count_parts(comp: Components, at: torch.Tensor) -> list[torch.Tensor]:
    """What a read brings of one count's components at the candidates `at`: a, r, R_< ([m] each)."""
    return [comp.accept[at], comp.rejected[at], comp.below_rejected[at]]


def node_parts(below_draft: torch.Tensor, order: NodeOrder, at: torch.Tensor) -> list[torch.Tensor]:
    """What a read brings of the node at the candidates `at`: G_< and their places in the order."""
    return [below_draft[at], order.places(at)]


def candidate_values(order: NodeOrder, candidates: list[int], by_count: dict[int, list[float]],
                     node_values: list[float]) -> dict[int, CandidateValues]:
    """`NodeLaw.at_candidates` from the values read of `count_parts` (per n, 3 m) and `node_parts`
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
    table's check (`as_bv_device._prefer_first_on_device` is a large table's)."""
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


def child_alive_law_on_host(law: NodeLaw, y: int, draft_y: float | None = None) -> dict[int, float]:
    """`as_bv.child_alive_law` of a host law: pi' as {c: P(c alive)}, the scalars of a busy node
    from `law.at_candidates` where it holds y, whatever is not given read here."""
    draft_y = float(law.draft[y]) if draft_y is None else draft_y
    child = law.children.get((y, draft_y))
    if child is None:
        child = law.children[y, draft_y] = _child_alive_law(law, y, draft_y)
    return child


def _child_alive_law(law: NodeLaw, y: int, draft_y: float) -> dict[int, float]:
    known = law.at_candidates.get(y)
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
