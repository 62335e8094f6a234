"""Exact E[tau] and total-variation error of every method on the instances of docs/algorithms.md §4.6.

    python -m spectr_gbv.bench.exact_table

Computed by exact enumeration (`spectr_gbv.exact`): every draft tuple, every coin, every
token draw. TV is the distance between the output law continued by the target and the
target's own law of L+1 tokens; an exact method shows ~1e-16 (rounding), the released
SpecTr-GBV rule shows its bias.
"""

from __future__ import annotations

from ..exact import continued_law, iteration_law, target_law, total_variation_to_target
from ..methods import METHODS
from ..toy import constant

INSTANCES = [  # (target q, draft p, L, K values)
    ((1 / 3, 2 / 3), (2 / 3, 1 / 3), 2, (1, 2, 3)),
    ((0.5, 0.3, 0.2), (0.2, 0.3, 0.5), 2, (1, 2)),
]


def main() -> None:
    names = list(METHODS)
    print("| q (target) | p (draft) | L | K | " + " | ".join(f"{n} E[tau] (TV)" for n in names) + " |")
    print("|" + "---|" * (len(names) + 4))
    for q, p, L, Ks in INSTANCES:
        target, draft = constant(q), constant(p)
        reference = target_law(target, L + 1)
        for K in Ks:
            cells = []
            for name in names:
                if not METHODS[name].multi_draft and K > 1:
                    cells.append("–")
                    continue
                law = iteration_law(METHODS[name], target, draft, K, L)
                tv = total_variation_to_target(continued_law(law.emitted, target, L + 1), reference)
                cells.append(f"{law.expected_accepted:.6f} ({tv:.2g})")
            fmt = lambda v: "(" + ", ".join(f"{x:.3g}" for x in v) + ")"
            print(f"| {fmt(q)} | {fmt(p)} | {L} | {K} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
