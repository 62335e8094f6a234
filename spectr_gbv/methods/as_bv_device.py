"""AS-BV's laws at one node on the device (docs/algorithms.md §6.4): the device form of
`as_bv_laws`, used on a table above MAX_LP_TOKENS tokens (a real vocabulary) where two drafts or
more may be alive (`on_device`).

Why both forms: here a node's law, "first"'s check, the alive count's Bayes step and omega are
computed with no host read (lambda from the LP's vertex search, `as_bv_lp.vertex_mixture_on_device`),
and the host values a coin needs are read once, only when asked for (`HostValues`); the host form
keeps HiGHS's LP and the golden values' bits on small tables. Tests tie the two: tests/test_as_bv.py
`test_the_device_joint_laws_are_the_host_ones` (T_r[n]) and
`test_phase_one_on_the_device_is_exact_with_three_drafts`, tests/test_as_bv_fast.py
`test_firsts_check_on_the_device_decides_as_the_host_check`, and tests/test_as_bv_reads.py
`test_phase_ones_host_values_are_the_values_it_used_to_read` (Bayes step and omega).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import torch

from . import as_bv_laws, as_bv_lp
from .as_bv_fast import NodeOrder, strict_order
from .as_bv_laws import (FIRST, FIRST_TOLERANCE, ONLY_FIRST, CandidateValues, Components, NodeLaw, candidate_values,
                         components, count_parts, node_parts)


def on_device(target: torch.Tensor, alive_law: dict[int, float] | torch.Tensor) -> bool:
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


def node_law_on_device(target: torch.Tensor, draft: torch.Tensor, alive_law: dict[int, float] | torch.Tensor,
                       omega: float | torch.Tensor, candidates: list[int] | None) -> NodeLaw:
    """`as_bv.node_law` of a large table with no host read: lambda[n] from the LP's vertex search on the
    device (`as_bv_lp.vertex_mixture_on_device`), "first"'s check there (`_prefer_first_on_device`),
    and an n of posterior below `as_bv_laws.MIN_ALIVE_MASS` served by "first" by a mask rather than skipped
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
        weights[n], mixed = _prefer_first_on_device(comp.marginals, cap, lam, capped_sums, pi[n] >= as_bv_laws.MIN_ALIVE_MASS)
        comps[n] = comp
        selected = selected + pi[n] * mixed
    distinct = list(dict.fromkeys(candidates)) if candidates is not None else []
    host_values = HostValues(weights, comps, below_draft, order, distinct)
    return NodeLaw(draft, order, below_draft, pi, comps, {}, selected, {}, weights, host_values)


def _prefer_first_on_device(marginals: torch.Tensor, cap: torch.Tensor, weights: torch.Tensor, capped_sums: torch.Tensor,
                            busy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """`as_bv_laws._prefer_first` on the device: "first" where F(first) >= F(lambda) - FIRST_TOLERANCE, or
    where the count is not busy; returns (lambda [3], lambda . s [V])."""
    mixed = weights @ marginals  # one component: its row, exactly (the other weights are 0)
    single = weights.max() == 1.0
    value = torch.where(single, weights @ capped_sums, torch.minimum(mixed, cap).sum())
    use_first = (capped_sums[FIRST] >= value - FIRST_TOLERANCE) | ~busy
    return torch.where(use_first, only_first(weights.device), weights), torch.where(use_first, marginals[FIRST], mixed)


@functools.lru_cache(maxsize=8)
def only_first(device: torch.device) -> torch.Tensor:
    """ONLY_FIRST as a float64 tensor on `device`, made once (a copy from the host each time would
    wait for the device on CUDA)."""
    return torch.tensor(ONLY_FIRST, dtype=torch.float64, device=device)


class HostValues:
    """What a node with a coin needs on the host from a device law, read in one copy when first
    asked for (`NodeLaw.mixture`, `NodeLaw.candidate`) and kept here: lambda[n] for every n
    computed and, at the candidates, G_<, their places in the order (into the order's
    `known_ranks`) and per n (a, r, R_<). A node whose candidates carry one token never asks."""

    def __init__(self, weights: dict[int, torch.Tensor], comps: dict[int, Components], below_draft: torch.Tensor,
                 order: NodeOrder, candidates: list[int]):
        self.weights, self.comps, self.below_draft, self.order, self.candidates = weights, comps, below_draft, order, candidates
        self.mixtures: dict[int, tuple[float, float, float]] | None = None
        self.at_candidates: dict[int, CandidateValues] = {}

    def read(self) -> HostValues:
        if self.mixtures is not None:
            return self
        counts = list(self.weights)
        parts = [self.weights[n] for n in counts]
        at = torch.tensor(self.candidates, dtype=torch.long, device=self.below_draft.device) if self.candidates else None
        if at is not None:
            for n in counts:
                parts += count_parts(self.comps[n], at)
            parts += node_parts(self.below_draft, self.order, at)
        values = torch.cat(parts).tolist() if parts else []  # the one read
        self.mixtures = {n: tuple(values[3 * i : 3 * i + 3]) for i, n in enumerate(counts)}
        if at is None:
            return self
        block, start = 3 * len(self.candidates), 3 * len(counts)
        by_count = {n: values[start + block * i : start + block * (i + 1)] for i, n in enumerate(counts)}
        self.at_candidates = candidate_values(self.order, self.candidates, by_count, values[start + block * len(counts) :])
        return self


def child_alive_law_on_device(law: NodeLaw, y: int) -> torch.Tensor:
    """`as_bv.child_alive_law` of a device law: pi' [N + 1] on the device, Bayes' rule with the joint laws
    T_r[n](y, .) of `as_bv_laws.joint_at` as vectors over c (`_joint_on_device`) and lambda[n] a device row
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
    """`as_bv_laws.joint_at` on 0-dim device tensors, each T_r[n](y, c) a vector over c = 0..n: [3, n + 1].

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


def next_omega_on_device(omega: float | torch.Tensor, target_y: torch.Tensor, selected_y: torch.Tensor) -> torch.Tensor:
    """`as_bv_laws.next_omega` on 0-dim float64 tensors, without a host read: the same float64 operations
    in the same order (a product, a quotient, then the min with 1), so the same bits."""
    return torch.where(selected_y > 0, torch.clamp(omega * target_y / selected_y, max=1.0), 1.0)
