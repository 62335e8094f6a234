"""Coupled mode: one shared trajectory, identical drafts and draws for every verifier."""

from __future__ import annotations

import math

import pytest
import torch

from spectr_gbv import METHODS
from spectr_gbv.config import DecodeConfig
from spectr_gbv.coupled import CoupledRun, coupled_run
from spectr_gbv.methods.base import VerifyInput
from spectr_gbv.randomness import TorchRandomness
from spectr_gbv.toy import encode, toy_pair

ALL = list(METHODS)


def run(method="spectr_gbv", **kwargs):
    target, draft = toy_pair()
    config = DecodeConfig(method=method, **{"num_drafts": 3, "draft_length": 3, "temperature": 1.0,
                                            "max_new_tokens": 60, "seed": 5, **kwargs})
    return coupled_run(target, draft, encode("the cat"), ALL, config)


@pytest.mark.unit
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


@pytest.mark.unit
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


@pytest.mark.unit
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


@pytest.mark.unit
def test_summary_rates_are_the_ones_the_emitted_tokens_give():
    """The summary's rates against quantities counted another way. With SpecTr leading, each step
    emits the leader's tau + 1 tokens, so block efficiency is new tokens per target call, as
    `RunRecord` computes it, on the steps before the last (which the token cap may cut). Mean tau
    is also the sum over positions of P(tau >= i), and the mean of the accepted-length histogram."""
    full = run(method="spectr", max_new_tokens=40)
    uncapped = CoupledRun(full.config, full.methods, full.prompt_ids, full.steps[:-1])
    summary = uncapped.summary("spectr")
    calls, L = len(uncapped.steps), 3
    assert summary["target_calls"] == calls >= 8
    tokens_per_call = len(uncapped.tokens) / calls
    assert 1 < tokens_per_call < L + 1  # some drafts accepted, not all: an off-by-one cannot hide
    assert summary["block_efficiency"] == pytest.approx(tokens_per_call, abs=1e-12)
    assert summary["mean_acceptance_length"] == pytest.approx(tokens_per_call, abs=1e-12)
    histogram = summary["accepted_length_histogram"]
    assert len(histogram) == L + 1 and sum(histogram) == calls
    assert summary["mean_accepted"] == pytest.approx(sum(t * n for t, n in enumerate(histogram)) / calls, abs=1e-12)
    assert summary["mean_accepted"] == pytest.approx(sum(summary["per_position_acceptance"]), abs=1e-12)
    assert summary["acceptance_rate"] == pytest.approx(summary["mean_accepted"] / L, abs=1e-12)
    assert len(summary["per_position_acceptance"]) == L


@pytest.mark.unit
def test_coupled_mode_rejects_non_verifiers():
    target, draft = toy_pair()
    with pytest.raises(ValueError, match="unknown"):
        coupled_run(target, draft, [0], ["ar"], DecodeConfig())
