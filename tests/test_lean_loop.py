"""The lean loop (`generate(..., detail=False)`): the same tokens as the detailed loop for the
same seed, for every method, and at most two host reads per iteration for the rules that
decide on tensors (SD, SpecTr, GBV, SpecTr-GBV) and for AS-BV+H with one draft, counted on a real
transformers pair; plus the tensor rules
against their host-side `verify` on scripted inputs, and the benchmark's fair schedule."""

from __future__ import annotations

import pytest
import torch

from spectr_gbv import METHODS, generate
from spectr_gbv.bench.__main__ import Contender, race
from spectr_gbv.bench.counts import HostReadCounter, OpCounter, count_loop
from spectr_gbv.methods.base import VerifyInput
from spectr_gbv.models import FunctionModel
from spectr_gbv.models.hf import load_pair
from spectr_gbv.pairs import TOY_KEY, get_pair
from spectr_gbv.randomness import inverse_cdf_rows
from conftest import dirichlet_model, mixture
from tiny_models import save_tiny_llama

METHOD_NAMES = ["ar", *METHODS]
TENSOR_RULES_BY_NAME = ["sd", "spectr", "gbv", "spectr_gbv"]  # the rules with a `decide`, checked against the registry below


@pytest.fixture(scope="module")
def tiny_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("lean")
    target, draft, tokenizer = load_pair(str(save_tiny_llama(root / "t", vocab_size=40, seed=1)),
                                         str(save_tiny_llama(root / "d", vocab_size=40, seed=2)), device="cpu")
    return target, draft, tokenizer("w1 w2 w3")["input_ids"]


@pytest.mark.unit
@pytest.mark.parametrize("method", METHOD_NAMES)
def test_lean_and_detailed_loops_emit_the_same_tokens_on_the_toy_world(method):
    pair = get_pair(TOY_KEY)
    ids = pair.encode("the cat")
    for seed in range(4):
        kwargs = dict(method=method, num_drafts=3, draft_length=3, temperature=0.9, max_new_tokens=20, seed=seed)
        detailed = generate(pair.target, pair.draft, ids, with_theory=False, **kwargs)
        lean = generate(pair.target, pair.draft, ids, detail=False, **kwargs)
        assert lean.tokens == detailed.tokens
        assert lean.accepted == [it.num_accepted for it in detailed.iterations]
        assert lean.target_calls == detailed.target_calls


@pytest.mark.unit
@pytest.mark.parametrize("vocab, head", [(120, None), (700, 300)])
def test_lean_and_detailed_loops_agree_for_as_bv_on_large_tables(vocab, head):
    """Above 64 tokens AS-BV's phase 1 runs on the device, and from 257 with a narrower draft on its
    support (700 tokens, a head of 300): the lean loop (the drafts' values and phase 1's uniforms
    read by the engine with the tokens) and the detailed one (the rule reads them itself) still
    emit the same tokens."""
    target_fn = dirichlet_model(vocab, 5, 0.3)
    draft_fn = mixture(target_fn, dirichlet_model(vocab, 6, 0.3), 0.6)
    if head is not None:
        on_head = torch.zeros(vocab, dtype=torch.float64)
        on_head[torch.randperm(vocab, generator=torch.Generator().manual_seed(7))[:head]] = 1.0
        wide = draft_fn
        draft_fn = lambda context: wide(context) * on_head / (wide(context) * on_head).sum()  # noqa: E731
    target, draft = FunctionModel(target_fn, vocab), FunctionModel(draft_fn, vocab)
    for method in ("as_bv", "as_bv_handoff"):
        for K in (2, 3):
            for seed in range(2):
                kwargs = dict(method=method, num_drafts=K, draft_length=3, temperature=1.0, max_new_tokens=12, seed=seed)
                lean = generate(target, draft, [0], detail=False, **kwargs)
                assert lean.tokens == generate(target, draft, [0], with_theory=False, **kwargs).tokens


@pytest.mark.model
@pytest.mark.parametrize("method", ["ar", "sd", "spectr", "gbv", "spectr_gbv", "as_bv_handoff"])
def test_lean_and_detailed_loops_agree_on_a_transformers_pair(tiny_pair, method):
    target, draft, ids = tiny_pair
    for seed in range(3):
        kwargs = dict(method=method, num_drafts=2, draft_length=4, temperature=1.0, max_new_tokens=24, seed=seed)
        assert generate(target, draft, ids, detail=False, **kwargs).tokens == generate(target, draft, ids, **kwargs).tokens


@pytest.mark.model
@pytest.mark.parametrize("method", TENSOR_RULES_BY_NAME)
def test_tensor_rules_read_the_host_at_most_twice_per_iteration(tiny_pair, method):
    target, draft, ids = tiny_pair
    counts = count_loop(target, draft, ids, method, 2, 4, 1.0, 32)
    assert counts.iterations > 1
    assert counts.host_reads <= 2 * counts.iterations, counts.reads_by_name
    detailed = count_loop(target, draft, ids, method, 2, 4, 1.0, 32, detail=True)
    assert detailed.host_reads > counts.host_reads  # the records are what the lean loop leaves out


@pytest.fixture(scope="module")
def wide_pair(tmp_path_factory):
    """A tiny pair above ORDER_HEAD (256) tokens, where AS-BV's node laws read nothing (between 65 and
    256 tokens rho* and beta are still read, `as_bv_device.on_device`)."""
    root = tmp_path_factory.mktemp("wide")
    target, draft, tokenizer = load_pair(str(save_tiny_llama(root / "t", vocab_size=300, seed=3)),
                                         str(save_tiny_llama(root / "d", vocab_size=300, seed=4)), device="cpu")
    return target, draft, tokenizer("w1 w2 w3")["input_ids"]


@pytest.mark.model
@pytest.mark.parametrize("num_drafts, pair", [(1, "tiny_pair"), (2, "wide_pair")])
def test_the_apps_rule_reads_the_host_twice_per_iteration_with_one_or_two_drafts(request, num_drafts, pair):
    # The drafts' tokens with what AS-BV+H reads from the drafts alone (`MethodSpec.prefetch`),
    # then its decision: the tensor rules' two. At K = 2 (above 256 tokens) phase 1's coin, the
    # hand-off and GBV on the loser's block are decided on the device with the scan
    # (`as_bv_handoff_pair`); at K >= 3, or on a smaller table, a node where the drafts part
    # still reads its own.
    target, draft, ids = request.getfixturevalue(pair)
    counts = count_loop(target, draft, ids, "as_bv_handoff", num_drafts, 4, 1.0, 32)
    assert counts.iterations > 1
    assert counts.host_reads <= 2 * counts.iterations, counts.reads_by_name


@pytest.mark.model
def test_plain_decoding_reads_the_host_once_per_token(tiny_pair):
    target, draft, ids = tiny_pair
    counts = count_loop(target, draft, ids, "ar", 1, 1, 1.0, 16)
    assert counts.iterations == counts.tokens == 16
    assert counts.host_reads == counts.iterations, counts.reads_by_name


@pytest.mark.unit
def test_the_counters_see_each_kind_of_read_and_every_op():
    x = torch.arange(6.0)
    with HostReadCounter() as reads, OpCounter() as ops:
        x.sum().item(), x.tolist(), int(x[1]), float(x[2]), bool(x[3] > 0), x.cpu(), x.nonzero(), [0, 1][x.long()[1]]
        x[x > 2], x[:, None][x > 2, 0], x.masked_select(x > 2), torch.unique(x)  # results sized by data: read
        x[x.long()[3]]  # a 0-dim integer tensor as an index: its value read, here and in the assignment
        x.clone()[x.long()[0]] = 1.0
        x[x.long()[:2]], x[torch.where(x > 2, x, 0.0).long()]  # integer indices and masks used as values: no read
        y = (x * 2 + 1).exp()
    assert reads.by_name == {"item": 1, "tolist": 1, "__int__": 1, "__float__": 1, "__bool__": 1, "cpu": 1,
                             "nonzero": 1, "__index__": 1, "mask_index": 2, "masked_select": 1, "unique": 1,
                             "scalar_index": 2}
    assert ops.by_op["mul"] == 1 and ops.by_op["add"] == 1 and ops.by_op["exp"] == 1
    assert y.shape == x.shape


def random_input(generator: torch.Generator, K: int, L: int, V: int) -> VerifyInput:
    """Drafts sampled from their own distributions, and targets that range from unrelated laws
    (rejections) to the draft's own (whole blocks accepted)."""
    draft = torch.softmax(3 * torch.randn(K, L, V, generator=generator, dtype=torch.float64), -1)
    other = torch.softmax(3 * torch.randn(K, L + 1, V, generator=generator, dtype=torch.float64), -1)
    closeness = torch.rand(1, generator=generator, dtype=torch.float64)  # from unrelated laws to the draft's own
    target = (1 - closeness) * other
    target[:, :L] += closeness * draft
    target[:, L] += closeness * other[:, L]
    tokens = torch.multinomial(draft.reshape(-1, V), 1, generator=generator).reshape(K, L)
    return VerifyInput.build(tokens, draft, target)


def with_shared_prefixes(inp: VerifyInput, generator: torch.Generator) -> VerifyInput:
    """Drafts that repeat earlier drafts' first tokens (so the trie has shared nodes), made
    consistent: a copied token is one its row can propose, and `build` canonicalises the rows."""
    tokens = inp.draft_tokens.clone()
    K, L = tokens.shape
    for k in range(1, K):
        shared = int(torch.randint(0, L + 1, (1,), generator=generator))
        tokens[k, :shared] = tokens[int(torch.randint(0, k, (1,), generator=generator)), :shared]
    draft = inp.draft_probs.clone()
    draft[..., :] += 1e-3  # every token proposable, so a copied prefix keeps positive draft probability
    return VerifyInput.build(tokens, draft / draft.sum(-1, keepdim=True), inp.target_probs)


TENSOR_RULES = [name for name, spec in METHODS.items() if spec.decide is not None]


@pytest.mark.unit
def test_the_tensor_rules_are_sd_spectr_gbv_and_spectr_gbv():
    assert TENSOR_RULES == TENSOR_RULES_BY_NAME


@pytest.mark.exact
@pytest.mark.parametrize("method", TENSOR_RULES)
def test_each_tensor_rule_decides_as_its_verify_does_from_the_same_uniforms(method):
    spec = METHODS[method]
    make = torch.Generator().manual_seed(5)
    stops, winners = set(), set()
    for case in range(300):
        K = 1 if not spec.multi_draft else 1 + case % 4
        inp = random_input(make, K, 4, 7)
        if K > 1 and case % 2:
            inp = with_shared_prefixes(inp, make)
        rng = spec.randomness(torch.Generator().manual_seed(case), K, 4, torch.device("cpu"))
        result = spec.verify(inp, rng)
        winner, tau, final, *block = spec.decide(inp, torch.Generator().manual_seed(case)).tolist()
        assert (tau, [*block[:tau], final]) == (result.num_accepted, result.tokens), case
        if tau > 0:
            assert block[:tau] == inp.draft_tokens[result.winning_draft, :tau].tolist()
        stops.add(tau)
        winners.add(winner)
    assert stops == set(range(5))  # every stop depth, the bonus included, was exercised
    assert winners == ({0} if not spec.multi_draft else {0, 1, 2, 3})


@pytest.mark.unit
@pytest.mark.parametrize("method", ["spectr", "spectr_gbv"])
def test_one_draft_takes_rho_one_without_searching_for_it(method):
    """rho* = 1 for a single candidate: the tensor rules at K = 1 sort nothing (the search for
    rho* begins with a sort of the vocabulary by ratio), while K = 2 does search at the root."""
    make = torch.Generator().manual_seed(3)
    sorts = {}
    for K in (1, 2):
        inp = random_input(make, K, 4, 7)
        with OpCounter() as ops:
            METHODS[method].decide(inp, torch.Generator().manual_seed(0))
        sorts[K] = ops.by_op["sort"]
    assert sorts[1] == 0 and sorts[2] > 0, sorts


@pytest.mark.unit
def test_a_trusted_input_equals_a_built_one_with_shared_prefixes():
    make = torch.Generator().manual_seed(0)
    V, L = 5, 3
    draft = torch.softmax(torch.randn(3, L, V, generator=make), -1)
    target = torch.softmax(torch.randn(3, L + 1, V, generator=make), -1)
    tokens = torch.tensor([[1, 2, 3], [1, 2, 0], [4, 2, 3]])  # drafts 0 and 1 share a two-token prefix
    built, trusted = VerifyInput.build(tokens, draft, target), VerifyInput.trusted(tokens, draft, target)
    assert torch.equal(built.target_probs, trusted.target_probs)
    assert torch.equal(built.draft_probs, trusted.draft_probs)


@pytest.mark.unit
def test_row_sampling_never_draws_past_the_last_token_even_when_the_quantile_rounds_up():
    probs = torch.tensor([[0.2, 0.8, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]])
    assert inverse_cdf_rows(probs, torch.tensor([1.0, 1.0])).tolist() == [1, 3]
    assert inverse_cdf_rows(probs, torch.tensor([0.1, 0.5])).tolist() == [0, 3]


@pytest.mark.unit
def test_the_benchmark_warms_every_run_up_and_times_plain_decoding_just_before_each_run():
    log = []

    def contender(name):
        return Contender(name, 1, 1, lambda ids, seed: (log.append((name, ids[0])), (4, 2))[1])

    ar, a, b = contender("ar"), contender("a"), contender("b")
    race([a, b], ar, [[0], [1]], rounds=2)
    assert log[:3] == [("ar", 0), ("a", 0), ("b", 0)]  # one untimed warm-up each, before any timing
    timed = log[3:]
    assert len(timed) == 2 * 2 * 2 * 2  # runs x rounds x prompts x (ar + run)
    assert all(timed[i][0] == "ar" and timed[i + 1][0] != "ar" and timed[i][1] == timed[i + 1][1]
               for i in range(0, len(timed), 2))
    assert set(a.best_s) == set(b.best_s) == set(ar.best_s) == {0, 1}


@pytest.mark.unit
def test_the_benchmark_decodes_each_prompt_with_its_own_seeds():
    log = []
    a = Contender("a", 1, 1, lambda ids, seed: (log.append((ids[0], seed)), (4, 2))[1])
    ar = Contender("ar", 0, 0, lambda ids, seed: (4, 0))
    race([a], ar, [[10], [11]], rounds=2, seeds=3)
    # prompt i's seeds are i, i + 2, i + 4: with one seed, the prompt's index, as before
    assert sorted(set(log[1:])) == [(10, 0), (10, 2), (10, 4), (11, 1), (11, 3), (11, 5)]
    assert len(log[1:]) == 2 * 2 * 3
    assert set(a.best_s) == set(ar.best_s) == set(range(6))
    assert a.tokens_per_s > 0


@pytest.mark.unit
def test_the_lean_loop_takes_no_phase_timings_which_on_cuda_are_device_syncs(monkeypatch):
    from spectr_gbv import engine

    pair = get_pair(TOY_KEY)
    ids = pair.encode("the cat")
    timings = []
    original = engine._seconds_since
    monkeypatch.setattr(engine, "_seconds_since", lambda start, device: timings.append(device) or original(start, device))
    for method in ("sd", "spectr_gbv", "as_bv_handoff"):
        kwargs = dict(method=method, num_drafts=2, draft_length=3, temperature=0.9, max_new_tokens=12, seed=1)
        lean = generate(pair.target, pair.draft, ids, detail=False, **kwargs)
        assert timings == [], method
        detailed = generate(pair.target, pair.draft, ids, with_theory=False, **kwargs)
        assert detailed.tokens == lean.tokens
        assert len(timings) == 3 * len(detailed.iterations), method  # draft, target, verify: the detailed loop's phases
        timings.clear()
