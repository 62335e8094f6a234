"""Hypothesis throws valid and malformed inputs at /generate and /fidelity over the API.

Whatever arrives, the answer is a correct result or a clear error message (never an internal
error, never a hang), and the next valid request on the same server succeeds.
"""

from __future__ import annotations

import pytest
from gradio_client import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app_server import running_app

METHODS = ["ar", "sd", "rrs", "spectr", "gbv", "spectr_gbv", "spectr_gbv_released"]
numbers = st.one_of(st.integers(-5, 40), st.floats(-5, 40, allow_nan=False, allow_infinity=False))
prompts = st.one_of(st.sampled_from(["the cat", "A B", "", "   ", "the zebra", "A" * 5000]), st.text(max_size=20))


@pytest.fixture(scope="module")
def client():
    with running_app() as url:
        yield Client(url, verbose=False)


def outcome(client, args, api_name):
    try:
        return client.predict(*args, api_name=api_name), None
    except Exception as error:  # noqa: BLE001 - the message is what is checked
        return None, str(error)


def assert_clear(message: str) -> None:
    assert message and "internal error" not in message.lower() and "Traceback" not in message, message


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=st.sampled_from(["toy", "two-token", "nope", ""]), prompt=prompts, method=st.sampled_from(METHODS + ["bogus"]),
       K=numbers, L=numbers, T=st.floats(-1, 3, allow_nan=False), tokens=st.integers(-5, 300), seed=st.integers(-5, 2**40))
def test_generate_answers_every_input_clearly(client, pair, prompt, method, K, L, T, tokens, seed):
    result, message = outcome(client, (pair, prompt, method, K, L, T, tokens, seed), "/generate")
    if message is not None:
        assert_clear(message)
    else:
        assert 1 <= result[2]["new_tokens"] <= tokens
    assert client.predict("toy", "the cat", "sd", 1, 2, 0.7, 5, 0, api_name="/generate")[2]["new_tokens"] == 5


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pair=st.sampled_from(["toy", "two-token", "nope"]), method=st.sampled_from(METHODS + ["bogus"]),
       runs=st.integers(-5, 3000), tokens=st.integers(-1, 5))
def test_fidelity_answers_every_input_clearly(client, pair, method, runs, tokens):
    prompt = "A" if pair == "two-token" else "the"
    result, message = outcome(client, (pair, prompt, method, 2, 2, 1.0, runs, tokens), "/fidelity")
    if message is not None:
        assert_clear(message)
    else:
        assert result[1]["runs"] == runs
