"""Hypothesis throws valid and malformed inputs at every endpoint over the API.

Wrong values (out of range, unknown names) go through gradio_client; wrong *types* (None,
booleans, huge integers, NaN and infinities, text where a number belongs, lists, objects,
lone surrogates, markup) go over plain HTTP (raw_api), since gradio_client will not send
NaN or a lone surrogate. Each example replaces a random subset of a valid request's
arguments. Whatever arrives, the answer is a correct result or a clear error message (never
Gradio's bare "Error", never an internal error, never markup from the input, never a
hang), and the next valid request on the same server succeeds. 275 examples in all.
"""

from __future__ import annotations

import pytest
from gradio_client import Client
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app_server import running_app
from helpers import assert_clear
from raw_api import call

pytestmark = pytest.mark.slow

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
    else:  # all N runs, or (a budget stopped it) the runs compared before, with the reason
        data = result[-1]
        assert data["runs"] == runs or (data["stopped"] and 10 <= data["runs"] < runs), data


# ------------------------------------------------------------------------- wrong types

wrong_types = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8), st.lists(st.one_of(st.integers(), st.text(max_size=3)), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.sampled_from(["\ud800", "the \udfff cat", "<img src=x onerror=alert(1)>", "NaN", "1e999", "", "toy"]),
)
VALID = {  # one small valid request per endpoint; examples replace some of its arguments
    "/generate": ["toy", "the cat", "sd", 2, 2, 0.7, 5, 0],
    "/compare": ["toy", "the cat", ["sd", "gbv"], 2, 2, 0.7, 5, 0, True, 1, None, None],  # no prompt set, no baseline
    "/sweep": ["toy", "the", ["sd"], "K", "1, 2", 2, 2, 0.7, 4, 0, 1, None],
    "/fidelity": ["two-token", "A", "spectr_gbv", 1, 2, 1.0, 50, 2],
}


@st.composite
def mangled(draw, endpoint):
    args = list(VALID[endpoint])
    positions = draw(st.sets(st.integers(0, len(args) - 1), min_size=1, max_size=3))
    for i in positions:
        args[i] = draw(wrong_types)
    return args


def check_wrong_types(url, endpoint, args):
    ok, answer = call(url, endpoint, args)
    if not ok:
        assert_clear(answer)
    ok, answer = call(url, endpoint, VALID[endpoint])  # the next request is served
    assert ok, answer


@pytest.fixture(scope="module")
def url(client):
    return client.src


def _wrong_type_test(endpoint, examples):
    @settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(args=mangled(endpoint))
    def test(url, args):
        check_wrong_types(url, endpoint, args)

    test.__name__ = f"test_{endpoint.strip('/')}_answers_wrong_types_clearly"
    return test


test_generate_answers_wrong_types_clearly = _wrong_type_test("/generate", 80)
test_compare_answers_wrong_types_clearly = _wrong_type_test("/compare", 50)
test_sweep_answers_wrong_types_clearly = _wrong_type_test("/sweep", 50)
test_fidelity_answers_wrong_types_clearly = _wrong_type_test("/fidelity", 50)


@pytest.mark.parametrize("endpoint, position, value, message", [
    ("/generate", 3, float("nan"), "K \\(drafts\\) must be in \\[1, 8\\], got nan"),
    ("/generate", 7, 10**40, "seed must be in \\[0, 2147483647\\]"),
    ("/generate", 0, ["toy"], "the model pair must be the name of a pair"),
    ("/generate", 1, "the \ud800 cat", "lone surrogate"),
    ("/generate", 4, "four", "L \\(draft length\\) must be a number in \\[1, 16\\], got 'four'"),
    ("/compare", 8, "yes", "coupled must be true or false"),
    ("/compare", 2, {"sd": 1}, "the methods must be a list of method names"),
    ("/sweep", 3, ["K"], "the sweep axis must be one of K, L, T"),
    ("/fidelity", 6, None, "number of runs N .* is missing"),
])
def test_each_reported_finding_has_its_own_words(url, endpoint, position, value, message):
    import re

    args = list(VALID[endpoint])
    args[position] = value
    ok, answer = call(url, endpoint, args)
    assert not ok and re.search(message, answer), answer


def test_markup_in_the_input_comes_back_as_text(url):
    ok, answer = call(url, "/generate", ["toy", "<b>bold</b> cat", "sd", 2, 2, 0.7, 5, 0])
    assert not ok and "&lt;b&gt;bold&lt;/b&gt;" in answer and "<b>" not in answer
