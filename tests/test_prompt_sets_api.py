"""Prompt sets through the public API (gradio_client, app on loopback): /compare and /sweep by a set's name.

Methodology: a Compare over a named set on the Toy world returns, per rule, the means over the
set's prompts and the paired 95 % interval of its difference against the chosen baseline (the
interval contains its mean and the baseline's difference with itself is 0); an unknown name is a
clear error naming the sets, and the server answers the next call. A call without the new
parameters keeps its single-prompt answer.
"""

from __future__ import annotations

import pytest
from gradio_client import Client

from app_server import running_app
from components.wiring.prompt_set_choice import set_size

pytestmark = pytest.mark.api

SETTINGS = (2, 3, 0.7, 12, 0)  # K, L, T, max new tokens, seed
METHODS = ["spectr", "spectr_gbv", "as_bv"]


@pytest.fixture(scope="module")
def client():
    with running_app() as url:
        yield Client(url, verbose=False)


def test_compare_over_a_named_set_gives_means_and_paired_intervals(client):
    *_, data = client.predict("toy", "the cat", METHODS, *SETTINGS, True, 1, "suite-10", "spectr_gbv",
                              api_name="/compare")
    assert data["prompt_set"] == "suite-10" and len(data["prompts"]) == set_size("suite-10", "toy") == 10
    assert data["baseline"] == "spectr_gbv" and not data["stopped"]
    rules = {row["method"]: row for row in data["set_rules"]}
    assert set(rules) == set(METHODS)
    for method, row in rules.items():
        assert row["prompts"] == 10 and len(row["per_prompt"]["block_efficiency"]) == 10
        assert row["block_efficiency"] == pytest.approx(sum(row["per_prompt"]["block_efficiency"]) / 10)
        assert 0 < row["expected_accepted"] <= 3  # at most L accepted
        mean, low, high = row["vs_spectr_gbv"]["expected_accepted"]
        if method == "spectr_gbv":
            assert (mean, low, high) == (0.0, 0.0, 0.0)
        else:
            assert low <= mean <= high
    assert {row["method"] for row in data["table"]} == set(METHODS)  # the downloads' rows
    assert data["command"].startswith("python -m spectr_gbv.bench.view compare --pair toy --prompt-set suite-10 ")


def test_an_unknown_set_name_is_a_clear_error_and_the_next_call_succeeds(client):
    with pytest.raises(Exception, match="unknown prompt set 'everything': choose one of prompt, examples, suite-5"):
        client.predict("toy", "the cat", METHODS, *SETTINGS, True, 1, "everything", "", api_name="/compare")
    *_, data = client.predict("toy", "the cat", METHODS, *SETTINGS, True, api_name="/compare")
    assert "prompt_set" not in data and data["coupled_runs"]  # no set named: the prompt alone, as before


def test_sweep_over_a_named_set(client):
    _header, _efficiency, _speed, data = client.predict("toy", "the cat", ["sd", "spectr"], "K", "1, 2", *SETTINGS, 1,
                                                        "examples", api_name="/sweep")
    assert [row["repeats"] for row in data["rows"]] == [set_size("examples", "toy")] * 4
