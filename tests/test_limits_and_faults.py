"""Holding up in public: per-request limits, operator overrides, safe loading, and faults.

Each case goes through the app's own handlers: the user gets a clear gr.Error, and the next
valid request on the same process succeeds.
"""

from __future__ import annotations

import dataclasses

import gradio as gr
import pytest
import torch

import components.serving.limits as limits_module
from components.serving.limits import Budget, Limits
from components.tabs import explorer, fidelity, generate, sweep
from spectr_gbv import METHODS
from helpers import last, toy_generate
from tiny_models import save_tiny_llama

pytestmark = pytest.mark.unit


def assert_next_request_succeeds():
    assert toy_generate()[2]["new_tokens"] == 20


def test_limits_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("SPECTR_GBV_MAX_BLOCK_TOKENS", "12")
    monkeypatch.setenv("SPECTR_GBV_ALLOW_ANY_MODEL", "1")
    loaded = Limits.from_env()
    assert loaded.block_tokens == 12 and loaded.allow_any_model and loaded.new_tokens == 256
    monkeypatch.setenv("SPECTR_GBV_MAX_SECONDS", "soon")
    with pytest.raises(ValueError, match="SPECTR_GBV_MAX_SECONDS must be a whole number"):
        Limits.from_env()


def test_k_times_l_over_the_memory_limit_is_refused():
    with pytest.raises(gr.Error, match=r"K x L = 8 x 16 = 128 .*limit of \d+ drafted tokens"):
        toy_generate(K=8, L=16)
    assert_next_request_succeeds()


def test_prompt_tokens_over_the_limit_are_refused(limits):
    limits(prompt_tokens=5)
    with pytest.raises(gr.Error, match="the prompt is 6 tokens long, over this server's limit of 5"):
        toy_generate(prompt="the cat sat on the mat")


def test_a_request_past_its_iteration_or_time_budget_is_stopped(limits, monkeypatch):
    """Stopped mid-run, Generate keeps the iterations that finished and says where and why it stopped."""
    limits(iterations=3)
    _html, line, data, _state, _slider, grid, _figure, details = toy_generate(L=1, tokens=40)
    assert data["target_calls"] == 3 and 3 <= data["new_tokens"] < 40  # L = 1: one or two tokens an iteration
    assert f"stopped at {data['new_tokens']} / 40 tokens" in line and "more than 3 decoding iterations" in line
    assert data["stopped"] and 'class="grid-row"' in grid and details["iteration"] == 1  # the explorer is filled
    budget = Budget(dataclasses.replace(limits_module.LIMITS, seconds=5))
    clock = iter([1e9])  # the next reading is far past the deadline
    monkeypatch.setattr(limits_module.time, "monotonic", lambda: next(clock))
    with pytest.raises(ValueError, match="ran past this server's limit of 5 s"):
        budget.tick()


def test_sweep_and_fidelity_sizes_are_bounded(limits):
    limits(sweep_runs=4)
    with pytest.raises(gr.Error, match=r"2 methods x 3 values = 6 runs .*limit of \d+ runs"):
        last(sweep.run_sweep("toy", "the", ["sd", "gbv"], "K", "1,2,3", 2, 2, 0.7, 5, 0))
    with pytest.raises(gr.Error, match="K x L = 8 x 16"):  # every swept value must fit the memory limit
        last(sweep.run_sweep("toy", "the", ["sd"], "L", "2, 16", 8, 2, 0.7, 5, 0))
    limits(fidelity_runs=50)
    with pytest.raises(gr.Error, match="this server's limit for this pair"):
        last(fidelity.run_fidelity("toy", "the", "sd", 1, 2, 1.0, 60, 1))
    assert last(fidelity.run_fidelity("toy", "the", "sd", 1, 2, 1.0, 50, 1))[-1]["runs"] == 50


def test_arbitrary_models_only_when_the_operator_allows_them(limits, tmp_path):
    target, draft = save_tiny_llama(tmp_path / "t", seed=1), save_tiny_llama(tmp_path / "d", seed=2)
    custom = f"{target}, {draft}"
    with pytest.raises(gr.Error, match="unknown model pair"):
        toy_generate(pair=custom, prompt="w1 w2")
    limits(allow_any_model=True)
    result = last(generate.generate_stream(custom, "w1 w2", "spectr_gbv", 2, 3, 0.8, 6, 0))
    assert 1 <= result[2]["new_tokens"] <= 6 and result[2]["pair"].startswith("custom:")
    with pytest.raises(gr.Error, match="could not load model"):
        toy_generate(pair=f"{tmp_path / 'missing'}, {draft}", prompt="w1")
    assert_next_request_succeeds()


def test_hub_models_never_run_remote_code():
    import inspect

    from spectr_gbv.models import hf

    source = inspect.getsource(hf)
    assert "trust_remote_code=True" not in source and source.count("trust_remote_code=False") >= 2


@pytest.mark.parametrize(
    "fault, message",
    [
        (RuntimeError("boom in the verifier"), "internal error \\(RuntimeError: boom in the verifier\\)"),
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), "out of memory"),
        (RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1 bytes"), "out of memory"),
        (MemoryError(), "out of memory"),
    ],
)
def test_a_fault_inside_a_verifier_is_a_message_and_the_server_carries_on(monkeypatch, fault, message):
    def broken(inp, rng):
        raise fault

    monkeypatch.setitem(METHODS, "sd", dataclasses.replace(METHODS["sd"], verify=broken))
    with pytest.raises(gr.Error, match=message):
        toy_generate(method="sd")
    monkeypatch.undo()
    assert_next_request_succeeds()
    assert toy_generate(method="sd")[2]["new_tokens"] == 20


def test_sessions_keep_their_own_state():
    """Two sessions' runs never share a state object, and each explorer shows its own run."""
    *_, state_a, _, grid_a, _, _ = toy_generate(prompt="the cat")
    *_, state_b, _, grid_b, _, _ = toy_generate(prompt="the dog", method="sd", K=1)
    assert state_a is not state_b and state_a.record.prompt_ids != state_b.record.prompt_ids
    assert explorer.show_iteration(state_a, 1)[0] == grid_a and explorer.show_iteration(state_b, 1)[0] == grid_b
