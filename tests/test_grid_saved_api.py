"""/grid_saved through gradio_client, the app on loopback: a saved frontier result drawn without a run (every
parameter has a default), with its downloads' table and commands; a name that is not a listed file, a path
traversal among them, is refused with words naming the files there are, and the next call draws."""

from __future__ import annotations

import json

import pytest
from gradio_client import Client

from app_server import running_app
from components.tabs import grid_saved

pytestmark = pytest.mark.api

NAMES = ["saved", "cell_value", "rule", "baseline"]


@pytest.fixture(scope="module")
def client():
    with running_app(default_pair="toy", default_prompt="the cat") as url:
        yield Client(url, verbose=False)


def figure_of(plot) -> dict:
    """The Plotly figure a gr.Plot output carries over the API."""
    value = plot.get("plot") if isinstance(plot, dict) else plot
    return json.loads(value) if isinstance(value, str) else value


def test_grid_saved_is_public_with_a_default_for_every_parameter(client):
    endpoint = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/grid_saved"]
    assert [p["parameter_name"] for p in endpoint["parameters"]] == NAMES
    assert all(p["parameter_has_default"] for p in endpoint["parameters"])


def test_the_default_saved_result_comes_back_as_a_heatmap_with_its_table_and_commands(client):
    header, heatmap, data = client.predict(api_name="/grid_saved")
    assert data["saved"] == grid_saved.default_saved() and "nothing was run" in header
    trace = figure_of(heatmap)["data"][0]
    assert trace["type"] == "heatmap" and [int(k) for k in trace["y"]] == data["drafts"]
    assert [int(length) for length in trace["x"]] == data["lengths"]
    expected = grid_saved.show_saved(data["saved"]).data["table"]
    assert [(r["K"], r["L"], r["rule"]) for r in data["table"]] == [(r["K"], r["L"], r["rule"]) for r in expected]
    assert [r["value"] for r in data["table"]] == [r["value"] for r in expected]
    assert data["command"].splitlines()[1].startswith("python -m spectr_gbv.bench.grid_cells assets/results/")


def test_a_gain_from_another_saved_file(client):
    *_, data = client.predict("frontier_grid/T1.0_L4_8/frontier.json", "gain", "spectr_gbv", "spectr",
                              api_name="/grid_saved")
    assert data["T"] == 1.0 and data["lengths"] == [4, 8]
    assert all(r["cell_value"] == "gain" and r["value"] == r["rule_minus_baseline"] for r in data["table"])


@pytest.mark.parametrize("name", ["../../etc/passwd", "no-such-result", "/etc/passwd"])
def test_a_bad_name_is_refused_with_the_names_there_are_and_the_next_call_draws(client, name):
    with pytest.raises(Exception, match=r"no saved result named .*the saved results are .*frontier_grid/T0\.7"):
        client.predict(name, api_name="/grid_saved")
    assert client.predict(api_name="/grid_saved")[2]["table"]
