"""The public API (/generate, /compare, /sweep, /fidelity) through gradio_client, app on loopback.

Every endpoint is called on the Toy world (and the two-token example for fidelity), one call
runs on the offline default pair, and bad input comes back as a clear error after which the
next valid request still succeeds.
"""

from __future__ import annotations

import pytest
from gradio_client import Client

from app_server import running_app

pytestmark = pytest.mark.api

SETTINGS = (3, 4, 0.8, 20, 1)  # K, L, T, max new tokens, seed


@pytest.fixture(scope="module")
def client():
    with running_app() as url:
        yield Client(url, verbose=False)


def test_api_lists_the_four_public_endpoints(client):
    names = set(client.view_api(print_info=False, return_format="dict")["named_endpoints"])
    assert {"/generate", "/compare", "/sweep", "/fidelity"} <= names


def test_generate_on_the_toy_world(client):
    html, line, data, *explorer = client.predict("toy", "the cat", "spectr_gbv", *SETTINGS, api_name="/generate")
    assert data["new_tokens"] == 20 == html.count('class="tok ')
    assert data["pair"] == "toy" and data["block_efficiency"] >= 1
    assert "block efficiency" in line
    _slider, grid, _plot, details = explorer
    assert grid.count('class="grid-row"') == 3 and details["iteration"] == 1  # K draft rows of iteration 1


def test_generate_is_deterministic_across_calls(client):
    first = client.predict("toy", "the dog", "gbv", *SETTINGS, api_name="/generate")[2]
    second = client.predict("toy", "the dog", "gbv", *SETTINGS, api_name="/generate")[2]
    assert first["text"] == second["text"]


def test_compare_returns_figures_and_coupled_data(client):
    methods = ["sd", "gbv", "spectr", "spectr_gbv", "spectr_gbv_released"]
    *outputs, data = client.predict("toy", "the cat", methods, *SETTINGS, True, api_name="/compare")
    side_by_side, *plots = outputs
    assert side_by_side.count('class="compare-column"') == len(methods) and "as released (lossy)" in side_by_side
    assert len(plots) == 6 and all(p is not None for p in plots)
    assert data["coupled"] and data["drafts_from"] == "spectr_gbv"
    assert [r["method"] for r in data["coupled_runs"]] == methods
    assert len({r["target_calls"] for r in data["coupled_runs"]}) == 1  # one shared trajectory
    # the Toy world is a lookup table: its wall-clock "speedup" would measure Python overhead, so none is given
    assert data["speedup_vs_ar"] is None and data["ms_per_token_by_phase"] is None


def test_sweep_over_k(client):
    *_, data = client.predict("toy", "the cat", ["sd", "spectr_gbv"], "K", "1, 2, 4", *SETTINGS, api_name="/sweep")
    rows = data["rows"]
    assert [(r["method"], r["value"]) for r in rows] == [(m, k) for k in (1, 2, 4) for m in ("sd", "spectr_gbv")]
    assert all(r["num_drafts"] == (r["value"] if r["method"] == "spectr_gbv" else 1) for r in rows)


def test_fidelity_shows_the_released_rule_biased_and_the_exact_rule_not(client):
    exact = client.predict("two-token", "A", "spectr_gbv", 1, 2, 1.0, 600, 3, api_name="/fidelity")[-1]
    released = client.predict("two-token", "A", "spectr_gbv_released", 1, 2, 1.0, 600, 3, api_name="/fidelity")[-1]
    assert exact["within_noise"] and exact["total_variation"] < 0.06
    assert not released["within_noise"] and released["total_variation"] > 0.07


def test_one_call_on_the_offline_default_pair(client):
    html, _, data, *_ = client.predict("default", "Name a fruit.", "spectr_gbv", 2, 3, 0.7, 6, 0, api_name="/generate")
    assert 1 <= data["new_tokens"] <= 6 and html.count('class="tok ') == data["new_tokens"]


@pytest.mark.parametrize(
    "args, message",
    [
        (("toy", "", "spectr_gbv", *SETTINGS), "prompt is empty"),
        (("toy", "the zebra", "spectr_gbv", *SETTINGS), "zebra"),
        (("toy", "the", "spectr_gbv", 0, 4, 0.8, 20, 1), "K \\(drafts\\) must be in \\[1, 8\\], got 0"),  # the app's words, not Gradio's
        (("toy", "the", "spectr_gbv", 3, 17, 0.8, 20, 1), "L \\(draft length\\) must be in \\[1, 16\\], got 17"),
        (("toy", "the", "spectr_gbv", 3, 4, 9.0, 20, 1), "T \\(temperature\\) must be in \\[0, 1.5\\], got 9.0"),
        (("toy", "the", "spectr_gbv", 3, 4, 0.8, 20, -5), "seed must be in \\[0, 2147483647\\], got -5"),
        (("toy", "the", "no_such_method", *SETTINGS), "unknown method 'no_such_method'"),
        (("no-such-pair", "the", "spectr_gbv", *SETTINGS), "unknown model pair 'no-such-pair'"),
        (("toy", "the " * 2000, "spectr_gbv", *SETTINGS), "prompt is too long"),
    ],
)
def test_bad_input_is_a_clear_error_and_the_next_request_succeeds(client, args, message):
    with pytest.raises(Exception, match=message):
        client.predict(*args, api_name="/generate")
    assert client.predict("toy", "the cat", "sd", *SETTINGS, api_name="/generate")[2]["new_tokens"] == 20


def test_same_settings_and_seed_give_the_same_result_in_another_session(client):
    other = Client(client.src, verbose=False)  # a second client is a second session
    args = ("toy", "the cat", ["sd", "spectr", "spectr_gbv"], 3, 4, 0.8, 20, 7, True)
    first, second = client.predict(*args, api_name="/compare")[-1], other.predict(*args, api_name="/compare")[-1]
    assert first["coupled_runs"] == second["coupled_runs"]  # the shared drafts and draws are reproduced
    assert [r["new_tokens"] for r in first["independent"]] == [r["new_tokens"] for r in second["independent"]]
    gen = ("toy", "the dog", "spectr_gbv", 4, 3, 1.0, 25, 3)
    assert client.predict(*gen, api_name="/generate")[2]["text"] == other.predict(*gen, api_name="/generate")[2]["text"]


@pytest.mark.parametrize("path", ["/etc/passwd", "app.py", "README.md", "../../etc/hostname"])
def test_no_file_on_the_server_disk_is_served(client, path):
    import urllib.error
    import urllib.request

    try:
        status = urllib.request.urlopen(f"{client.src.rstrip('/')}/gradio_api/file={path}", timeout=10).status
    except urllib.error.HTTPError as error:
        status = error.code
    assert status in (403, 404)
