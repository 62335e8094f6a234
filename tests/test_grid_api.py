"""/grid through gradio_client, the app on loopback (opened on the Toy world): every parameter has a
default, the defaults run the whole K x L grid with its downloads' table and command, and bad input,
or a grid over the budget, is refused with a message before anything runs, the next grid running."""

from __future__ import annotations

import pytest
from gradio_client import Client

from app_server import running_app
from components.wiring.admission import grid_size

pytestmark = pytest.mark.api

NAMES = ["pair_key", "methods", "grid_drafts", "grid_lengths", "temperature", "num_prompts", "grid_tokens",
         "cell_value", "rule", "baseline"]
SMALL = ("toy", ["sd", "spectr"], "1 2", "2", 0.7, 2, 4, "gain", "best", "spectr")


@pytest.fixture(scope="module")
def client():
    with running_app(default_pair="toy", default_prompt="the cat") as url:
        yield Client(url, verbose=False)


def test_grid_is_public_with_a_default_for_every_parameter(client):
    endpoint = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/grid"]
    assert [p["parameter_name"] for p in endpoint["parameters"]] == NAMES
    assert all(p["parameter_has_default"] for p in endpoint["parameters"])


def test_grid_with_the_defaults_fills_every_cell_and_names_its_command(client):
    header, heatmap, data = client.predict(api_name="/grid")
    cells = len(grid_size.DEFAULT_DRAFTS) * len(grid_size.DEFAULT_LENGTHS)
    assert data["pair"] == "toy" and data["stopped"] is None and data["configurations_done"] == cells
    assert data["prompts"] == grid_size.default_prompts("toy", len(data["methods"]))
    assert data["max_new_tokens"] == grid_size.TEACHING_TOKENS and data["cell_value"] == "expected"
    assert "spectr_gbv_released" not in data["methods"]  # the lossy rule has no E[tau | drafts]
    assert [(r["K"], r["L"]) for r in data["table"]] == [(k, length) for k in grid_size.DEFAULT_DRAFTS
                                                        for length in grid_size.DEFAULT_LENGTHS]
    assert all(r["value"] > 0 and r["rule"] in data["methods"] for r in data["table"])
    assert data["command"].startswith("python -m spectr_gbv.bench.frontier --pair toy")
    assert "Toy world" in header and "estimate" in header


def test_a_gain_over_a_baseline(client):
    *_, data = client.predict(*SMALL, api_name="/grid")
    assert [(r["K"], r["L"]) for r in data["table"]] == [(1, 2), (2, 2)]
    assert all(r["cell_value"] == "gain" and r["value"] == r["rule_minus_baseline"] for r in data["table"])


@pytest.mark.parametrize("index, value, message", [
    (2, "1 2 99", r"a K value must be in \[1, 8\], got '99'"),
    (5, "many", "prompts must be a number"),
    (8, "spectr_gbv_released", "must be an exact rule"),
    (5, 120, "not started"),  # 120 prompts is over the budget even on the Toy world: refused before any run
])
def test_bad_input_is_refused_clearly_and_the_next_grid_runs(client, index, value, message):
    args = list(SMALL)
    args[index] = value
    if message == "not started":
        args[6] = 200  # 120 prompts of 200 tokens at 2 x 1 configurations
    with pytest.raises(Exception, match=message):
        client.predict(*args, api_name="/grid")
    assert client.predict(*SMALL, api_name="/grid")[2]["configurations_done"] == 2
