"""ZeroGPU conventions (components/serving/gpu.py) without ZeroGPU: the duration each request asks for, the
no-op path, the GPU path under a stand-in for spaces.GPU, and what the handlers hand back.

ZeroGPU itself cannot run here. What can: the duration function on the app's own defaults;
a stand-in decorator with spaces.GPU's calling convention (it calls duration(*args,
**kwargs) and then the function), through which the app's Budget must end inside the
duration; the app imported in a subprocess beside a stand-in `spaces` package with
SPACES_ZERO_GPU set, which must see `spaces` imported before torch, the default pair
built at import, and every model-running handler decorated; and the handlers' results,
which ZeroGPU pickles out of its worker, holding no tensors.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import pickle
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import app
from spectr_gbv.pairs import PAIRS
from components.serving import gpu, limits
from components.tabs import compare, explorer, fidelity, generate, sweep
from components.wiring import inputs
from components.wiring.prompt_set_choice import set_prompts
from components.render.grid import draft_grid_html

ROOT = Path(__file__).resolve().parents[1]
PAIR_KEY = "default"


def ui_defaults() -> dict:
    """The sidebar's values as a visitor first sees them (read from the built app, not restated)."""
    demo = app.build_demo()
    by_label = {b.label: b.value for b in demo.blocks.values() if getattr(b, "label", None) and hasattr(b, "value")}
    return {"method": by_label["Method (Generate, Fidelity, Race)"], "num_drafts": by_label["K (drafts)"],
            "draft_length": by_label["L (draft length)"], "temperature": by_label["T (temperature)"],
            "max_new_tokens": by_label["Max new tokens"], "seed": by_label["Seed"],
            "methods": by_label["Methods (Compare, Sweep)"]}


# ------------------------------------------------------------------------------ duration


@pytest.mark.unit
def test_a_first_generate_on_the_defaults_asks_for_at_most_30_seconds():
    d = ui_defaults()
    runs = gpu.generate_cost(PAIR_KEY, "Hello", d["method"], d["num_drafts"], d["draft_length"], d["temperature"],
                             d["max_new_tokens"], d["seed"])
    assert gpu.MIN_SECONDS <= gpu.seconds(runs) <= 30  # an example runs Generate with these settings too


@pytest.mark.unit
def test_duration_grows_with_tokens_k_l_methods_and_runs_and_is_clamped():
    def generate(k, length, tokens, method="spectr_gbv"):
        return gpu.seconds(gpu.generate_cost(PAIR_KEY, "x", method, k, length, 0.7, tokens, 0))

    assert generate(4, 4, 20) < generate(4, 4, 40) < generate(4, 4, 80)
    assert generate(2, 4, 40) < generate(8, 4, 40)
    assert generate(4, 2, 40) < generate(4, 8, 40)
    assert generate(4, 4, 40, method="ar") < generate(4, 4, 40)  # one target step per token
    compare = [gpu.seconds(gpu.compare_cost(PAIR_KEY, "x", ["sd", "gbv", "spectr"][:n], 4, 4, 0.7, 40, 0, False))
               for n in (1, 2, 3)]
    assert compare[0] < compare[1] < compare[2]
    assert gpu.seconds(gpu.compare_cost(PAIR_KEY, "x", ["sd"], 4, 4, 0.7, 40, 0, True)) > compare[0]  # coupled pass
    sweep = [gpu.seconds(gpu.sweep_cost(PAIR_KEY, "x", ["sd"], "K", values, 4, 4, 0.7, 20, 0))
             for values in ("1", "1, 2", "1, 2, 4")]
    assert sweep[0] < sweep[1] < sweep[2]
    fidelity = [gpu.seconds(gpu.fidelity_cost(PAIR_KEY, "x", "sd", 1, 2, 0.7, n, 3)) for n in (10, 50, 100)]
    assert fidelity[0] < fidelity[1] < fidelity[2]
    assert generate(1, 1, 1) == gpu.MIN_SECONDS
    assert generate(8, 16, 256) == gpu.MAX_SECONDS <= 120  # never more than an anonymous visitor's daily quota


@pytest.mark.unit
def test_teaching_pairs_ask_for_no_gpu_and_model_pairs_do():
    for key in ("toy", "two-token", PAIRS["toy"].label):
        assert gpu.generate_cost(key, "the", "sd", 4, 4, 0.7, 40, 0) is None
        assert gpu.compare_cost(key, "the", ["sd"], 4, 4, 0.7, 40, 0, True) is None
        assert gpu.sweep_cost(key, "the", ["sd"], "K", "1, 2", 4, 4, 0.7, 40, 0) is None
        assert gpu.fidelity_cost(key, "A", "sd", 1, 2, 1.0, 600, 3) is None
    for key in ("default", "smollm2-360m", PAIRS["default"].label, "some/target, some/draft"):
        assert gpu.generate_cost(key, "x", "sd", 4, 4, 0.7, 40, 0) is not None


@pytest.mark.unit
def test_bad_input_asks_for_the_minimum_so_the_handler_can_refuse_it():
    assert gpu.request_seconds(gpu.generate_cost, (PAIR_KEY, "x", "sd", None, 4, 0.7, 40, 0), {}) == gpu.MIN_SECONDS
    assert gpu.request_seconds(gpu.sweep_cost, (PAIR_KEY, "x", ["sd"], "K", "1, two", 4, 4, 0.7, 40, 0), {}) == gpu.MIN_SECONDS
    over = limits.LIMITS.fidelity_runs_llm + 10  # refused by the handler at once: no 120 s asked for it
    assert gpu.request_seconds(gpu.fidelity_cost, (PAIR_KEY, "x", "sd", 1, 2, 0.7, over, 3), {}) == gpu.MIN_SECONDS


@pytest.mark.unit
def test_a_prompt_set_multiplies_the_duration_by_its_prompts_and_a_bad_name_asks_the_minimum():
    def unclamped(cost, *args) -> float:  # the sum `seconds` clamps: a set of 20 is past MAX_SECONDS
        return sum(run.seconds() for run in cost(*args))

    compare = (PAIR_KEY, "x", ["sd", "spectr"], 4, 4, 0.7, 40, 0, True, 2)
    one, over_set = unclamped(gpu.compare_cost, *compare, "prompt"), unclamped(gpu.compare_cost, *compare, "suite-20")
    assert over_set == pytest.approx(20 * one)
    assert unclamped(gpu.compare_cost, *compare, None) == one  # a call that names no set: the prompt alone
    examples = len(set_prompts("examples", PAIR_KEY, "x"))
    assert unclamped(gpu.compare_cost, *compare, "examples") == pytest.approx(examples * one) and examples > 1
    sweep = (PAIR_KEY, "x", ["sd"], "K", "1, 2", 4, 4, 0.7, 20, 0, 1)
    assert unclamped(gpu.sweep_cost, *sweep, "suite-10") == pytest.approx(10 * unclamped(gpu.sweep_cost, *sweep))
    assert gpu.seconds(gpu.compare_cost(*compare, "suite-20")) == gpu.MAX_SECONDS
    for bad in ("suite-7", "../examples", 3, ["examples"]):  # the handler refuses these with words
        assert gpu.request_seconds(gpu.compare_cost, (*compare, bad), {}) == gpu.MIN_SECONDS
        assert gpu.request_seconds(gpu.sweep_cost, (*sweep, bad), {}) == gpu.MIN_SECONDS
    assert gpu.compare_cost("toy", "the", ["sd"], 4, 4, 0.7, 40, 0, True, 1, "suite-20") is None  # still no GPU


def _run_seconds_before_one_cost_model(run) -> float:
    """The reference: a run's seconds as gpu.py computed them before its Run read run_cost.PairCost (its
    STEP_SECONDS, VERIFY_SECONDS, POSITION_SECONDS and PREFILL_SECONDS arithmetic, kept here only)."""
    step, verify, position, prefill = 0.03, 0.06, 0.0005, 0.06
    if run.draft_length == 0:
        per_iteration = step
    else:
        positions = max(run.num_drafts, 1) * (run.draft_length + 1)
        per_iteration = run.draft_length * step + verify + positions * position
    return run.repeats * (prefill + run.tokens * per_iteration)


def _duration_before_one_cost_model(runs) -> int:
    total = 8.0 + sum(_run_seconds_before_one_cost_model(run) for run in runs)
    return max(gpu.MIN_SECONDS, min(gpu.MAX_SECONDS, math.ceil(total)))


@pytest.mark.unit
def test_the_durations_are_those_of_the_old_formula_bit_for_bit():
    """GPU_COST (a PairCost, alpha 0) gives every duration the old constants gave: the same terms, added in
    the same order, so no ceil moves (another order moves ~0.6 % of them by 1 s), clamped or not."""
    assert (gpu.START_SECONDS, gpu.MIN_SECONDS) == (8.0, 10)
    differences, cases = [], 0
    for tokens in range(1, 513, 7):
        for k in range(0, 9):
            for length in range(0, 17):
                for repeats in (1, 2, 3, 7):
                    run = gpu.Run(tokens, k, length, repeats)
                    cases += 1
                    if run.seconds() != _run_seconds_before_one_cost_model(run):  # unclamped, bit for bit
                        differences.append(run)
                    # a request's runs together (Compare: AR twice, the methods, the coupled pass)
                    for together in ([run], [gpu.Run(tokens, repeats=2), run, gpu.Run(tokens, k, length, 1)]):
                        if gpu.seconds(together) != _duration_before_one_cost_model(together):
                            differences.append(together)
    assert cases > 40_000 and differences == []


@pytest.mark.unit
def test_the_cpu_estimates_keep_their_own_sum_bit_for_bit():
    """PairCost.iteration_seconds adds its terms as components.wiring.admission.cost did before the one cost model
    (the fixed part, the positions, the draft steps): the views' defaults and caps do not move either."""
    from components.wiring.admission import cost

    for pair_cost in [*cost.PAIR_COSTS.values(), cost.HUB_COST]:
        for k in range(0, 9):
            for length in range(0, 17):
                before = (pair_cost.iteration_s + pair_cost.position_s * max(k, 1) * (length + 1)
                          + pair_cost.draft_step_s * length)
                assert pair_cost.iteration_seconds(k, length) == before


# ----------------------------------------------------------------- no-op and GPU paths


@pytest.mark.unit
def test_without_zerogpu_the_decorator_returns_the_handler_itself():
    assert not gpu.ON_ZEROGPU  # no `spaces` / SPACES_ZERO_GPU here

    def handler(*args):
        return args

    assert gpu.on_gpu(gpu.generate_cost)(handler) is handler
    gpu.at_start(lambda: pytest.fail("loaded a model at start without ZeroGPU"))


class StandInGPU:
    """spaces.GPU's calling convention: duration(*args, **kwargs) first, then the function."""

    def __init__(self):
        self.asked: list[int] = []

    def __call__(self, *, duration):
        def decorate(fn):
            def call(*args, **kwargs):
                self.asked.append(duration(*args, **kwargs))
                return fn(*args, **kwargs)

            return call
        return decorate


def budget_seen() -> tuple[float | None, float]:
    budget = limits.Budget()
    return budget.gpu_seconds, budget.deadline - time.monotonic()


@pytest.mark.unit
def test_under_zerogpu_a_model_request_asks_its_duration_and_its_budget_ends_inside_it():
    stand_in = StandInGPU()
    handler = gpu.under_gpu(lambda *args: budget_seen(), gpu.generate_cost, stand_in)
    args = (PAIR_KEY, "x", "spectr_gbv", 4, 4, 0.7, 40, 0)
    gpu_seconds, left = handler(*args)
    assert stand_in.asked == [gpu.seconds(gpu.generate_cost(*args))]
    assert gpu_seconds == stand_in.asked[0]
    assert stand_in.asked[0] - limits.GPU_MARGIN_S - 1 < left <= stand_in.asked[0] - limits.GPU_MARGIN_S
    # a teaching pair runs as is: no GPU asked for, the server's own time limit
    gpu_seconds, left = handler("toy", "the", "sd", 4, 4, 0.7, 40, 0)
    assert stand_in.asked == [stand_in.asked[0]] and gpu_seconds is None and left > limits.LIMITS.seconds - 1


@pytest.mark.unit
def test_under_zerogpu_a_streaming_handler_streams_and_every_step_sees_the_budget_bound():
    stand_in, closed = StandInGPU(), []

    def stream(*args):
        try:
            for _ in range(3):
                yield budget_seen()[0]
        finally:
            closed.append(True)

    handler = gpu.under_gpu(stream, gpu.generate_cost, stand_in)
    steps = handler(PAIR_KEY, "x", "sd", 2, 3, 0.7, 40, 0)
    assert next(steps) == next(steps) == stand_in.asked[0]
    steps.close()  # Stop pressed: the handler's own generator is closed too
    assert closed == [True]
    assert list(handler("toy", "the", "sd", 2, 3, 0.7, 40, 0)) == [None, None, None]


@pytest.mark.unit
def test_a_run_past_its_gpu_time_stops_with_a_message():
    with limits.gpu_call(12, started=time.monotonic() - 20):
        budget = limits.Budget()
    with pytest.raises(ValueError, match="ran past the 12 s of GPU time it asked for"):
        budget.tick()


@pytest.mark.unit
def test_on_zerogpu_the_decorator_is_spaces_gpu_with_a_computed_duration(monkeypatch):
    stand_in = StandInGPU()
    monkeypatch.setattr(gpu, "ON_ZEROGPU", True)
    monkeypatch.setattr(gpu, "spaces", type("spaces", (), {"GPU": stand_in}))
    handler = gpu.on_gpu(gpu.fidelity_cost)(lambda *args: "ran")
    assert handler(PAIR_KEY, "x", "sd", 1, 2, 0.7, 50, 3) == "ran"
    assert stand_in.asked == [gpu.seconds(gpu.fidelity_cost(PAIR_KEY, "x", "sd", 1, 2, 0.7, 50, 3))]


@pytest.mark.unit
def test_on_zerogpu_a_failed_start_load_is_logged_and_the_app_goes_on(monkeypatch, caplog):
    monkeypatch.setattr(gpu, "ON_ZEROGPU", True)
    loaded = []
    gpu.at_start(lambda: loaded.append(True))
    assert loaded == [True]

    def broken():
        raise ValueError("no model file")

    with caplog.at_level(logging.ERROR, logger="spectr_gbv.gpu"):
        gpu.at_start(broken)
    assert "could not load the default pair at start" in caplog.text and "no model file" in caplog.text


STAND_IN_SPACES = '''
import sys
TORCH_WAS_IMPORTED = "torch" in sys.modules
DECORATED = {}

def GPU(task=None, *, duration=None, size=None):
    def decorate(fn):
        DECORATED[fn.__name__] = duration
        return fn
    return decorate(task) if callable(task) else decorate
'''

PROBE = '''
import json, app, spaces
from spectr_gbv import pairs
defaults = ("default", "Hello", "spectr_gbv", 4, 4, 0.7, 40, 0)
print(json.dumps({
    "torch_before_spaces": spaces.TORCH_WAS_IMPORTED,
    "decorated": sorted(spaces.DECORATED),
    "default_pair_built_at_import": pairs._load_default_pair.cache_info().currsize == 1,
    "generate_asks": spaces.DECORATED["generate_stream"](*defaults),
}))
'''


@pytest.mark.model
def test_the_app_on_zerogpu_imports_spaces_first_builds_the_default_pair_and_decorates_every_model_handler(tmp_path):
    (tmp_path / "spaces").mkdir()
    (tmp_path / "spaces" / "__init__.py").write_text(STAND_IN_SPACES)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "SPACES_ZERO_GPU": "true",
           "PYTHONPATH": f"{tmp_path}:{ROOT}", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(PROBE)], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["torch_before_spaces"] is False
    assert seen["default_pair_built_at_import"] is True
    assert seen["decorated"] == ["compare", "generate_stream", "race_stream", "run_fidelity", "run_grid", "run_sweep"]
    assert seen["generate_asks"] <= 30


# ------------------------------------------------------------- what handlers hand back


def _tensors(value, path="result") -> list[str]:
    """Paths of every tensor inside a handler's result (dataclasses, dicts, sequences, figures)."""
    if isinstance(value, torch.Tensor):
        return [path]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [p for f in dataclasses.fields(value) for p in _tensors(getattr(value, f.name), f"{path}.{f.name}")]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _tensors(v, f"{path}[{k!r}]")]
    if isinstance(value, (list, tuple)):
        return [p for i, v in enumerate(value) for p in _tensors(v, f"{path}[{i}]")]
    return []


@pytest.mark.unit
@pytest.mark.parametrize("call", [
    lambda: list(generate.generate_stream("toy", "the cat", "spectr_gbv", 3, 4, 0.8, 12, 1)),
    lambda: list(generate.generate_stream("toy", "the cat", "ar", 3, 4, 0.8, 12, 1)),
    lambda: list(compare.compare("toy", "the cat", ["sd", "spectr", "spectr_gbv"], 3, 4, 0.8, 12, 1, True, 2)),
    lambda: list(sweep.run_sweep("toy", "the cat", ["sd", "spectr_gbv"], "K", "1, 2", 3, 4, 0.8, 12, 1, 2)),
    lambda: list(fidelity.run_fidelity("two-token", "A", "spectr_gbv", 1, 2, 1.0, 50, 2)),
], ids=["generate", "generate-ar", "compare", "sweep", "fidelity"])
def test_handlers_return_plain_picklable_values_without_tensors(call):
    result = call()
    assert _tensors(result) == []
    pickle.loads(pickle.dumps(result))  # ZeroGPU pickles what its worker returns


@pytest.mark.unit
def test_the_explorer_works_from_the_stored_run_without_the_model(monkeypatch):
    *_, state, _slider, grid, _figure, details = list(generate.generate_stream("toy", "the", "spectr_gbv", 4, 3, 1.0, 30, 2))[-1]
    pair = inputs.get_pair("toy")

    def no_model(*args, **kwargs):
        raise AssertionError("the explorer asked for a model")

    monkeypatch.setattr(inputs, "get_pair", no_model)
    shown_grid, _, shown = explorer.show_iteration(state, 2)
    update, stepped_grid, _, stepped = explorer.step_iteration(state, 2, delta=1)
    it2, it3 = state.record.iterations[1:3]
    assert shown["iteration"] == 2 and shown["final_token"] == pair.token_text([it2.final_token])[0]
    assert update["value"] == 3 and stepped["final_token"] == pair.token_text([it3.final_token])[0]
    assert shown_grid == draft_grid_html(it2, pair.token_text, "spectr_gbv")  # what the model's own strings would show
    assert stepped_grid == draft_grid_html(it3, pair.token_text, "spectr_gbv")
