"""torch.compile of the target's one-token step and of its scoring forward, for real, on a tiny
random-weight Llama.

Slow: inductor compiles the step, the default scoring bucket (width 16) and that bucket for a
fused feature draft once for the module (a few minutes on a busy 2-core machine, less with
inductor's disk cache); one test lets the 4 and 8 buckets compile on need, in the background. Checks: the
compiled step passes its own check and gives eager's logits within fp32's tolerance, step after
step; the compiled scoring forward, padded to its bucket, gives eager's logits for a tree of two
drafts of three tokens and leaves the cache as long as eager does; greedy speculative decoding
with the compiled target (its scoring compiled) equals greedy plain decoding with it, and both
equal the eager target's tokens; a fused feature draft's bucket (compiled with the target layers'
outputs) hands over the full forward's features. A bucket whose compile raises, disagrees or fails in a run is
scored eagerly with the same tokens (those use the eager step as a stand-in compiler: seconds)."""

from __future__ import annotations

import logging
import threading

import pytest
import torch

from spectr_gbv import generate
from spectr_gbv.models import compiled, compiled_scoring
from spectr_gbv.models.hf import load_pair
from spectr_gbv.models.hf_session import HFSession
from spectr_gbv.models.static_session import StaticHFSession
from helpers import one_torch_thread, recording_fused_draft
from tiny_models import save_tiny_llama

pytestmark = pytest.mark.slow

PROMPT = [3, 4, 5, 6, 7]


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def compiled_pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-compiled")
    target, draft, _ = load_pair(str(save_tiny_llama(root / "target", seed=1)), str(save_tiny_llama(root / "draft", seed=2)),
                                 device="cpu", compile=True)
    target.compiled.scoring.on_need = False  # only the buckets the tests compile: few compiles
    return target, draft


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-scoring-fallback")
    return save_tiny_llama(root / "target", seed=1), save_tiny_llama(root / "draft", seed=2)


def counted(target) -> dict:
    """Count the calls of the target's ready scoring buckets (sessions started from now on)."""
    calls = {key: 0 for key in target.compiled.scoring.ready}

    def counting(key, scorer):
        def score(*args):
            calls[key] += 1
            return scorer(*args)
        return score

    target.compiled.scoring.ready = {key: counting(key, scorer) for key, scorer in target.compiled.scoring.ready.items()}
    return calls


def greedy_runs(target, draft, methods=("sd", "spectr_gbv")) -> dict[str, list[int]]:
    runs = {"ar": generate(target, None, PROMPT, method="ar", temperature=0, max_new_tokens=16, detail=False).tokens}
    for method in methods:
        runs[method] = generate(target, draft, PROMPT, method=method, num_drafts=2, draft_length=3, temperature=0,
                                max_new_tokens=16, detail=False).tokens
    return runs


def test_the_compile_passes_its_check_and_the_target_switches(compiled_pair):
    target, _ = compiled_pair
    assert target.compiled.reason is None
    assert compiled.serving_mode(target) == compiled.COMPILED
    assert isinstance(target.start(PROMPT), StaticHFSession)


def test_the_default_scoring_bucket_is_compiled_at_start(compiled_pair):
    target, _ = compiled_pair
    assert list(target.compiled.scoring.ready) == [(compiled_scoring.default_bucket(), ())]
    assert compiled_scoring.default_bucket() == 16 and not target.compiled.scoring.failed


def test_compiled_and_eager_scoring_logits_agree_on_a_padded_tree(compiled_pair):
    """K = 2, L = 3: after the prompt (five pending) and after one token (one pending), the trees
    are 11 and at most 7 positions wide, both padded to the 16 bucket. Logits within fp32's
    tolerance of the dynamic cache's eager ones, and the commits leave the same cache behind."""
    target, _ = compiled_pair
    calls = counted(target)
    eager, fast = HFSession(target, PROMPT), target.start(PROMPT)
    blocks = [torch.tensor([[8, 9, 10], [8, 11, 12]]), torch.tensor([[13, 14, 15], [16, 17, 18]]),
              torch.tensor([[9, 9, 9], [9, 9, 9]])]
    commits = [(1, [8, 11, 19]), (0, [20]), (0, [9, 9, 9, 21])]
    for tree, (branch, tokens) in zip(blocks, commits):
        expected, got = eager.score(tree), fast.score(tree)
        assert got.shape == expected.shape == (2, 4, target.vocab_size)
        scale = expected.abs().max().item()
        assert (got - expected).abs().max().item() <= compiled.TOLERANCE[torch.float32] * max(1.0, scale)
        for session in (eager, fast):
            session.commit(branch, tokens)
        assert fast.cache.get_seq_length() == eager.cache.get_seq_length() == fast.cached  # real entries only
    assert calls == {(16, ()): 3} and fast.static
    expected, got = eager.branch_logits(1), fast.branch_logits(1)  # the pads' slots never reach a later forward
    assert (got - expected).abs().max().item() <= compiled.TOLERANCE[torch.float32] * max(1.0, expected.abs().max().item())


def test_compiled_and_eager_logits_agree_within_fp32_tolerance(compiled_pair):
    target, _ = compiled_pair
    eager, fast = HFSession(target, PROMPT), target.start(PROMPT)
    calls_before = fast.forward_calls
    for token in (8, 9, 10, 11, 12, 13):
        expected, got = eager.branch_logits(1), fast.branch_logits(1)
        scale = expected.abs().max().item()
        assert (got - expected).abs().max().item() <= compiled.TOLERANCE[torch.float32] * max(1.0, scale)
        for session in (eager, fast):
            session.commit(0, [token])
    assert fast.static and fast.forward_calls - calls_before == 6  # the prompt, then five compiled steps


@pytest.mark.parametrize("method", ["sd", "spectr_gbv", "as_bv_handoff"])
def test_greedy_speculative_decoding_equals_greedy_ar_when_compiled(compiled_pair, method):
    target, draft = compiled_pair
    calls = counted(target)
    ar = generate(target, None, PROMPT, method="ar", temperature=0, max_new_tokens=20, detail=False).tokens
    run = generate(target, draft, PROMPT, method=method, num_drafts=2, draft_length=3, temperature=0,
                   max_new_tokens=20, detail=False).tokens
    assert run == ar
    assert calls[16, ()] > 0  # the target scored the drafts with the compiled forward
    eager_ar = []  # the same target, eagerly: the compiled step changes no greedy token here
    session = HFSession(target, PROMPT)
    for _ in range(20):
        token = int(session.branch_logits(1)[0].argmax())
        eager_ar.append(token)
        if token == target.eos_token_id:
            break
        session.commit(0, [token])
    assert ar == eager_ar


def test_a_fused_feature_draft_reads_the_layer_outputs_from_the_compiled_scoring_forward(compiled_pair):
    """The app's default draft reads target layers' outputs (EAGLE-3): their bucket is compiled with
    those outputs, and the features handed over are the full forward's, position by position."""
    target, _ = compiled_pair
    model = target.model
    assert target.compiled.scoring.compile(16, (0, 1))
    draft, handed = recording_fused_draft(model)
    calls = counted(target)
    run = generate(target, draft, PROMPT, method="sd", draft_length=3, temperature=0, max_new_tokens=12).tokens
    assert run == generate(target, None, PROMPT, method="ar", temperature=0, max_new_tokens=12).tokens
    assert calls[16, (0, 1)] > 0 and calls[16, ()] == 0
    features = torch.cat(handed)  # every committed position but the last, in order
    with torch.inference_mode():
        states = model.model(torch.tensor([PROMPT + run]), output_hidden_states=True).hidden_states
    expected = torch.cat([states[1], states[2]], dim=-1)[0, : features.shape[0]]
    torch.testing.assert_close(features, expected, atol=1e-4, rtol=1e-4)


def test_buckets_compiled_in_the_background_while_runs_go_on_give_the_same_tokens(compiled_pair):
    """What the app does: a run needs the 8 (and 4) buckets, inductor compiles them in the
    background thread while runs go on compiled in this one, and later sessions use them."""
    target, draft = compiled_pair
    scoring = target.compiled.scoring
    before = greedy_runs(target, draft)
    scoring.on_need = True
    try:
        during = greedy_runs(target, draft)  # at T = 0 the trees are 8 and 4 wide: both buckets wanted
        while scoring.worker is not None and scoring.worker.is_alive():
            assert greedy_runs(target, draft) == before
        assert {(4, ()), (8, ())} <= set(scoring.ready) and not scoring.failed
    finally:
        scoring.on_need = False
    calls = counted(target)
    assert during == before and greedy_runs(target, draft) == before
    assert calls[8, ()] > 0 and calls[4, ()] > 0 and calls[16, ()] == 0


# --------------------------------------------------------------------------- a bucket that stays eager


def eager_step_compiler(base):
    return compiled.eager_step(base)


@pytest.fixture
def fresh_pair(tiny_dirs):
    target, draft, _ = load_pair(str(tiny_dirs[0]), str(tiny_dirs[1]), device="cpu", compile=False)
    return target, draft


def test_a_bucket_whose_compile_raises_is_scored_eagerly_with_the_same_tokens(fresh_pair, caplog):
    target, draft = fresh_pair
    eager = greedy_runs(target, draft)
    switch = compiled.attach(target)

    def broken(base, width, layers):
        raise RuntimeError(f"inductor failed on width {width}\nand a long traceback")

    switch.scoring.compiler, switch.scoring.on_need = broken, False
    with caplog.at_level(logging.INFO, logger="spectr_gbv"):
        assert switch.compile_now(eager_step_compiler) == compiled.COMPILED  # the step is compiled, the bucket is not
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and "RuntimeError: inductor failed on width 16" in lines[0].getMessage()
    assert "traceback" not in lines[0].getMessage()
    assert not switch.scoring.ready and switch.scoring.failed[16, ()].startswith("RuntimeError")
    assert greedy_runs(target, draft) == eager


def test_a_bucket_that_disagrees_is_not_used(fresh_pair, caplog):
    target, draft = fresh_pair
    eager = greedy_runs(target, draft)
    switch = compiled.attach(target)

    def off_by_a_little(base, width, layers):
        score = compiled_scoring.eager_scorer(base, layers)
        return lambda *args: tuple(out * 1.01 for out in score(*args))  # close, but outside fp32's tolerance

    switch.scoring.compiler, switch.scoring.on_need = off_by_a_little, False
    with caplog.at_level(logging.INFO, logger="spectr_gbv"):
        switch.compile_now(eager_step_compiler)
    lines = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1 and "differ from eager" in lines[0]
    assert not switch.scoring.ready
    assert greedy_runs(target, draft) == eager


def test_a_bucket_that_leaves_the_pads_in_the_cache_is_not_used(fresh_pair):
    """The check counts the cache's entries: a forward that kept the pads' entries is refused."""
    target, _ = fresh_pair
    switch = compiled.attach(target)

    def keeps_pads(base, width, layers):
        score = compiled_scoring.eager_scorer(base, layers)

        def padded(ids, mask, positions, cache):
            out = score(ids, mask, positions, cache)
            for layer in cache.layers:
                layer.cumulative_length.add_(1)
            return out
        return padded

    switch.scoring.compiler = keeps_pads
    assert not switch.scoring.compile(8)
    assert "entries after scoring" in switch.scoring.failed[8, ()]


def test_a_bucket_that_fails_in_a_run_is_retaken_eagerly_and_dropped(fresh_pair, caplog):
    target, draft = fresh_pair
    eager = greedy_runs(target, draft)
    switch = compiled.attach(target)
    calls = {"n": 0}

    def fails_after_the_check(base, width, layers):
        score = compiled_scoring.eager_scorer(base, layers)

        def flaky(ids, mask, positions, cache):
            calls["n"] += 1
            out = score(ids, mask, positions, cache)  # it even wrote its entries before failing
            if calls["n"] > 3:  # the check's two calls and one of the run's pass
                raise RuntimeError("CUDA graph replay failed")
            return out
        return flaky

    switch.scoring.compiler, switch.scoring.on_need = fails_after_the_check, False
    switch.compile_now(eager_step_compiler)
    assert list(switch.scoring.ready) == [(16, ())]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="spectr_gbv"):
        assert greedy_runs(target, draft, methods=("spectr_gbv",)) == {k: eager[k] for k in ("ar", "spectr_gbv")}
    lines = [r.getMessage() for r in caplog.records if r.name.startswith("spectr_gbv")]
    assert len(lines) == 1 and "CUDA graph replay failed" in lines[0]
    assert not switch.scoring.ready and calls["n"] == 4


def test_a_bucket_needed_later_compiles_in_the_background_and_no_run_waits(fresh_pair):
    target, draft = fresh_pair
    eager = greedy_runs(target, draft)
    switch = compiled.attach(target)
    release, entered = threading.Event(), threading.Event()

    def slow_for_8(base, width, layers):
        if width == 8:
            entered.set()
            release.wait(600)  # a compile that lasts until the test ends it
        return compiled_scoring.eager_scorer(base, layers)

    switch.scoring.compiler = slow_for_8
    switch.compile_now(eager_step_compiler)
    assert list(switch.scoring.ready) == [(16, ())]
    during = greedy_runs(target, draft)  # widths up to 7 after the first iteration: they want the 8 bucket
    assert entered.wait(30) and switch.scoring.worker.is_alive()  # still compiling: no run waited for it
    assert during == eager
    release.set()
    switch.scoring.worker.join(30)
    assert {(8, ()), (16, ())} <= set(switch.scoring.ready)  # (and 4, if a tree of one shared draft came up)
    calls = counted(target)
    assert greedy_runs(target, draft) == eager
    # new sessions take the smallest ready bucket that holds the tree (at T = 0 the two drafts are
    # one: the prompt's five tokens and three nodes, then one pending token and three nodes)
    assert calls[16, ()] == 0 and calls[8, ()] > 0
