"""The fidelity check: exact methods agree with the target's law, the released rule does not."""

from __future__ import annotations

import itertools

import pytest

from spectr_gbv.config import DecodeConfig
from spectr_gbv.fidelity import exact_prefix_law, fidelity
from spectr_gbv.toy import encode, toy_pair, two_token_pair


def test_exact_prefix_law_is_the_target_law():
    target, _ = toy_pair()
    outcomes = list(itertools.product(range(8), repeat=2))
    law = exact_prefix_law(target, encode("the"), outcomes, DecodeConfig(temperature=1.0))
    assert sum(law.values()) == pytest.approx(1.0, abs=1e-12)
    q = target.next_token_probs(encode("the"))
    assert law[(1, 3)] == pytest.approx(float(q[1] * target.next_token_probs(encode("the cat"))[3]))


@pytest.mark.statistical
def test_two_token_example_separates_the_exact_rule_from_the_released_one():
    target, draft = two_token_pair()
    exact = fidelity(target, draft, [0], DecodeConfig(method="spectr_gbv", num_drafts=1, draft_length=2), 1000, 3)
    released = fidelity(target, draft, [0], DecodeConfig(method="spectr_gbv_released", num_drafts=1, draft_length=2), 1000, 3)
    assert exact.within_noise and exact.chi_square_p > 1e-3
    assert not released.within_noise and released.chi_square_p < 1e-6
    assert released.total_variation == pytest.approx(0.111, abs=0.04)  # the exact value is 1/9
    assert len(exact.rows) == 8 and exact.unobserved_mass == pytest.approx(0.0, abs=1e-12)


@pytest.mark.statistical
@pytest.mark.parametrize("method", ["sd", "spectr_gbv"])
def test_exact_methods_on_the_toy_world_stay_inside_the_noise_band(method):
    target, draft = toy_pair()
    config = DecodeConfig(method=method, num_drafts=3, draft_length=2, temperature=0.9)
    result = fidelity(target, draft, encode("the cat"), config, 600, 2)
    assert result.chi_square_p > 1e-3
    assert sum(r.count for r in result.rows) == 600


def test_bad_sizes_are_clear_errors():
    target, draft = toy_pair()
    with pytest.raises(ValueError, match="at least one run"):
        fidelity(target, draft, [0], DecodeConfig(), 0, 1)
