"""Messages to visitors name no environment variables: a refusal says what the limit is and what to change;
which variable sets it is the operator's business (docs/public.md)."""

from __future__ import annotations

import ast
from pathlib import Path

import gradio as gr
import pytest

from components.tabs import fidelity, sweep
from helpers import last

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "SPECTR_GBV_"
READERS = {"_env_int", "get", "getenv", "setdefault", "pop"}  # os.environ.get(...), _env_int(...): reading one is fine


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first.value))
    return ids


def _read_by_name(tree: ast.AST) -> set[int]:
    """String constants that are the name an environment reader is called with, or a subscript of os.environ."""
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in READERS:
                ids.update(id(a) for a in node.args if isinstance(a, ast.Constant))
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            ids.add(id(node.slice))
    return ids


def environment_names_in_strings(path: Path) -> list[str]:
    """Every string (or f-string piece) of `path` that names an SPECTR_GBV_ variable, other than docstrings and
    the names the code reads the environment with."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree) | _read_by_name(tree)
    return [f"{path.name}:{node.lineno}: {node.value[:80]!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and PREFIX in node.value
            and id(node) not in skip]


def test_no_string_a_visitor_can_see_names_an_environment_variable():
    files = sorted(p for folder in ("components/tabs", "components/wiring", "components/serving", "components/render")
                   for p in (ROOT / folder).rglob("*.py"))  # wiring/admission/ too
    assert files
    found = [hit for path in files for hit in environment_names_in_strings(path)]
    assert found == []


def test_the_scan_finds_a_variable_named_in_a_message(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text('"""Reads SPECTR_GBV_X."""\nimport os\nos.environ.get("SPECTR_GBV_X")\n'
                      'raise ValueError(f"over the limit ({1}, SPECTR_GBV_X)")\n', encoding="utf-8")
    assert [hit.split(":")[1] for hit in environment_names_in_strings(sample)] == ["4"]


def test_refusals_say_the_limit_without_the_variable(limits):
    limits(sweep_runs=4, fidelity_runs=50)
    with pytest.raises(gr.Error) as sweep_refusal:
        last(sweep.run_sweep("toy", "the", ["sd", "gbv"], "K", "1,2,3", 2, 2, 0.7, 5, 0))
    with pytest.raises(gr.Error) as fidelity_refusal:
        last(fidelity.run_fidelity("toy", "the", "sd", 1, 2, 1.0, 60, 1))
    for refusal in (sweep_refusal, fidelity_refusal):
        message = str(refusal.value.message)
        assert PREFIX not in message and "limit" in message, message
