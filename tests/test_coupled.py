"""Coupled mode: one shared trajectory, identical drafts and draws for every verifier."""

from __future__ import annotations

import math

import pytest
import torch

from spectr_gbv import METHODS
from spectr_gbv.config import DecodeConfig
from spectr_gbv.coupled import coupled_run
from spectr_gbv.methods.base import VerifyInput
from spectr_gbv.randomness import TorchRandomness
from spectr_gbv.toy import encode, toy_pair

ALL = list(METHODS)


def run(method="spectr_gbv", **kwargs):
    target, draft = toy_pair()
    config = DecodeConfig(method=method, **{"num_drafts": 3, "draft_length": 3, "temperature": 1.0,
                                            "max_new_tokens": 60, "seed": 5, **kwargs})
    return coupled_run(target, draft, encode("the cat"), ALL, config)


def test_every_method_judges_each_shared_iteration_and_the_leader_advances_the_context():
    result = run()
    assert len(result.tokens) == 60
    for index, step in enumerate(result.steps):
        assert set(step.verdicts) == set(ALL)
        leader = step.verdicts["spectr_gbv"]
        # The run's cap (or an EOS) may cut the leader's tokens, and only in the last step.
        kept = min(leader.num_accepted, len(step.emitted))
        assert step.emitted[:kept] == step.draft_tokens[leader.winning_draft or 0][:kept]
        assert len(step.emitted) <= leader.num_accepted + 1
        if len(step.emitted) < leader.num_accepted + 1:
            assert index == len(result.steps) - 1
        for name in ("sd", "gbv"):  # single-draft rules see draft 0 only
            verdict = step.verdicts[name]
            assert verdict.winning_draft in (None, 0)


def test_same_seed_same_coupled_run_and_a_verdict_is_reproducible_from_its_input():
    a, b = run(), run()
    assert a.tokens == b.tokens and [s.verdicts for s in a.steps] == [s.verdicts for s in b.steps]
    # A verdict is the verifier's output on the shared drafts with the step's coin seed (2 * seed + 1
    # at step 0): rebuilding the first step's input from the models gives the same tau.
    target, draft = toy_pair()
    prompt = encode("the cat")
    first = a.steps[0]
    tokens = torch.tensor(first.draft_tokens)
    p = torch.stack([torch.stack([draft.next_token_probs(prompt + row[:d]) for d in range(3)]) for row in first.draft_tokens])
    q = torch.stack([torch.stack([target.next_token_probs(prompt + row[:d]) for d in range(4)]) for row in first.draft_tokens])
    inp = VerifyInput.build(tokens, p, q)
    result = METHODS["spectr"].verify(inp, TorchRandomness(torch.Generator().manual_seed(2 * 5 + 1)))
    assert result.num_accepted == first.verdicts["spectr"].num_accepted


def test_at_temperature_zero_the_coupled_trajectory_is_greedy_and_all_rules_agree():
    result = run(temperature=0.0, max_new_tokens=20)
    target, _ = toy_pair()
    context = encode("the cat")
    greedy = []
    for _ in range(20):
        greedy.append(int(target.next_token_probs(context + greedy).argmax()))
    assert result.tokens == greedy
    for step in result.steps:  # one-hot distributions: every exact rule accepts the same prefix
        assert len({step.verdicts[m].num_accepted for m in ALL if METHODS[m].exact}) == 1


@pytest.mark.statistical
def test_measured_mean_tau_matches_the_theory_line_for_every_exact_method():
    result = run(max_new_tokens=1500)
    for name in ALL:
        if not METHODS[name].exact:
            continue
        taus = result.accepted(name)
        expected = result.expected(name)
        n = len(taus)
        diffs = [t - e for t, e in zip(taus, expected)]  # martingale differences: mean 0 if theory is right
        mean = sum(diffs) / n
        sd = math.sqrt(sum((d - mean) ** 2 for d in diffs) / (n - 1))
        assert abs(mean) < 4 * sd / math.sqrt(n), (name, mean, sd, n)


def test_summary_has_the_run_record_keys():
    summary = run(max_new_tokens=30).summary("spectr")
    assert summary["block_efficiency"] == summary["mean_acceptance_length"] == 1 + summary["mean_accepted"]
    assert sum(summary["accepted_length_histogram"]) == summary["target_calls"]
    assert len(summary["per_position_acceptance"]) == 3


def test_coupled_mode_rejects_non_verifiers():
    target, draft = toy_pair()
    with pytest.raises(ValueError, match="unknown"):
        coupled_run(target, draft, [0], ["ar"], DecodeConfig())
