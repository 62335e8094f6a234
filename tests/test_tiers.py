"""The tiers: every test has exactly one tier marker, and no test module imports another.

Two guards. At collection, tests/conftest.py stops the run with the list of tests that do not
carry exactly one tier marker (checked here on stand-in items, with and without a tier). Here,
every tests/test_*.py is read as source, so that `make check` (which selects by tier) fails on a
new module without a tier instead of leaving it out in silence: a module either sets
`pytestmark` to one tier and marks no test itself, or marks each of its tests with one tier.
"""

from __future__ import annotations

import ast
import configparser
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import TIERS, pytest_collection_modifyitems, stray_browser_tests, tier_problems

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parent
MODULES = sorted(TESTS.glob("test_*.py"))


def tiers_named(node: ast.expr) -> list[str]:
    """The tier marks written in a decorator or a `pytestmark` value (a mark, or a list of marks)."""
    if isinstance(node, (ast.List, ast.Tuple)):
        return [tier for element in node.elts for tier in tiers_named(element)]
    if isinstance(node, ast.Call):
        node = node.func
    if (isinstance(node, ast.Attribute) and node.attr in TIERS and isinstance(node.value, ast.Attribute)
            and node.value.attr == "mark"):
        return [node.attr]
    return []


def module_tiers(path: Path) -> tuple[list[str], dict[str, list[str]]]:
    """(the tiers of the module's `pytestmark`, {test function: the tiers it is decorated with})."""
    module, functions = [], {}

    def read(node, prefix="", inherited=()):
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets):
            module.extend(tiers_named(node.value))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_"):
            functions[prefix + node.name] = [*inherited, *(t for d in node.decorator_list for t in tiers_named(d))]
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            for inner in node.body:
                read(inner, f"{node.name}.", [t for d in node.decorator_list for t in tiers_named(d)])

    for node in ast.parse(path.read_text()).body:
        read(node)
    return module, functions


def test_the_tiers_are_the_markers_pytest_ini_declares(request):
    ini = configparser.ConfigParser()
    ini.read(request.config.inipath)
    declared = [line.split(":")[0].strip() for line in ini["pytest"]["markers"].strip().splitlines()]
    assert sorted(declared) == sorted(TIERS)


def module_problems(path: Path) -> list[str]:
    module, functions = module_tiers(path)
    if not functions:
        return [f"{path.name}: no test functions to read"]
    if module:
        marked = {name: tiers for name, tiers in functions.items() if tiers}
        return ([f"{path.name}: pytestmark names {module}; one tier a module"] if len(module) > 1 else []) + (
            [f"{path.name}: sets pytestmark = {module[0]} and marks tests too: {marked}"] if marked else [])
    return [f"{path.name}::{name}: {', '.join(tiers) or 'no tier'}"
            for name, tiers in functions.items() if len(tiers) != 1]


def test_every_test_module_gives_each_test_exactly_one_tier():
    """Without a module-level `pytestmark = pytest.mark.<tier>`, every test needs exactly one tier mark."""
    assert len(MODULES) > 50
    assert [problem for path in MODULES for problem in module_problems(path)] == []


def test_the_source_reader_sees_a_module_without_a_tier_and_one_with_two(tmp_path):
    unmarked = tmp_path / "test_unmarked.py"
    unmarked.write_text("import pytest\n\n\ndef test_a():\n    pass\n")
    assert module_tiers(unmarked) == ([], {"test_a": []})
    mixed = tmp_path / "test_mixed.py"
    mixed.write_text("import pytest\n\npytestmark = [pytest.mark.skipif(False, reason='x'), pytest.mark.unit]\n\n\n"
                     "@pytest.mark.statistical\n@pytest.mark.parametrize('n', [1])\ndef test_b(n):\n    pass\n")
    assert module_tiers(mixed) == (["unit"], {"test_b": ["statistical"]})
    assert module_problems(unmarked) == ["test_unmarked.py::test_a: no tier"]
    assert module_problems(mixed) == ["test_mixed.py: sets pytestmark = unit and marks tests too: {'test_b': ['statistical']}"]


def item(nodeid: str, *marks: str):
    return SimpleNamespace(nodeid=nodeid, iter_markers=lambda: [SimpleNamespace(name=m) for m in marks])


def test_the_collection_stops_on_a_test_without_exactly_one_tier():
    items = [item("tests/test_a.py::test_one", "exact", "parametrize"), item("tests/test_b.py::test_none", "skipif"),
             item("tests/test_c.py::test_two", "unit", "statistical")]
    assert tier_problems(items) == ["tests/test_b.py::test_none: no tier", "tests/test_c.py::test_two: statistical, unit"]
    with pytest.raises(pytest.UsageError, match=r"2 test\(s\) without exactly one tier marker"):
        pytest_collection_modifyitems(None, items)
    pytest_collection_modifyitems(None, items[:1])  # one tier: nothing to say


def test_a_browser_test_outside_the_browser_files_stops_the_collection():
    """make test's alone part collects tests/test_browser*.py and the serial modules only (Makefile)."""
    items = [item("tests/test_browser_x.py::test_one", "browser"), item("tests/test_views.py::test_two", "browser")]
    assert stray_browser_tests(items) == ["tests/test_views.py::test_two"]
    with pytest.raises(pytest.UsageError, match="browser tests outside"):
        pytest_collection_modifyitems(None, items)


def test_this_sessions_tests_each_carry_one_tier(request):
    assert tier_problems(request.session.items) == []


def test_no_test_module_imports_another():
    """Shared helpers live in conftest.py (fixtures) and in non-test modules such as helpers.py."""
    found = []
    for path in sorted(TESTS.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            found += [f"{path.name}: {name}" for name in names if name.split(".")[-1].startswith("test_")
                      or name.startswith("tests.")]
    assert found == []
