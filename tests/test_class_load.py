"""A small class on loopback: 12 sessions behind one school address press Generate on the Toy world at once,
at the server's default fairness (one proxy hop, as on a Space). Every one is served, with its own tokens.
The full-size run (30 and 60 sessions, both pairs) is `make class-load` (tests/class_load.py)."""

from __future__ import annotations

import dataclasses

import pytest
from gradio_client import Client

from app_server import running_app
from class_load import PROMPTS, defaults, press_generate
from components.serving import visitors

pytestmark = pytest.mark.api

STUDENTS = 12


def test_a_class_behind_one_address_is_served_whole():
    fairness = dataclasses.replace(visitors.Fairness.from_env(), proxy_hops=1)
    method, k, length, temperature, tokens = defaults()
    with running_app(queue={"fairness": fairness}, default_pair="toy", default_prompt="the cat") as url:
        clients = [Client(url, verbose=False, headers={"X-Forwarded-For": "198.18.7.1"}) for _ in range(STUDENTS)]
        requests = [("toy", PROMPTS["toy"][i % len(PROMPTS["toy"])], method, k, length, temperature, tokens, i)
                    for i in range(STUDENTS)]
        results = press_generate(clients, requests, timeout=120)
    assert [outcome for outcome, _, _ in results] == ["served"] * STUDENTS, results
    visitors.configure(visitors.Fairness.from_env())
