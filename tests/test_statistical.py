"""Tier (c): seeded statistical tests, end to end through `generate` with `FunctionModel`.

Method: N independent runs (seeds 0..N-1) of `generate` from the same prompt, each keeping
its first n tokens; a chi-square test over all V**n outcomes against the exact target law
of n tokens computed from the model (cells with expected count below 5 are pooled). The
seeds are fixed, so the result is deterministic; alpha = 1e-3 (docs/algorithms.md §10.3). The
released rule, run the same way on the GBV paper's example, must be rejected.
"""

from __future__ import annotations

import itertools

import pytest

from conftest import constant, dirichlet_model, mixture
from helpers import chi_square_p_value
from spectr_gbv import METHODS, generate
from spectr_gbv.exact import sequence_prob
from spectr_gbv.models import FunctionModel
from spectr_gbv.replays import remembering

pytestmark = pytest.mark.statistical

ALPHA = 1e-3
RUNS = 1500


def first_tokens(target, draft, method: str, n: int, num_drafts: int, draft_length: int) -> list[tuple[int, ...]]:
    """The first n tokens of RUNS seeded runs. The runs meet the same few contexts again and again,
    so AS-BV's node laws, pure functions of their tables, are worked out once (`replays`); every
    coin and draw is still each run's own."""
    with remembering():
        return [
            tuple(generate(target, draft, [0], method=method, num_drafts=num_drafts, draft_length=draft_length,
                           max_new_tokens=n, seed=seed, with_theory=False).tokens)
            for seed in range(RUNS)
        ]


@pytest.mark.parametrize("method", ["ar", *[m for m, s in METHODS.items() if s.exact]])
def test_first_tokens_follow_the_target_law(method):
    vocab = 3
    target_fn = dirichlet_model(vocab, 7, concentration=0.8)
    draft_fn = mixture(target_fn, dirichlet_model(vocab, 8, concentration=0.8), 0.4)
    target, draft = FunctionModel(target_fn, vocab), FunctionModel(draft_fn, vocab)
    samples = first_tokens(target, draft, method, n=3, num_drafts=3, draft_length=2)
    law = {w: sequence_prob(w, target_fn, (0,)) for w in itertools.product(range(vocab), repeat=3)}
    assert chi_square_p_value(samples, law) > ALPHA


def test_released_rule_is_detected_as_biased():
    q, p = (1 / 3, 2 / 3), (2 / 3, 1 / 3)
    target, draft = FunctionModel(constant(q), 2), FunctionModel(constant(p), 2)
    samples = first_tokens(target, draft, "spectr_gbv_released", n=3, num_drafts=1, draft_length=2)
    law = {w: sequence_prob(w, constant(q)) for w in itertools.product(range(2), repeat=3)}
    assert chi_square_p_value(samples, law) < 1e-6


def test_as_bv_handoff_decided_on_the_device_follows_the_target_law(large_vocabulary_paths, monkeypatch):
    """AS-BV+H at K = 2 on its device form (`as_bv_handoff_pair`, reached at 4 tokens by the
    large-vocabulary stand-ins; uniforms from `TorchRandomness`), independently of its bit-for-bit
    agreement with the host form (tests/test_as_bv_handoff_pair.py)."""
    from spectr_gbv.methods import as_bv_handoff_pair

    decided = []
    original = as_bv_handoff_pair.verify
    monkeypatch.setattr(as_bv_handoff_pair, "verify", lambda *args: decided.append(1) or original(*args))
    vocab = 4
    target_fn = dirichlet_model(vocab, 17, concentration=0.8)
    draft_fn = mixture(target_fn, dirichlet_model(vocab, 18, concentration=0.8), 0.5)
    target, draft = FunctionModel(target_fn, vocab), FunctionModel(draft_fn, vocab)
    samples = first_tokens(target, draft, "as_bv_handoff", n=3, num_drafts=2, draft_length=2)
    assert len(decided) >= RUNS  # every iteration took the device form
    law = {w: sequence_prob(w, target_fn, (0,)) for w in itertools.product(range(vocab), repeat=3)}
    assert chi_square_p_value(samples, law) > ALPHA


def test_as_bv_handoffs_device_form_draws_one_iteration_from_the_host_forms_exact_law(large_vocabulary_paths):
    """One verification at a time, where the hand-off matters: the device form's outputs (the
    accepted tokens and Y) from 3,000 `TorchRandomness` seeds against the exact law of the host
    form (`enumerate_outcomes`, which the exact tier proves exact), on two 5-token inputs whose
    drafts part at the root and at depth 1. Sharper than the end-to-end chi-square above: a loser
    law with the wrong base after seq rejected both candidates fails it (p ~ 3e-9)."""
    from collections import Counter

    import torch
    from helpers import two_drafts

    from spectr_gbv.exact import enumerate_outcomes
    from spectr_gbv.randomness import TorchRandomness

    verify = METHODS["as_bv_handoff"].verify
    for seed, parting in [(3, 0), (5, 1)]:
        inp = two_drafts(seed, 5, 5, 2, parting)
        law = Counter()
        for prob, tokens in enumerate_outcomes(lambda rng: tuple(verify(inp, rng).tokens)):
            law[tokens] += prob
        with remembering():  # the node laws of this one input, worked out once (`first_tokens`)
            samples = [tuple(verify(inp, TorchRandomness(torch.Generator().manual_seed(s))).tokens)
                       for s in range(3000)]
        assert chi_square_p_value(samples, dict(law)) > ALPHA
