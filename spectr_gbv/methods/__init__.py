"""The registry of verification methods: the only place a method name is mapped to code, and to how the views show it.

Adding a method means its module and one entry here (label, colour, symbol, exactness tier,
residual text, view flags); tests/test_registry.py walks every entry through every view. Exactly one
entry is the app's default (`app_default`).

Pure tensor code: nothing under `spectr_gbv.methods` imports a model library or a UI.
"""

from __future__ import annotations

from . import as_bv, as_bv_handoff, as_bv_host, gbv, rrs, sd, spectr, spectr_gbv, spectr_gbv_released, traversal
from .base import MethodSpec, SubBlockTest, VerifyInput, VerifyResult

LOSSY_RED = "#D55E00"  # Okabe-Ito vermillion: in the whole app it means lossy, and nothing else

METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in [
        MethodSpec(
            name="sd",
            label="SD",
            verify=sd.verify,
            decide=sd.decide,
            expected_accepted=sd.expected_accepted,
            multi_draft=False,
            block=False,
            exact=True,
            description="Standard speculative sampling (Leviathan et al.; Chen et al.): one draft, token by token.",
            colour="#56B4E9",  # sky blue
            symbol="circle",
            residual="r = norm((q − p)+) at position τ+1: the draft's p is subtracted once, so r is the plotted q minus the "
            "plotted p, clipped at 0.",
            plots_its_residual=True,
        ),
        MethodSpec(
            name="rrs",
            label="RRS",
            verify=rrs.verify,
            expected_accepted=rrs.expected_accepted,
            multi_draft=True,
            block=False,
            exact=True,
            description="SpecInfer-style recursive rejection sampling over K drafts, token by token.",
            colour="#CC79A7",  # reddish purple
            symbol="diamond",
            residual="after each rejected candidate the target becomes f ← norm((f − p)+): p is subtracted once per rejected "
            "candidate at the node (n times for n drafts), then Y ~ the last f.",
            compare_by_default=False,
        ),
        MethodSpec(
            name="spectr",
            label="SpecTr",
            verify=spectr.verify,
            decide=spectr.decide,
            uniform_budget=spectr.uniform_budget,
            expected_accepted=spectr.expected_accepted,
            multi_draft=True,
            block=False,
            exact=True,
            description="SpecTr (Sun et al. 2023): K-SEQ selection among K drafts with the optimal rho, token by token.",
            colour="#009E73",  # bluish green
            symbol="triangle-up",
            residual="K-SEQ residual at the node: r(x) ∝ q(x) − min(p(x), q(x)/ρ*)·(1 − (1 − β)^n)/β, with n the drafts "
            "proposing there and ρ*, β from the K-SEQ search: what is subtracted is the mass the n candidates' acceptances "
            "already emit, not the plotted p.",
            compare_baseline=True,
        ),
        MethodSpec(
            name="gbv",
            label="GBV",
            verify=gbv.verify,
            decide=gbv.decide,
            expected_accepted=gbv.expected_accepted,
            multi_draft=False,
            block=True,
            exact=True,
            description="Greedy block verification (Sun et al. 2024): one draft, whole sub-blocks accepted at once.",
            colour="#0072B2",  # blue: GBV is SD's block version
            symbol="square",
            residual="r = norm((ω_τ·q − p)+) at position τ+1, where ω_τ ≤ 1 is the block weight of the accepted prefix "
            "(ω_0 = 1 gives SD's residual): q is scaled down by ω_τ before p is subtracted.",
        ),
        MethodSpec(
            name="spectr_gbv",
            label="SpecTr-GBV",
            verify=spectr_gbv.verify,
            decide=spectr_gbv.decide,
            uniform_budget=spectr_gbv.uniform_budget,
            expected_accepted=spectr_gbv.expected_accepted,
            multi_draft=True,
            block=True,
            exact=True,
            description="SpecTr-GBV, exact: K drafts verified by block (recursive block K-SEQ). "
            "Equals GBV at K = 1 and SpecTr at L = 1.",
            colour="#E69F00",  # orange
            symbol="star",
            residual="a draft that stops early hands on f = norm((ω·q − p)+) (GBV's residual) to the drafts still "
            "consistent at that node; when every one of them fails there, Y comes from the K-SEQ residual of f: "
            "f(x) − min(p(x), f(x)/ρ*)·(1 − (1 − β)^n)/β, normalised, n the drafts tried at that node.",
            leads_coupled=True,
        ),
        MethodSpec(
            name="as_bv",
            label="AS-BV",
            verify=as_bv.verify,
            expected_accepted=as_bv.expected_accepted,
            prefetch=as_bv_host.prefetch,
            multi_draft=True,
            block=True,
            exact=True,
            description="AS-BV, exact: select one of K drafts with a computable law, then GBV on it with that law. "
            "Equals GBV at K = 1.",
            colour="#332288",  # Tol indigo
            symbol="hexagon",
            residual="phase 2 is GBV on the selected block with D, the selected block's exact law, in place of p: "
            "r = norm((ω_τ·q − D)+). D mixes the K drafts' proposals, so it is not the plotted p.",
        ),
        # The app's default: the exact multi-draft rule with the highest measured E[tau | drafts] at the app's
        # default K = 2, L = 4, T = 0.7 on the default pair (python -m spectr_gbv.bench.frontier, coupled, 60
        # paper-suite prompts x 16 tokens, assets/results/frontier_handoff: AS-BV+H 0.95623, AS-BV 0.95615,
        # SpecTr-GBV 0.944, SpecTr 0.886; docs/results.md). AS-BV+H is never below AS-BV given the same drafts
        # (it only adds the hand-off), and at K = 2 they nearly tie. Chosen per configuration, never per
        # iteration from the drafts (that would not be exact).
        MethodSpec(
            name="as_bv_handoff",
            label="AS-BV+H",
            verify=as_bv_handoff.verify,
            expected_accepted=as_bv_handoff.expected_accepted,
            prefetch=as_bv_handoff.prefetch,
            multi_draft=True,
            block=True,
            exact=True,
            description="AS-BV with hand-off, exact: where AS-BV's GBV stops, the other drafts still alive at that "
            "node propose to its residual in turn (recursive rejection sampling with their exact conditional laws), "
            "and GBV continues on an accepted one's block. Equals GBV at K = 1; never below AS-BV.",
            colour="#117733",  # Tol green
            symbol="hexagram",
            residual="AS-BV's r = norm((ω_τ·q − D)+) at the stop node, handed to the other drafts alive there: each "
            "proposes its token z to the current residual R with its own law G given the selection (accepted "
            "with min(1, R(z)/G(z)), else R ← norm((R − G)+)); an accepted draft continues by GBV with p.",
            shows_handoff=True,
            app_default=True,
        ),
        MethodSpec(
            name="traversal",
            label="Traversal",
            verify=traversal.verify,
            expected_accepted=traversal.expected_accepted,
            multi_draft=True,
            block=True,
            exact=True,
            description="Traversal Verification (Weng et al. 2025) on the merged trie of the K drafts: leaves tested "
            "depth first, a rejected leaf hands its parent the block residual. Equals GBV at K = 1.",
            colour="#999933",  # Tol olive
            symbol="cross",
            residual="each rejected leaf updates its parent: M_b ← norm((w·M_b − M_s)+) and M_s loses the rejected token "
            "(without replacement); Y is drawn from M_b at the node where the walk stopped.",
            compare_by_default=False,
        ),
        MethodSpec(
            name="spectr_gbv_released",
            label="SpecTr-GBV as released (lossy)",
            verify=spectr_gbv_released.verify,
            expected_accepted=None,
            multi_draft=True,
            block=True,
            exact=False,
            description="The authors' released verifier. It does NOT preserve the target distribution "
            "(total-variation error about 0.11 on the GBV paper's two-token example); shown to measure that bias.",
            colour=LOSSY_RED,  # Okabe-Ito vermillion: lossy, and nothing else
            symbol="x",
            residual="the released Eq. 4: r(x) ∝ Q*·q(x)·(1 − min(P*·p(x)/(Q*·q(x)), 1)^K), with P*, Q* the "
            "accepted prefix's joint draft and target probabilities. This residual is LOSSY: the "
            "output law is not the target's.",
            exact_counterpart="spectr_gbv",
        ),
    ]
}

__all__ = ["METHODS", "MethodSpec", "SubBlockTest", "VerifyInput", "VerifyResult"]
