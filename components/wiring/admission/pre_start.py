"""Checked before it starts: a run whose estimate does not fit the budget is refused before any model call.

Every view's handler calls `check` with its settings before it loads a model or decodes a
token. The estimate is components.wiring.admission.cost's (expected seconds on this pair at these
settings), and it must fit cost.CAP_FRACTION of the time a request may take (the margin the
sliders' caps keep too, for a server busier than measured). A run over it is refused with
`OverBudget`: the estimate, the time allowed, and the fixes, each the largest value of one
setting that fits with every other setting as given (fewer tokens, fewer repeats, a smaller K
or L, the first sweep values, a smaller N), which the page offers as buttons
(components.wiring.admission.fix_buttons).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from spectr_gbv import AUTOREGRESSIVE, METHODS

from . import caps, cost
from .budget_stops import counted

VIEWS = ("generate", "race", "compare", "sweep", "fidelity")
VIEW_NAMES = {"generate": "Generate", "race": "The race", "compare": "Compare", "sweep": "The sweep",
              "fidelity": "The fidelity check"}


@dataclass(frozen=True)
class Plan:
    """What a view would run, checked: every setting its estimate reads (a view leaves the others at their defaults)."""

    view: str
    pair_key: str
    methods: tuple[str, ...]  # Generate, the race and Fidelity: their one method
    num_drafts: int
    draft_length: int
    max_new_tokens: int  # tokens per run (Fidelity: unused)
    repeats: int = 1  # Compare, Sweep: seeds per run
    coupled: bool = False  # Compare
    axis: str = "K"  # Sweep
    values: tuple[float, ...] = ()  # Sweep
    num_runs: int = 0  # Fidelity's N
    num_tokens: int = 1  # Fidelity's first tokens compared

    def seconds(self) -> float:
        """The expected seconds of this run (components.wiring.admission.cost)."""
        key, k, length, tokens = self.pair_key, self.num_drafts, self.draft_length, self.max_new_tokens
        if self.view == "generate":
            return cost.run_seconds(key, self.methods[0], k, length, tokens)
        if self.view == "race":
            return cost.run_seconds(key, AUTOREGRESSIVE, k, length, tokens) + cost.run_seconds(key, self.methods[0], k,
                                                                                               length, tokens)
        if self.view == "compare":
            return cost.compare_seconds(key, len(self.methods), k, length, tokens, self.repeats, self.coupled)
        if self.view == "sweep":
            return cost.sweep_seconds(key, len(self.methods), self.axis, list(self.values), k, length, tokens,
                                      self.repeats)
        return cost.fidelity_seconds(key, self.methods[0], k, length, self.num_runs, self.num_tokens)

    def fits(self) -> bool:
        return cost.fits_seconds(self.seconds(), cost.CAP_FRACTION)


@dataclass(frozen=True)
class Fix:
    """One setting at the largest value that fits, every other setting as given."""

    setting: str  # the control it sets: max_new_tokens, repeats, num_drafts, draft_length, values, num_runs, num_tokens
    value: object  # the value to set (values: the sweep's values as the box's text)
    text: str  # what it is, for the message and the button: "40 tokens", "L = 2"


class OverBudget(ValueError):
    """A run refused before it started: its estimate is over the budget. `fixes` are what would fit."""

    def __init__(self, message: str, fixes: list[Fix]):
        super().__init__(message)
        self.fixes = fixes


# ------------------------------------------------------------------ the fixes


def _uses(plan: Plan, setting: str) -> bool:
    """Whether lowering `setting` changes what this view runs (a K every method ignores does not; nor a swept one)."""
    methods = [m for m in plan.methods if m != AUTOREGRESSIVE]
    if setting == "num_drafts":
        return plan.axis != "K" if plan.view == "sweep" else any(METHODS[m].multi_draft for m in methods)
    if setting == "draft_length":
        return bool(methods) and not (plan.view == "sweep" and plan.axis == "L")
    if setting == "max_new_tokens":
        return plan.view != "fidelity"
    if setting == "repeats":
        return plan.view in ("compare", "sweep")
    if setting == "values":
        return plan.view == "sweep"
    return plan.view == "fidelity"  # num_runs, num_tokens


def _largest(plan: Plan, setting: str, least: int, current: int) -> int | None:
    """The largest value of `setting` in [least, current) whose plan fits; None when even `least` does not."""
    found = cost.largest_fitting(lambda n: replace(plan, **{setting: least + n - 1}).fits(), current - least)
    return least + found - 1 if found else None


def _number_fix(plan: Plan, setting: str, least: int, text) -> Fix | None:
    current = getattr(plan, setting)
    value = _largest(plan, setting, least, current) if current > least else None
    return None if value is None else Fix(setting, value, text(value))


def _values_fix(plan: Plan) -> Fix | None:
    """The longest start of the sweep's values that fits."""
    for count in range(len(plan.values) - 1, 0, -1):
        start = plan.values[:count]
        if replace(plan, values=start).fits():
            shown = ", ".join(f"{v:g}" for v in start)
            return Fix("values", shown, f"the first {count} values ({shown})")
    return None


def fixes(plan: Plan) -> list[Fix]:
    """Each setting this view reads at the largest value that fits, the others as given (one at a time)."""
    per_run = " per run" if plan.view in ("compare", "sweep", "race") else ""
    makers = {
        "max_new_tokens": lambda: _number_fix(plan, "max_new_tokens", 1, lambda n: counted(n, "token" + per_run)),
        "repeats": lambda: _number_fix(plan, "repeats", 1, lambda n: counted(n, "repeat")),
        "values": lambda: _values_fix(plan),
        "num_runs": lambda: _number_fix(plan, "num_runs", caps.FIDELITY_MIN_RUNS, lambda n: f"N = {n} runs"),
        "num_tokens": lambda: _number_fix(plan, "num_tokens", 1, lambda n: f"{counted(n, 'first token')} compared"),
        "draft_length": lambda: _number_fix(plan, "draft_length", 1, lambda n: f"L = {n}"),
        "num_drafts": lambda: _number_fix(plan, "num_drafts", 1, lambda n: f"K = {n}"),
    }
    found = [makers[setting]() for setting in makers if _uses(plan, setting)]
    return [fix for fix in found if fix is not None]


def fewest_methods_hint(plan: Plan) -> str:
    """Compare and Sweep: how many of the ticked methods would fit, the rest as given ('' when none or all)."""
    if plan.view not in ("compare", "sweep") or len(plan.methods) < 2:
        return ""
    most = cost.largest_fitting(lambda n: replace(plan, methods=plan.methods[:n]).fits(), len(plan.methods) - 1)
    return f"at most {most} of the {len(plan.methods)} methods" if most else ""


# ------------------------------------------------------------------ the check


def refusal(plan: Plan) -> str:
    """Why `plan` will not start, and what would fit instead."""
    allowed = cost.CAP_FRACTION * cost.budget_seconds()
    found = [fix.text for fix in fixes(plan)]
    hint = fewest_methods_hint(plan)
    found += [hint] if hint else []
    instead = (f"each of these alone would fit: {'; '.join(found)}" if found
               else "nothing smaller of these settings fits: fewer methods, or a teaching pair")
    return (f"{VIEW_NAMES[plan.view]} at these settings is estimated to take {cost.about(plan.seconds())}, more than the "
            f"{allowed:.0f} s a run may be estimated at on this server (its limit of {cost.budget_seconds():.0f} s per "
            f"request, less a margin), so it was not started; {instead}")


def check(plan: Plan) -> None:
    """Refuse `plan` (OverBudget, before any model call) when its estimate does not fit the budget."""
    if not plan.fits():
        raise OverBudget(refusal(plan), fixes(plan))
