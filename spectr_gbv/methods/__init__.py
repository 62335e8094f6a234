"""The registry of verification methods: the only place a method name is mapped to code.

Pure tensor code: nothing under `spectr_gbv.methods` imports a model library or a UI.
"""

from __future__ import annotations

from . import as_bv, as_bv_handoff, gbv, rrs, sd, spectr, spectr_gbv, spectr_gbv_released, traversal
from .base import MethodSpec, SubBlockTest, VerifyInput, VerifyResult

METHODS: dict[str, MethodSpec] = {
    spec.name: spec
    for spec in [
        MethodSpec(
            name="sd",
            label="SD",
            verify=sd.verify,
            expected_accepted=sd.expected_accepted,
            multi_draft=False,
            block=False,
            exact=True,
            description="Standard speculative sampling (Leviathan et al.; Chen et al.): one draft, token by token.",
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
        ),
        MethodSpec(
            name="spectr",
            label="SpecTr",
            verify=spectr.verify,
            expected_accepted=spectr.expected_accepted,
            multi_draft=True,
            block=False,
            exact=True,
            description="SpecTr (Sun et al. 2023): K-SEQ selection among K drafts with the optimal rho, token by token.",
        ),
        MethodSpec(
            name="gbv",
            label="GBV",
            verify=gbv.verify,
            expected_accepted=gbv.expected_accepted,
            multi_draft=False,
            block=True,
            exact=True,
            description="Greedy block verification (Sun et al. 2024): one draft, whole sub-blocks accepted at once.",
        ),
        MethodSpec(
            name="spectr_gbv",
            label="SpecTr-GBV",
            verify=spectr_gbv.verify,
            expected_accepted=spectr_gbv.expected_accepted,
            multi_draft=True,
            block=True,
            exact=True,
            description="SpecTr-GBV, exact: K drafts verified by block (recursive block K-SEQ). "
            "Equals GBV at K = 1 and SpecTr at L = 1.",
        ),
        MethodSpec(
            name="as_bv",
            label="AS-BV",
            verify=as_bv.verify,
            expected_accepted=as_bv.expected_accepted,
            multi_draft=True,
            block=True,
            exact=True,
            description="AS-BV, exact: select one of K drafts with a computable law, then GBV on it with that law. "
            "Equals GBV at K = 1.",
        ),
        MethodSpec(
            name="as_bv_handoff",
            label="AS-BV+H",
            verify=as_bv_handoff.verify,
            expected_accepted=as_bv_handoff.expected_accepted,
            multi_draft=True,
            block=True,
            exact=True,
            description="AS-BV with hand-off, exact: where AS-BV's GBV stops, the other drafts still alive at that "
            "node propose to its residual in turn (recursive rejection sampling with their exact conditional laws), "
            "and GBV continues on an accepted one's block. Equals GBV at K = 1; never below AS-BV.",
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
        ),
    ]
}

__all__ = ["METHODS", "MethodSpec", "SubBlockTest", "VerifyInput", "VerifyResult"]
