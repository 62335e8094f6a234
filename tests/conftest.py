"""Shared toy worlds for the tests (constant and context-dependent distribution functions),
the fixtures several modules use, and the tiers: every test carries exactly one tier marker
(docs/tests.md), or the collection stops with the list of tests that do not."""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root: app.py, components/
from one_tls_context import share_one_tls_context  # noqa: E402  (tests/ is on the path: pytest's rootdir)

share_one_tls_context()  # the tests' HTTP clients stop loading the CA bundle per request (one_tls_context.py)
# The apps the tests serve (and their child processes) stay eager: a background compile would load
# the machine for minutes. tests/test_compiled.py and tests/test_compile_switch.py compile on purpose.
os.environ.setdefault("SPECTR_GBV_COMPILE", "off")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # Two workers on two cores: one torch thread each. Torch's default (every core per process) makes
    # their small ops wait on each other's spinning threads (a 5 us softmax took 0.8 ms).
    torch.set_num_threads(1)

# The tiers, as declared in pytest.ini (tests/test_tiers.py checks that the two lists agree).
TIERS = ("exact", "unit", "api", "statistical", "model", "browser", "slow")


def tier_problems(items) -> list[str]:
    """'node id: tiers' for every item without exactly one tier marker."""
    problems = []
    for item in items:
        tiers = sorted({mark.name for mark in item.iter_markers() if mark.name in TIERS})
        if len(tiers) != 1:
            problems.append(f"{item.nodeid}: {', '.join(tiers) or 'no tier'}")
    return problems


# `make test` runs the suite in two parts: `pytest -n 2 --dist worksteal -m "not serial and not browser"`
# (two workers), then `pytest -m "serial or browser"` alone, on the files named in tests/serial_modules.txt
# and tests/test_browser*.py only. Serial: modules that assert timings under load, or that load both cores
# themselves (docs/tests.md); a module, as xdist's groups do not hold under pytest 9, whose node ids xdist 3.8
# cannot tag. The browser tests run alone too: two workers of their own ran them no faster on 2 cores (9 min
# 24 s against about 10 min: Chromium keeps a core and more busy), and beside the other tests one's Stop
# once came after its run had ended.
SERIAL_MODULES = frozenset(line.strip() for line in (Path(__file__).parent / "serial_modules.txt").read_text().splitlines()
                           if line.strip() and not line.startswith("#"))
BROWSER_FILES = "test_browser*.py"  # where browser tests live: the Makefile's alone part collects only these


def stray_browser_tests(items) -> list[str]:
    """The node ids of browser tests in files the alone part of make test does not collect."""
    return [item.nodeid for item in items if any(mark.name == "browser" for mark in item.iter_markers())
            and not Path(item.nodeid.split("::")[0]).match(BROWSER_FILES)]


def pytest_configure(config):
    config.addinivalue_line("markers", "serial: runs alone after the parallel part of make test (tests/conftest.py)")


@pytest.hookimpl(tryfirst=True)  # the serial marks are there before -m deselects by them
def pytest_collection_modifyitems(config, items):
    for item in items:
        if getattr(item, "path", None) is not None and item.path.name in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
    stray = stray_browser_tests(items)
    if stray:
        raise pytest.UsageError(f"browser tests outside tests/{BROWSER_FILES}, where make test's alone part would "
                                f"not collect them: {', '.join(stray[:5])}")
    problems = tier_problems(items)
    if problems:
        shown = "\n  ".join(problems[:20]) + ("\n  ..." if len(problems) > 20 else "")
        raise pytest.UsageError(
            f"{len(problems)} test(s) without exactly one tier marker ({', '.join(TIERS)}); give the module a "
            f"`pytestmark = pytest.mark.<tier>`, or each test its own mark (docs/tests.md):\n  {shown}")


@pytest.fixture
def limits(monkeypatch):
    """Swap the server's limits for one test (the app and the limits module share one object):
    `limits(seconds=0)` returns the new Limits."""
    import components.serving.limits as limits_module

    def apply(**changes):
        new = dataclasses.replace(limits_module.LIMITS, **changes)
        monkeypatch.setattr(limits_module, "LIMITS", new)
        return new

    return apply


@pytest.fixture
def free_estimates(monkeypatch):
    """Every pair's estimated seconds zero, its acceptance kept (components.wiring.admission.cost): a server far slower
    than the estimates, where a run passes the pre-start check and its budget still stops it mid-run."""
    from components.wiring.admission import cost

    for key, costs in list(cost.PAIR_COSTS.items()):
        monkeypatch.setitem(cost.PAIR_COSTS, key, dataclasses.replace(
            costs, step_s=0.0, iteration_s=0.0, position_s=0.0, draft_step_s=0.0, prefill_s=0.0))


def f64(values) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float64)


@pytest.fixture
def large_vocabulary_paths(monkeypatch):
    """AS-BV's stand-ins used above 64 tokens, switched on at tiny sizes: the order ranks only the
    2 likeliest proposals by ratio, the LP keeps 2 tokens, and alive counts with posterior
    below 0.3 are served by "first"."""
    from spectr_gbv.methods import as_bv_fast, as_bv_laws, as_bv_lp

    monkeypatch.setattr(as_bv_fast, "ORDER_HEAD", 2)
    monkeypatch.setattr(as_bv_lp, "MAX_LP_TOKENS", 2)
    monkeypatch.setattr(as_bv_laws, "MIN_ALIVE_MASS", 0.3)
    as_bv_lp._solve_mixture.cache_clear()


def constant(probs) -> "callable":
    """A context-independent model: the same vector after every prefix."""
    vector = torch.tensor(probs, dtype=torch.float64)
    return lambda context: vector


def _context_seed(seed: int, context: tuple[int, ...]) -> int:
    value = seed * 1_000_003 + 17
    for token in context:
        value = (value * 31 + token + 1) % (2**61 - 1)
    return value


def dirichlet_model(vocab_size: int, seed: int, concentration: float = 1.0):
    """A context-dependent model: an independent Dirichlet draw for every context (memoised)."""
    cache: dict[tuple[int, ...], torch.Tensor] = {}

    def probs(context: tuple[int, ...]) -> torch.Tensor:
        if context not in cache:
            generator = torch.Generator().manual_seed(_context_seed(seed, context))
            gamma = torch._standard_gamma(torch.full((vocab_size,), concentration, dtype=torch.float64), generator=generator)
            cache[context] = gamma / gamma.sum()
        return cache[context]

    return probs


def mixture(a, b, weight: float):
    """weight * a + (1 - weight) * b: a draft that partly agrees with the target."""
    return lambda context: weight * a(context) + (1 - weight) * b(context)


def dirichlet_pair(vocab: int, seed: int, kind: str, concentration: float = 0.7):
    """(target, draft) for the exactness tests: Dirichlet tables; the draft independent of the
    target ("independent") or a 50/50 mixture with it ("mixed")."""
    target = dirichlet_model(vocab, seed, concentration)
    other = dirichlet_model(vocab, seed + 1000, concentration)
    return target, (mixture(target, other, 0.5) if kind == "mixed" else other)


def fidelity_error(method, target_fn, draft_fn, num_drafts: int, draft_length: int) -> float:
    """TV between the method's output law, continued by the target, and the target's own law
    over L+1 tokens, by exact enumeration (`spectr_gbv.exact`): 0 for an exact method."""
    from spectr_gbv.exact import continued_law, iteration_law, target_law, total_variation_to_target

    law = iteration_law(method, target_fn, draft_fn, num_drafts, draft_length)
    continued = continued_law(law.emitted, target_fn, draft_length + 1)
    return total_variation_to_target(continued, target_law(target_fn, draft_length + 1))


def assert_theory_line_is_the_enumerated_mean(method, inp) -> None:
    """`method.expected_accepted(inp)` equals the mean accepted length over every outcome of
    `method.verify(inp, ...)`, enumerated exactly (and the outcomes' probabilities sum to 1)."""
    from spectr_gbv.exact import enumerate_outcomes

    outcomes = enumerate_outcomes(lambda rng: method.verify(inp, rng))
    assert abs(sum(prob for prob, _ in outcomes) - 1.0) <= 1e-12
    enumerated = sum(prob * result.num_accepted for prob, result in outcomes)
    assert abs(method.expected_accepted(inp) - enumerated) <= 1e-12, (method.expected_accepted(inp), enumerated)
