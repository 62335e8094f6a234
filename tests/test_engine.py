"""The decoding engine with toy `FunctionModel`s: determinism, lengths, greedy equality,
metrics derived from records, and that drafts come from the distributions that are verified.

Greedy equality (vLLM's e2e methodology): at temperature 0 every method's output equals
plain greedy decoding of the target, token for token. Sampling-mode correctness is the
job of the exact and statistical tiers.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from conftest import dirichlet_model, mixture
from spectr_gbv import METHODS, DecodeConfig, decode_iterations, generate
from spectr_gbv.models import FunctionModel

ALL_METHODS = ["ar", *METHODS]
V = 6


@pytest.fixture
def pair():
    target_fn = dirichlet_model(V, 3)
    draft_fn = mixture(target_fn, dirichlet_model(V, 4), 0.6)
    return FunctionModel(target_fn, V), FunctionModel(draft_fn, V)


@pytest.mark.unit
@pytest.mark.parametrize("method", ALL_METHODS)
def test_same_seed_gives_identical_runs(pair, method):
    a = generate(*pair, [1, 2], method=method, num_drafts=3, draft_length=3, max_new_tokens=20, seed=5)
    b = generate(*pair, [1, 2], method=method, num_drafts=3, draft_length=3, max_new_tokens=20, seed=5)
    assert a.tokens == b.tokens
    assert [it.draft_tokens for it in a.iterations] == [it.draft_tokens for it in b.iterations]
    c = generate(*pair, [1, 2], method=method, num_drafts=3, draft_length=3, max_new_tokens=20, seed=6)
    assert c.tokens != a.tokens  # 20 tokens over 6 symbols: a collision is vanishingly unlikely


@pytest.mark.unit
@pytest.mark.parametrize("method", ALL_METHODS)
def test_exactly_max_new_tokens_without_eos(pair, method):
    run = generate(*pair, [0], method=method, num_drafts=2, draft_length=4, max_new_tokens=17, seed=1)
    assert len(run.tokens) == 17
    assert sum(len(it.emitted) for it in run.iterations) == 17


@pytest.mark.unit
def test_stops_at_the_end_of_sequence_token():
    # Token 0 is EOS; the target emits it with probability 1/2 after every prefix.
    target = FunctionModel(lambda c: [0.5, 0.25, 0.25], 3, eos_token_id=0)
    draft = FunctionModel(lambda c: [0.2, 0.4, 0.4], 3, eos_token_id=0)
    for seed in range(5):
        run = generate(target, draft, [1], method="spectr_gbv", num_drafts=2, draft_length=3, max_new_tokens=50, seed=seed)
        assert run.stopped_at_eos and run.tokens[-1] == 0 and 0 not in run.tokens[:-1]


def greedy_target_decode(target: FunctionModel, prompt: list[int], n: int) -> list[int]:
    context = list(prompt)
    for _ in range(n):
        context.append(int(target.next_token_probs(context).argmax()))
    return context[len(prompt):]


@pytest.mark.unit
@pytest.mark.parametrize("method", ALL_METHODS)
def test_temperature_zero_equals_greedy_target_decoding(pair, method):
    target, draft = pair
    run = generate(target, draft, [2, 3], method=method, num_drafts=3, draft_length=4, temperature=0, max_new_tokens=24, seed=9)
    assert run.tokens == greedy_target_decode(target, [2, 3], 24)


@pytest.mark.unit
def test_metrics_are_derived_from_the_iterations(pair):
    run = generate(*pair, [1], method="spectr_gbv", num_drafts=4, draft_length=3, max_new_tokens=60, seed=2)
    assert run.target_calls == len(run.iterations)
    assert run.block_efficiency == pytest.approx(60 / run.target_calls)
    assert sum(run.accepted_length_histogram) == run.target_calls
    assert run.mean_acceptance_length == pytest.approx(1 + run.mean_accepted)
    positions = run.per_position_acceptance
    assert all(a >= b for a, b in zip(positions, positions[1:]))  # P(tau >= i) is nonincreasing
    assert run.acceptance_rate == pytest.approx(run.mean_accepted / 3)
    assert run.mean_expected_accepted is not None and 0 <= run.mean_expected_accepted <= 3
    ar = generate(*pair, [1], method="ar", max_new_tokens=10, seed=2)
    assert ar.target_calls == 10 and ar.block_efficiency == 1.0 and ar.acceptance_rate is None


@pytest.mark.unit
def test_drafts_are_sampled_from_the_distributions_handed_to_the_verifier(pair):
    target, draft = pair
    config = DecodeConfig(method="spectr_gbv", num_drafts=3, draft_length=3, temperature=0.7, max_new_tokens=12)
    context = [4]
    for it in decode_iterations(target, draft, context, config):
        for k, block in enumerate(it.draft_tokens):
            for i, token in enumerate(block):
                logits = draft.next_token_probs(context + block[:i]).log() / 0.7
                assert it.draft_token_probs[k][i] == pytest.approx(torch.softmax(logits, -1)[token].item(), rel=1e-9)
        context += it.emitted


@pytest.mark.unit
def test_single_draft_methods_draft_one_block(pair):
    for method in ("sd", "gbv"):
        run = generate(*pair, [1], method=method, num_drafts=5, draft_length=2, max_new_tokens=6)
        assert all(len(it.draft_tokens) == 1 for it in run.iterations)


@pytest.mark.unit
def test_token_provenance_covers_every_emitted_token(pair):
    run = generate(*pair, [1], method="spectr", num_drafts=3, draft_length=3, max_new_tokens=30, seed=4)
    for it in run.iterations:
        kinds = it.token_kinds
        assert len(kinds) == len(it.emitted)
        assert kinds[: it.num_accepted] == ["accepted"] * min(it.num_accepted, len(kinds))


@pytest.mark.unit
@pytest.mark.parametrize(
    "kwargs, name",
    [
        ({"method": "nope"}, "method"),
        ({"num_drafts": 0}, "num_drafts"),
        ({"draft_length": 0}, "draft_length"),
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": float("nan")}, "temperature"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"seed": -1}, "seed"),
        ({"top_p": 1.5}, "top_p"),
        ({"top_k": 0}, "top_k"),
        ({"num_drafts": 2.5}, "num_drafts"),
    ],
)
def test_bad_settings_raise_value_errors_naming_the_setting(pair, kwargs, name):
    with pytest.raises(ValueError, match=name):
        generate(*pair, [1], **kwargs)


@pytest.mark.unit
def test_bad_models_and_prompts_raise_clear_errors(pair):
    target, draft = pair
    with pytest.raises(ValueError, match="prompt_ids"):
        generate(target, draft, [])
    with pytest.raises(ValueError, match="vocabularies"):
        generate(target, FunctionModel(lambda c: [1.0, 0.0], 2), [1])
    broken = FunctionModel(lambda c: [0.5, 0.6, 0, 0, 0, 0], V, name="broken")
    with pytest.raises(ValueError, match="broken"):
        generate(target, broken, [1])


@pytest.mark.unit
def test_the_verifier_library_imports_no_model_or_ui_library():
    code = "import sys, spectr_gbv; print([m for m in ('transformers', 'gradio', 'plotly') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


@pytest.mark.statistical
def test_the_row_sampler_draws_each_rows_law_and_never_a_zero_probability_token():
    """The engine's drafts and plain decoding's tokens come from `sample_rows` (inverse CDF of a
    float64 uniform per row): each row's draws follow its own law (chi-square, seeded), and the
    extreme uniforms 0 and 1 - 2^-53 land on tokens of positive probability."""
    from scipy.stats import chisquare

    from spectr_gbv.randomness import inverse_cdf_rows, sample_rows

    probs = torch.tensor([[0.0, 0.2, 0.0, 0.5, 0.3, 0.0], [0.6, 0.0, 0.0, 0.1, 0.0, 0.3]])
    generator = torch.Generator().manual_seed(11)
    draws = torch.stack([sample_rows(probs, generator) for _ in range(6000)])  # [n, 2]
    for row in range(2):
        counts = torch.bincount(draws[:, row], minlength=6)
        assert counts[probs[row] == 0].sum() == 0
        positive = probs[row] > 0
        law = probs[row][positive].double().numpy()
        expected = law / law.sum() * len(draws)
        assert chisquare(counts[positive].numpy(), expected).pvalue > 1e-3
    edges = torch.tensor([0.0, 1.0 - 2.0**-53], dtype=torch.float64)
    assert inverse_cdf_rows(probs, edges).tolist() == [1, 5]
    assert inverse_cdf_rows(probs, torch.tensor([1.0 - 2.0**-53, 0.0], dtype=torch.float64)).tolist() == [4, 0]
