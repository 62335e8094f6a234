"""Exactness on the feature-conditioned path, with toy stand-ins (spectr_gbv.models.function).

The toy target hands out a "feature" per committed position; the toy draft's distributions
depend on the feature it is handed (and checks it is the target's). Tiers: exact enumeration
of one iteration for every exact method with that draft; through the engine, the
distributions handed to the verifier are the draft's own; and a seeded chi-square of the
first tokens against the target's law.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from conftest import dirichlet_model, fidelity_error
from helpers import chi_square_p_value
from spectr_gbv import METHODS, generate
from spectr_gbv.exact import sequence_prob
from spectr_gbv.models import FeatureFunctionModel, FeatureReadingDraft, FunctionModel

V = 3
PROMPT = [0, 2, 1]
EXACT = [name for name, spec in METHODS.items() if spec.exact]


def feature_of(context: tuple[int, ...]) -> torch.Tensor:
    """A fake last hidden state: a deterministic code of the context."""
    code = 0
    for token in context:
        code = (code * 7 + token + 1) % 101
    return torch.tensor([float(code), float(len(context))], dtype=torch.float64)


def draft_probs_fn(feature: torch.Tensor, context: tuple[int, ...]) -> torch.Tensor:
    # The distribution depends on the feature (not only on the text): a wrong feature changes it.
    return dirichlet_model(V, 500 + int(feature[0]), concentration=0.8)(context[-2:])


TARGET_FN = dirichlet_model(V, 77, concentration=0.8)


def toy_models():
    target = FeatureFunctionModel(TARGET_FN, feature_of, V)
    draft = FeatureReadingDraft(draft_probs_fn, feature_of, V)
    return target, draft


def relative(fn, prompt):
    return lambda context: fn(tuple(prompt) + tuple(context))


@pytest.mark.exact
@pytest.mark.parametrize("name", EXACT)
def test_exact_methods_preserve_the_target_law_with_a_feature_conditioned_draft(name):
    _, draft = toy_models()
    feature = feature_of(tuple(PROMPT[:-1]))  # the feature the draft reads at this context
    draft_fn = relative(lambda context: draft.probs(feature, context), PROMPT)
    K = 2 if METHODS[name].multi_draft else 1
    assert fidelity_error(METHODS[name], relative(TARGET_FN, PROMPT), draft_fn, K, 2) < 1e-9


@pytest.mark.unit
def test_the_verifier_gets_the_distributions_the_drafts_were_sampled_from():
    target, draft = toy_models()
    run = generate(target, draft, PROMPT, method="spectr_gbv", num_drafts=3, draft_length=3, temperature=1.0,
                   max_new_tokens=12, seed=5)
    context = list(PROMPT)
    for it in run.iterations:
        feature = feature_of(tuple(context[:-1]))
        for row, probs in zip(it.draft_tokens, it.draft_token_probs):
            expected = [draft.probs(feature, context + row[:i])[token].item() for i, token in enumerate(row)]
            assert probs == pytest.approx(expected, abs=1e-12)
        context += it.emitted
    assert run.tokens == context[len(PROMPT):] and len(run.tokens) == 12


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["sd", "spectr_gbv"])
def test_first_tokens_follow_the_target_law_with_a_feature_conditioned_draft(method):
    target, draft = toy_models()
    samples = [tuple(generate(target, draft, PROMPT, method=method, num_drafts=3, draft_length=2, max_new_tokens=2,
                              seed=seed, with_theory=False).tokens) for seed in range(1500)]
    law = {x: sequence_prob(x, TARGET_FN, tuple(PROMPT)) for x in itertools.product(range(V), repeat=2)}
    assert chi_square_p_value(samples, law) > 1e-3


@pytest.mark.unit
def test_a_feature_draft_with_a_target_that_has_no_features_is_a_clear_error():
    _, draft = toy_models()
    with pytest.raises(ValueError, match="reads the target's features"):
        generate(FunctionModel(TARGET_FN, V), draft, PROMPT, method="sd")
    target, _ = toy_models()
    with pytest.raises(ValueError, match="at least two tokens"):
        generate(target, draft, [1], method="sd")
    # plain decoding needs no draft features at all
    assert len(generate(target, draft, [1], method="ar", max_new_tokens=3).tokens) == 3
