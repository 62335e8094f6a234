"""The end-to-end benchmark's honesty rules (spectr_gbv.bench): a speedup is never quoted only
against a plain decoding slowed by the kernel chosen for speculation."""

from __future__ import annotations

import pytest

from spectr_gbv.bench.__main__ import fastest_plain_decoding, markdown
from spectr_gbv.models.cpu_kernel import KernelChoice, KernelCost

pytestmark = pytest.mark.unit


def row(method, speedup, K=0, L=0):
    return {"method": method, "K": K, "L": L, "T": 0.7, "speedup": speedup, "speedup_vs_peer": speedup / 2,
            "tokens_per_s": 10.0 * speedup, "block_efficiency": None, "reads_per_iteration": None, "ops_per_token": None}


def test_no_second_plain_decoding_when_the_chosen_kernel_has_the_fastest_step_or_was_forced():
    chosen = KernelChoice("fp16-weights", "AVX2", "cpu", (KernelCost("float32", 50.0, 80.0), KernelCost("fp16-weights", 30.0, 45.0)))
    assert fastest_plain_decoding(None, chosen) is None
    assert fastest_plain_decoding(None, KernelChoice("float32", "AVX2", "cpu", reason="forced")) is None
    assert fastest_plain_decoding(None, None) is None


def test_the_table_says_how_to_read_speedups_against_the_fastest_plain_decoding():
    result = {"cpu": "CPU: x", "target": "t", "draft": "d", "assistant": None, "device": "cpu", "machine": "m",
              "prompts": ["code"], "max_new_tokens": 8, "temperature": 0.7, "rounds": 3, "best_settings": {},
              "rows": [row("ar", 1.0), row("spectr_gbv", 1.5, 2, 4), row("ar [fp16-weights]", 1.36)]}
    text = markdown(result)
    assert "faster one-token step in fp16-weights" in text and "divided by 1.36" in text
    assert "| ar [fp16-weights] | 0 | 0 |" in text
    plain = markdown(result | {"rows": result["rows"][:2]})
    assert "divided by" not in plain


def test_the_table_names_the_mode_the_target_ran_in():
    result = {"cpu": "CPU: x", "target": "t", "draft": "d", "device": "cpu", "machine": "m", "prompts": ["code"],
              "max_new_tokens": 8, "temperature": 0.7, "rounds": 3, "best_settings": {}, "rows": [row("ar", 1.0)]}
    assert "Target: t (compiled: AR and every method use it" in markdown(result | {"target_mode": "compiled"})
    assert "Target: t (eager:" in markdown(result)  # results written before the mode was recorded ran eagerly


def test_the_eager_row_of_a_compiled_bench_runs_with_nothing_compiled_offered_and_gives_it_back():
    from types import SimpleNamespace

    from spectr_gbv.bench.__main__ import Contender, eagerly

    compiled_step, buckets = object(), {(16, ()): object()}
    switch = SimpleNamespace(step=compiled_step, scoring=SimpleNamespace(ready=buckets))
    seen = []

    def run(ids, seed):
        seen.append((switch.step, dict(switch.scoring.ready)))
        if seed == 1:
            raise RuntimeError("a run that fails")
        return 8, 4

    contender = eagerly(SimpleNamespace(compiled=switch), Contender("ar [eager]", 0, 0, run))
    contender.time(0, [1, 2, 3])
    assert seen == [(None, {})] and contender.tokens == {0: 8}
    assert switch.step is compiled_step and switch.scoring.ready is buckets
    with pytest.raises(RuntimeError):
        contender.run([1], 1)
    assert switch.step is compiled_step and switch.scoring.ready is buckets  # given back after a failure too


def test_result_files_go_to_the_folder_of_the_cpu_class_and_the_targets_kernel(tmp_path):
    from types import SimpleNamespace

    from spectr_gbv.bench.__main__ import results_folder, results_folder_for

    chosen = SimpleNamespace(loaded=SimpleNamespace(kernel=SimpleNamespace(kernel="fp16-weights")))
    assert results_folder_for(str(tmp_path), chosen) == results_folder(str(tmp_path), "fp16-weights")
    assert results_folder(str(tmp_path), "fp16-weights").parent.name.startswith("cpu_")
    for none in (SimpleNamespace(), SimpleNamespace(loaded=SimpleNamespace(kernel=None))):  # a hub model, or CUDA
        assert results_folder_for(str(tmp_path), none) == results_folder(str(tmp_path), "default")


def test_a_compiled_run_writes_its_own_files_beside_the_eager_table():
    """`--results` on the compiled target writes bench_compiled.*: the eager table of the same folder stays."""
    from spectr_gbv.bench.__main__ import results_stem

    assert results_stem({"target_mode": "compiled"}) == "bench_compiled"
    assert results_stem({"target_mode": "eager"}) == results_stem({}) == "bench"
