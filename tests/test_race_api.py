"""/race through gradio_client, the app on loopback (opened on the Toy world): every parameter
has a default, the race streams a frame per turn, and bad settings come back in Generate's words."""

from __future__ import annotations

import pytest
from gradio_client import Client

from app_server import running_app

pytestmark = pytest.mark.api


@pytest.fixture(scope="module")
def client():
    with running_app(default_pair="toy", default_prompt="the cat") as url:
        yield Client(url, verbose=False)


def test_race_is_public_with_a_default_for_every_parameter(client):
    endpoint = client.view_api(print_info=False, return_format="dict")["named_endpoints"]["/race"]
    names = [p["parameter_name"] for p in endpoint["parameters"]]
    assert names == ["pair_key", "prompt", "method", "num_drafts", "draft_length", "temperature", "max_new_tokens",
                     "seed"]
    assert all(p["parameter_has_default"] for p in endpoint["parameters"])


def test_race_with_the_defaults_runs_both_sides_to_the_end(client):
    job = client.submit(api_name="/race")
    board, line, data = job.result()
    frames = job.outputs()
    assert data["pair"] == "toy" and data["stopped"] is None
    plain, spec = data["plain"], data["speculative"]
    assert plain["tokens"] == spec["tokens"] == plain["target_calls"] >= spec["target_calls"]
    assert data["turns"] == plain["target_calls"] + spec["target_calls"]
    # a teaching pair's race comes once, every token in it, replayed on the page by target calls
    assert len(frames) == 1 and board.count('class="race-lane') == 2 and "Toy world" in line
    assert board.count("tok-replay") >= plain["tokens"] + spec["tokens"]
    assert data["pacing"] == "one target call every 0.2 s"


def test_race_at_full_acceptance(client):
    *_, data = client.predict("toy", "the dog", "spectr", 3, 3, 0, 12, 0, api_name="/race")
    assert data["plain"]["target_calls"] == 12 and data["speculative"]["target_calls"] == 3
    assert data["first_to_finish"] == "speculative"


@pytest.mark.parametrize("args, message", [
    (("toy", "", "sd", 2, 2, 0.7, 5, 0), "the prompt is empty"),
    (("toy", "the cat", "sd", 9, 2, 0.7, 5, 0), r"K \(drafts\) must be in \[1, 8\], got 9"),
    (("toy", "the cat", "ar", 2, 2, 0.7, 5, 0), "choose a speculative method"),
])
def test_bad_settings_are_refused_clearly_and_the_next_race_runs(client, args, message):
    with pytest.raises(Exception, match=message):
        client.predict(*args, api_name="/race")
    assert client.predict("toy", "the cat", "sd", 1, 2, 0.7, 5, 0, api_name="/race")[2]["speculative"]["tokens"] == 5
