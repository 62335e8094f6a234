"""AS-BV+H at K = 2 decided on the device (`as_bv_handoff_pair`) against the same rule asking a
`Randomness` for each uniform in turn (`as_bv_handoff.verify` under scripted uniforms: the path
the exact-enumeration tier proves exact). Given the same uniforms, both must return the same
tokens, tests, final law and Y, bit for bit. The inputs make the drafts part at every depth
(and never), and make the hand-off run both ways; the tiny tables with AS-BV's large-vocabulary
stand-ins switched on also reach every component at the parting node."""

from __future__ import annotations

from collections import Counter

import pytest
import torch

from helpers import ScriptedAhead, two_drafts
from spectr_gbv.methods import METHODS, as_bv_fast, as_bv_handoff_pair
from spectr_gbv.methods.as_bv import FIRST, LEX, SEQ
from spectr_gbv.methods.base import VerifyInput
from spectr_gbv.randomness import ScriptedRandomness

pytestmark = pytest.mark.exact

VERIFY = METHODS["as_bv_handoff"].verify


def compare(inp: VerifyInput, uniforms: list[float]) -> tuple[bool, str]:
    """Both ways on the same uniforms: asserts they agree; returns (the hand-off ran, how it ended)."""
    ahead = ScriptedAhead(uniforms)
    on_device = VERIFY(inp, ahead)
    assert ahead.used == as_bv_handoff_pair.uniform_budget(inp.draft_length)  # one block, nothing else drawn
    asked = VERIFY(inp, ScriptedRandomness(uniforms))
    assert (on_device.tokens, on_device.final_kind, on_device.winning_draft, on_device.final_position) == \
        (asked.tokens, asked.final_kind, asked.winning_draft, asked.final_position)
    assert on_device.tests == asked.tests
    assert torch.equal(on_device.final_distribution, asked.final_distribution)
    L = inp.draft_length
    handed_off = len(asked.tests) > L
    return handed_off, ("accepted " + asked.final_kind) if handed_off and asked.tests[L].accepted else "rejected"


@pytest.mark.parametrize("vocab, support, length", [(1000, 400, 4), (300, 300, 3), (120, 120, 2)])
def test_the_device_form_decides_as_the_rule_that_asks_for_each_uniform(vocab, support, length):
    """On the draft's support plus a rest cell (1,000 tokens, 400 proposable, as the default pair's
    8,192 of 49,152), on the full vocabulary above ORDER_HEAD, and between 65 and 256 tokens."""
    handoffs = 0
    for parting in [None, *range(length)]:
        for seed in range(8):
            uniforms = torch.rand(40, generator=torch.Generator().manual_seed(100 + seed), dtype=torch.float64).tolist()
            handoffs += compare(two_drafts(seed, vocab, support, length, parting), uniforms)[0]
    assert handoffs > 0


def test_every_branch_agrees_on_tiny_tables_with_the_large_vocabulary_stand_ins(large_vocabulary_paths, monkeypatch):
    """Five tokens with the stand-ins on (the device laws from 3 tokens on, a head of 2 in the
    order: tail tokens among the candidates): every component chooses at the parting node, seq
    accepts and rejects, and a hand-off is accepted (ending with a bonus and with a correction)
    and rejected."""
    choices, ends = Counter(), Counter()
    select = as_bv_handoff_pair._select

    def spy(*args):
        parting = select(*args)
        choices[int(parting.component), bool(parting.seq_won)] += 1
        return parting

    monkeypatch.setattr(as_bv_handoff_pair, "_select", spy)
    for length in (1, 2, 3):
        for parting in [None, *range(length)]:
            for seed in range(24):
                uniforms = torch.rand(40, generator=torch.Generator().manual_seed(seed), dtype=torch.float64).tolist()
                handed_off, end = compare(two_drafts(seed, 5, 5, length, parting), uniforms)
                ends[end] += handed_off
    assert {(LEX, False), (SEQ, True), (SEQ, False), (FIRST, False)} <= set(choices), choices
    assert min(ends["accepted bonus"], ends["accepted correction"], ends["rejected"]) > 0, ends


@pytest.mark.parametrize("vocab", [40, 700])
def test_the_orders_device_keys_rank_as_the_order(vocab):
    """`NodeOrder.top_on_device` and `below_mask_on_device` (which the device form uses at the
    parting node) against `top` and `below_mask`, on an order without a tail (40 tokens) and with
    one (700: head and tail tokens among the candidates)."""
    g = torch.Generator().manual_seed(vocab)
    target = torch.softmax(torch.randn(vocab, generator=g, dtype=torch.float64), -1)
    draft = torch.softmax(torch.randn(vocab, generator=g, dtype=torch.float64), -1)
    order = as_bv_fast.strict_order(target, draft)
    assert (order.tail is None) == (vocab <= as_bv_fast.ORDER_HEAD)
    tokens = torch.randperm(vocab, generator=g)[:60].tolist()
    for a, b in zip(tokens[::2], tokens[1::2]):
        pair = torch.tensor([a, b])
        assert [a, b][int(order.top_on_device(pair))] == order.top([a, b])
        assert torch.equal(order.below_mask_on_device(torch.tensor(a)), order.below_mask(a))


def test_an_accepted_handoff_on_the_support_layout_agrees_and_is_the_full_vocabularys_law(monkeypatch):
    """The hand-off accepted on the draft's support plus a rest cell (1,000 tokens, 400 proposable),
    ending in GBV's correction on the loser's block: random inputs almost never reach it (its coin
    needs r(z) > 0 at the loser's token), so the target is pushed onto the loser's token at d* and
    the uniforms are set so that phase 2 stops at d* and the hand-off coin succeeds. Both forms
    agree bit for bit, and the lifted correction is the full vocabulary's GBV correction (`stop_law`
    on `inp`'s rows: the same rule, to rounding)."""
    from spectr_gbv.methods.gbv import scan_weights, stop_law

    seen = []
    select = as_bv_handoff_pair._select

    def spy(*args):
        parting = select(*args)
        seen.append((int(parting.uniforms_used), int(parting.chosen)))
        return parting

    monkeypatch.setattr(as_bv_handoff_pair, "_select", spy)
    corrections = Counter()
    for length in (3, 4):
        for parting in range(length - 1):  # the loser keeps a block of at least one token
            for seed in range(8):
                uniforms = torch.rand(40, generator=torch.Generator().manual_seed(100 + seed), dtype=torch.float64).tolist()
                base = two_drafts(seed, 1000, 400, length, parting)
                seen.clear()
                compare(base, uniforms)
                target = base.target_probs.clone()
                target[:, parting, base.draft_tokens[1 - seen[0][1], parting]] += 1.0  # r(z) > 0 at the loser's z
                inp = VerifyInput.build(base.draft_tokens, base.draft_probs, target / target.sum(-1, keepdim=True))
                seen.clear()
                compare(inp, uniforms)
                offset = seen[0][0]
                for t in range(parting, length):  # phase 2's coins from d* on fail: it stops at d* ...
                    uniforms[offset + t] = 1.0 - 1e-12
                if parting:
                    uniforms[offset + parting - 1] = 1e-12  # ... having accepted d* tokens
                uniforms[offset + length] = 1e-12  # the hand-off's coin succeeds wherever r(z) > 0
                for first in (False, True):  # the loser's block: as drawn, and its first coin succeeding
                    if first:
                        uniforms[offset + length + 1] = 1e-12
                    compare(inp, uniforms)
                    result = VERIFY(inp, ScriptedRandomness(uniforms))
                    if result.final_kind != "correction" or len(result.tests) == length or not result.tests[length].accepted:
                        continue
                    k, start, depth = result.tests[length].draft, parting + 1, result.final_position
                    corrections[depth > start] += 1
                    omega = scan_weights(inp, k, start)
                    full, _ = stop_law(omega, depth - start, inp.target_probs[k, start:], inp.draft_probs[k, start:])
                    assert torch.allclose(result.final_distribution, full, rtol=1e-9, atol=1e-15)
    assert min(corrections[False], corrections[True]) >= 1, corrections
