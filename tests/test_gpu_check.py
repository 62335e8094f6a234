"""The prepared GPU check: it names its result file after the device, refuses clearly where
there is no GPU, and writes a table that says the loop ran eagerly."""

from __future__ import annotations

import subprocess
import sys

import torch
import pytest

from spectr_gbv.bench import gpu_check

pytestmark = pytest.mark.unit


def test_result_files_are_named_after_the_device():
    assert gpu_check.file_stem("NVIDIA H200") == "h200"
    assert gpu_check.file_stem("NVIDIA GeForce RTX 4090") == "rtx_4090"
    assert gpu_check.file_stem("Tesla T4") == "t4"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without a GPU")
def test_without_a_gpu_it_stops_with_a_message_naming_the_rehearsal():
    done = subprocess.run([sys.executable, "-m", "spectr_gbv.bench.gpu_check", "--skip-tests"], capture_output=True,
                          text=True)
    assert done.returncode != 0
    assert "no CUDA device here" in done.stderr and "--device cpu" in done.stderr


def test_the_table_says_the_loop_ran_eagerly_and_gives_its_command():
    row = {"method": "ar", "K": 0, "L": 0, "T": 0.7, "tokens_per_s": 30.0, "speedup": 1.0, "speedup_vs_peer": 1.5,
           "block_efficiency": 1.0, "reads_per_iteration": 1.0, "ops_per_token": 1500.0}
    text = gpu_check.markdown({"device": "NVIDIA H200", "torch": "2.x", "graphs": "not implemented: eager only",
                               "target": "t", "draft": "d", "dtype": "torch.bfloat16", "prompts": ["code"],
                               "max_new_tokens": 48, "temperature": 0.7, "rounds": 2, "rows": [row],
                               "command": "python -m spectr_gbv.bench.gpu_check"})
    assert "eager only" in text and "`python -m spectr_gbv.bench.gpu_check`" in text
    assert "| ar | 0 | 0 | 1.00 | 1.0 | 1500 | 30.0 | 1.00 | 1.50 |" in text
