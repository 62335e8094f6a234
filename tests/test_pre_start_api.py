"""Over the public API (gradio_client, the app on loopback in this process): a run whose estimate does not
fit the budget is refused before any model call, with what would fit and no environment variable named;
the fix it names is accepted."""

from __future__ import annotations

import re

import pytest
from gradio_client import Client

from app_server import running_app
from components.wiring import inputs
from components.wiring.inputs import default_compare

pytestmark = pytest.mark.api

ENVIRONMENT_VARIABLE = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")


@pytest.fixture(scope="module")
def client():
    with running_app(default_pair="toy", default_prompt="the cat") as url:
        yield Client(url, verbose=False)


@pytest.fixture
def pairs_loaded(monkeypatch):
    """The pairs a request asked for (every handler gets its pair through inputs.get_pair)."""
    asked, real = [], inputs.get_pair

    def recorded(key, **kwargs):
        asked.append(key)
        return real(key, **kwargs)

    monkeypatch.setattr(inputs, "get_pair", recorded)
    return asked


def refusal(client, *args, api_name) -> str:
    with pytest.raises(Exception) as refused:  # noqa: PT011 - gradio_client's AppError carries the message
        client.predict(*args, api_name=api_name)
    return str(refused.value)


def test_compare_at_k8_l8_256_tokens_on_the_default_pair_is_refused_before_any_model_call(client, pairs_loaded):
    message = refusal(client, "default", "Name a fruit.", default_compare(), 8, 8, 0.7, 256, 0, True, 1,
                      api_name="/compare")
    assert pairs_loaded == []  # refused before the pair was even loaded
    assert "Compare at these settings is estimated to take about" in message and "not started" in message
    assert re.search(r"each of these alone would fit: \d+ tokens per run", message), message
    assert not ENVIRONMENT_VARIABLE.search(message), message


@pytest.mark.parametrize("args, api_name", [
    (("default", "Name a fruit.", default_compare()[:3], "K", "1, 2, 4, 8", 2, 4, 0.7, 200, 0, 3), "/sweep"),
    (("default", "Name a fruit.", "spectr_gbv", 8, 8, 1.0, 300, 3), "/fidelity"),
    (("qwen2.5-1.5b", "Name a fruit.", "spectr_gbv", 8, 8, 0.7, 256, 0), "/generate"),
    (("qwen2.5-1.5b", "Name a fruit.", "spectr_gbv", 8, 8, 0.7, 256, 0), "/race"),
], ids=["sweep", "fidelity", "generate", "race"])
def test_every_view_over_budget_is_refused_before_any_model_call(client, pairs_loaded, args, api_name):
    message = refusal(client, *args, api_name=api_name)
    assert pairs_loaded == [] and "so it was not started; each of these alone would fit" in message, message
    assert not ENVIRONMENT_VARIABLE.search(message), message


def test_the_named_fix_is_accepted(client, limits):
    limits(seconds=2)  # the Toy world's 7 methods at 10 repeats do not fit 2 s; fewer repeats do
    args = ["toy", "the cat", default_compare(), 2, 4, 0.7, 40, 0, True]
    message = refusal(client, *args, 10, api_name="/compare")
    repeats = int(re.search(r"(\d+) repeats?\b", message).group(1))
    assert 1 <= repeats < 10
    *_, data = client.predict(*args, repeats, api_name="/compare")
    assert data["seeds"] == list(range(repeats))  # accepted (its budget may still stop it on a busy machine)
