"""Bad verifier input raises a ValueError that names the offending argument."""

from __future__ import annotations

import pytest
import torch

from spectr_gbv import METHODS, VerifyInput
from spectr_gbv.probs import logits_to_probs

pytestmark = pytest.mark.unit


def good(K=2, L=3, V=4):
    tokens = torch.zeros(K, L, dtype=torch.long)
    return tokens, torch.full((K, L, V), 1 / V, dtype=torch.float64), torch.full((K, L + 1, V), 1 / V, dtype=torch.float64)


def with_value(tensor, value):
    tensor = tensor.clone()
    tensor[0, 0, 0] = value
    return tensor


@pytest.mark.parametrize(
    "make, name",
    [
        (lambda t, p, q: (t[0], p, q), "draft_tokens"),
        (lambda t, p, q: (t[:0], p[:0], q[:0]), "K"),
        (lambda t, p, q: (t[:, :0], p[:, :0], q[:, :1]), "L"),
        (lambda t, p, q: (t.float(), p, q), "draft_tokens"),
        (lambda t, p, q: (t, p[:, :2], q), "draft_probs"),
        (lambda t, p, q: (t, p, q[:, :3]), "target_probs"),
        (lambda t, p, q: (t, p, q[..., :3]), "vocabulary"),
        (lambda t, p, q: (t, with_value(p, float("nan")), q), "draft_probs"),
        (lambda t, p, q: (t, p, with_value(q, -0.25)), "target_probs"),
        (lambda t, p, q: (t, p, q * 2), "target_probs"),
        (lambda t, p, q: (t + 7, p, q), "draft_tokens"),
        (lambda t, p, q: (t, torch.cat([torch.zeros_like(p[..., :1]), p[..., 1:] * 4 / 3], -1), q), "zero probability"),
    ],
)
def test_malformed_input_is_rejected_by_name(make, name):
    with pytest.raises(ValueError, match=name):
        VerifyInput.build(*make(*good()))


def test_canonical_rows_make_shared_nodes_identical():
    tokens = torch.tensor([[1, 2], [1, 3], [0, 2]])
    p = torch.rand(3, 2, 4, dtype=torch.float64).softmax(-1)
    q = torch.rand(3, 3, 4, dtype=torch.float64).softmax(-1)
    inp = VerifyInput.build(tokens, p, q)
    assert torch.equal(inp.target_probs[1, :2], inp.target_probs[0, :2])  # drafts 0, 1 share root and (1)
    assert torch.equal(inp.target_probs[2, 0], inp.target_probs[0, 0])  # all share the root
    assert not torch.equal(inp.target_probs[2, 1], inp.target_probs[0, 1])


def test_top_k_and_top_p_keep_a_proper_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.5, -1.0]])
    top_k = logits_to_probs(logits, 1.0, top_k=2)
    assert (top_k[0, 2:] == 0).all() and top_k.sum().item() == pytest.approx(1.0)
    top_p = logits_to_probs(logits, 1.0, top_p=0.6)
    assert top_p[0, 0] == 1.0  # the top token alone already has mass >= 0.6
    assert logits_to_probs(logits, 0.0).tolist() == [[1.0, 0.0, 0.0, 0.0]]


def test_every_registered_method_is_labelled_and_the_released_rule_is_marked_lossy():
    assert set(METHODS) == {"sd", "rrs", "spectr", "gbv", "spectr_gbv", "as_bv", "as_bv_handoff", "traversal",
                            "spectr_gbv_released"}
    assert [name for name, spec in METHODS.items() if not spec.exact] == ["spectr_gbv_released"]
    assert "lossy" in METHODS["spectr_gbv_released"].label and "NOT" in METHODS["spectr_gbv_released"].description
