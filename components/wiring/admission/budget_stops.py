"""Budget stops: what finished is kept, the log gets one line, and where nothing finished the answer
says what would have fit.

A request's Budget (components.serving.limits) stops it between two steps of work, and the views
keep what finished (components.wiring.runs: the header says where it stopped and why). A budget
can also stop a request before its first unit of work is done (a Compare method, a Sweep point,
Fidelity's first comparison with the exact law; Generate's unit, an iteration, has always
finished when its budget is checked, so Generate shows at least that). The view then answers
with what there is: the tokens of the run in progress (`Ticker` keeps them) or Fidelity's runs
so far, counted. It also says what would have fit (`what_fits`): how many tokens or runs would
finish inside this request's budget at this server's speed as the request just measured it
(seconds per decoding step), times the steps components.wiring.admission.cost expects them to take.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from spectr_gbv.records import IterationRecord

from ...serving.limits import Budget, BudgetSpent
from . import cost
from ..runs import STOPS, Stop

LOG = logging.getLogger("spectr_gbv.app")

# What each view's visitor can ask for instead, after a budget stop (the budget's own message names no view).
ADVICE = {"generate": "ask for fewer tokens", "race": "ask for fewer tokens",
          "compare": "ask for fewer tokens, methods or repeats",
          "sweep": "ask for fewer tokens, methods, values or repeats",
          "fidelity": "ask for fewer runs or tokens compared"}


class StopPressed(BudgetSpent):
    """The visitor pressed Stop (components.wiring.runs.STOPS): the run ends at its next step, and, as after a
    budget stop, what finished is shown; the header says it was stopped."""


class Ticker:
    """A request's callback after each step of work (a decoding iteration, a coupled step, a scoring call).

    It ticks the request's Budget, and keeps the iterations of the decoding run in progress, so a
    stop inside the first run can still show what that run decoded."""

    def __init__(self, budget: Budget | None = None, session: str | None = None):
        self.budget = budget or Budget()
        self.session = session  # whose Stop ends the request at its next step (None: no Stop)
        self.runs = 0  # decoding runs started
        self.current: list[IterationRecord] = []  # the iterations of the last run started

    def __call__(self, step=None) -> None:
        if isinstance(step, IterationRecord):
            if step.index == 0:  # each run numbers its iterations from 0
                self.runs, self.current = self.runs + 1, []
            self.current.append(step)  # before the tick: an iteration that ran past the budget has still finished
        self.budget.tick()
        reason = STOPS.take(self.session) if self.session is not None else None
        if reason:
            raise StopPressed(reason)

    def tokens(self) -> list[int]:
        return [t for it in self.current for t in it.emitted]

    def partial_run(self, label: str, text: Callable[[list[int]], str]) -> dict:
        """The run in progress for an answer's data: what it was, its tokens so far and their text."""
        tokens = self.tokens()
        return {"run": label, "new_tokens": len(tokens), "target_calls": len(self.current), "text": text(tokens)}

    def in_progress(self, label: str, total: int) -> str:
        """'SD, seed 0 had decoded 12 of 40 tokens in 8 target calls'."""
        calls = counted(len(self.current), "target call")
        return f"{label} had decoded {len(self.tokens())} of {total} tokens in {calls}"


def counted(n: int, unit: str) -> str:
    """'1 token per run', '2 tokens per run', '2 target calls': the noun (before any 'per') takes the plural."""
    noun, per, rest = unit.partition(" per ")
    return f"{n} {noun}{'' if n == 1 else 's'}{per}{rest}"


def budget_stop(view: str, done: int, total: int, unit: str, error: BudgetSpent, note: str = "") -> Stop:
    """The Stop of a budget stop (`note`: what the answer adds to the budget's message and the view's advice),
    logged in one INFO line; of a Stop pressed, the same without the note (nothing needs to fit)."""
    if isinstance(error, StopPressed):
        LOG.info("%s stopped by its visitor at %d / %d %s", view, done, total, unit)
        return Stop(done, total, unit, str(error))
    reason = f"{error}: {ADVICE[view]}"
    reason = f"{reason}; {note}" if note else reason
    LOG.info("%s stopped by its budget at %d / %d %s: %s", view, done, total, unit, reason)
    return Stop(done, total, unit, reason)


def what_fits(ticker: Ticker, nothing: str, unit: str, steps_of: Callable[[int], float], most: int, least: int = 1,
              so_far: str = "", otherwise: str = "") -> str:
    """What would fit this request's budget, in `unit` (singular): the largest n up to `most` whose expected
    decoding steps (`steps_of(n)`) fit its iterations and, at the seconds a step took here, its time.

    '`nothing` (no method) had finished after 61 s (118 decoding steps, 0.52 s each on this server; `so_far`):
    about 30 tokens per run would fit'; under `least`, 'not even 10 runs would fit' and `otherwise`."""
    budget = ticker.budget
    elapsed = max(time.monotonic() - budget.started, 0.0)
    steps = max(budget.iterations, 1)  # the tick that stopped the request counted its step
    per_step, seconds = elapsed / steps, budget.deadline - budget.started

    def fits(n: int) -> bool:
        need = steps_of(n)
        return need <= budget.limits.iterations and need * per_step <= seconds

    n = cost.largest_fitting(fits, most)
    each = f"{per_step:.2f} s" if per_step >= 0.01 else "under 0.01 s"
    measured = (f"{nothing} had finished after {elapsed:.0f} s ({counted(steps, 'decoding step')}, {each} each on "
                f"this server{'; ' + so_far if so_far else ''})")
    if n < least:
        return f"{measured}: not even {counted(least, unit)} would fit{otherwise}"
    return f"{measured}: about {counted(n, unit)} would fit"
