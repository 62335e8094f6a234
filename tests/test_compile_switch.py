"""The compile switch without a compiler: `SPECTR_GBV_COMPILE` is read strictly, a compile in the
background never holds up a request, a compile that fails or disagrees leaves the target eager
with one logged line, and a switched target (its static-cache sessions) decodes the same tokens.

A stand-in compiler returns the eager step itself, and a stand-in scoring compiler the eager
scoring forward (still padded to its bucket), so the switch, the checks and the static-cache
session run for real, in seconds; tests/test_compiled.py runs torch.compile."""

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
from helpers import in_threads_switching_often, one_torch_thread
from tiny_models import save_tiny_llama

pytestmark = pytest.mark.unit

PROMPT = [3, 4, 5, 6]
LOADED: list = []  # every target these tests load: their background scoring compiles are waited for


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    with one_torch_thread():
        yield


@pytest.fixture(scope="module")
def tiny_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tiny-compile-switch")
    return save_tiny_llama(root / "target", seed=1), save_tiny_llama(root / "draft", seed=2)


def load(tiny_dirs):
    target, draft, _ = load_pair(str(tiny_dirs[0]), str(tiny_dirs[1]), device="cpu", compile=False)
    LOADED.append(target)
    return target, draft


def settle() -> None:
    """Every scoring bucket a session asked for is compiled (or given up) and its line logged, so
    no background compile logs into a later test's capture."""
    for target in LOADED:
        switch = getattr(target, "compiled", None)
        if switch is not None:
            assert switch.scoring.wait_idle(60), "a background scoring compile did not finish in 60 s"


@pytest.fixture(autouse=True)
def quiet_background():
    settle()
    yield
    settle()


def lines_from(caplog, thread: int | None = None) -> list[logging.LogRecord]:
    """The library's records logged by `thread` (default: this test's own thread)."""
    thread = threading.get_ident() if thread is None else thread
    return [r for r in caplog.records if r.name.startswith("spectr_gbv") and r.thread == thread]


def stand_in_scoring(target, capacity: int = compiled.STATIC_CAPACITY) -> None:
    """The target's scoring buckets "compiled" by the stand-in: no inductor in these tests."""
    compiled.attach(target, capacity).scoring.compiler = stand_in_scorer


@pytest.fixture
def pair(tiny_dirs):
    target, draft = load(tiny_dirs)
    stand_in_scoring(target)
    return target, draft


def greedy_runs(target, draft) -> dict[str, list[int]]:
    runs = {"ar": generate(target, None, PROMPT, method="ar", temperature=0, max_new_tokens=12,
                                detail=False).tokens}
    for method in ("sd", "as_bv_handoff"):
        runs[method] = generate(target, draft, PROMPT, method=method, num_drafts=2, draft_length=3, temperature=0,
                                max_new_tokens=12, detail=False).tokens
    return runs


def stand_in_compiler(base):
    return compiled.eager_step(base)


def stand_in_scorer(base, width, layers):
    return compiled_scoring.eager_scorer(base, layers)


# --------------------------------------------------------------------------- the setting


@pytest.mark.parametrize("value, app, cuda, wanted", [
    ("", True, True, True), ("auto", True, True, True), ("auto", True, False, False), ("", True, False, False),
    ("auto", False, True, False), ("", False, False, False),
    ("1", False, False, True), ("ON", False, False, True), ("on", True, False, True), ("0", True, True, False),
    ("off", True, True, False),
])
def test_the_setting_and_its_default_for_app_and_library(monkeypatch, value, app, cuda, wanted):
    """auto: the app compiles on a CUDA GPU only (on the CPU measured here it paid nothing); 1 forces it."""
    monkeypatch.setenv(compiled.COMPILE_ENV, value)
    monkeypatch.delenv("SPACES_ZERO_GPU", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    assert compiled.compile_wanted(app=app) is wanted


def test_an_unknown_setting_is_refused_naming_the_accepted_values(monkeypatch, tiny_dirs):
    monkeypatch.setenv(compiled.COMPILE_ENV, "fast")
    with pytest.raises(ValueError) as refused:
        compiled.compile_wanted(app=True)
    for accepted in ("0", "off", "1", "on", "auto"):
        assert repr(accepted)[1:-1] in str(refused.value)
    assert "'fast'" in str(refused.value)
    with pytest.raises(ValueError, match="accepted values"):  # the library refuses it before loading anything
        load_pair(str(tiny_dirs[0]), str(tiny_dirs[1]), device="cpu")


def test_the_app_refuses_an_unknown_setting_at_start(monkeypatch):
    import app

    monkeypatch.setenv(compiled.COMPILE_ENV, "yes please")
    with pytest.raises(ValueError, match="accepted values: 1, on, 0, off, auto"):
        app.launch(app.build_demo(), prevent_thread_lock=True)


def test_never_on_zerogpu(monkeypatch):
    monkeypatch.setenv(compiled.COMPILE_ENV, "on")
    monkeypatch.setenv("SPACES_ZERO_GPU", "true")
    assert compiled.compile_wanted(app=True) is False


# --------------------------------------------------------------------------- the switch


def test_a_request_during_a_slow_compile_is_served_eagerly_at_once(pair):
    target, draft = pair
    eager = greedy_runs(target, draft)
    release, entered = threading.Event(), threading.Event()

    def slow_compiler(base):
        entered.set()
        release.wait(600)  # a compile that lasts until the test ends it
        return compiled.eager_step(base)

    thread = compiled.compile_in_background(lambda: target, slow_compiler)
    assert entered.wait(30)
    during = greedy_runs(target, draft)
    # served while the compile still runs: a request that waited for it would wait out the 600 s
    assert thread.is_alive() and target.compiled.compiling
    assert compiled.serving_mode(target) == compiled.EAGER
    assert type(target.start(PROMPT)) is HFSession
    assert during == eager
    release.set()
    thread.join(30)
    assert compiled.serving_mode(target) == compiled.COMPILED
    assert isinstance(target.start(PROMPT), StaticHFSession)
    assert greedy_runs(target, draft) == eager  # every method, and AR, on the switched target


def test_a_session_keeps_the_mode_it_started_in(pair):
    target, _ = pair
    before = target.start(PROMPT)
    compiled.attach(target).compile_now(stand_in_compiler)
    after = target.start(PROMPT)
    assert type(before) is HFSession and isinstance(after, StaticHFSession)


def test_a_failed_compile_serves_eagerly_with_one_logged_line(pair, caplog):
    target, draft = pair
    eager = greedy_runs(target, draft)

    def broken(base):
        raise RuntimeError("inductor could not find a C compiler\nand a long traceback")

    with caplog.at_level(logging.INFO, logger="spectr_gbv"):
        assert compiled.attach(target).compile_now(broken) == compiled.EAGER
    lines = lines_from(caplog)  # the compile ran in this thread
    assert len(lines) == 1 and lines[0].levelno == logging.WARNING
    assert "RuntimeError: inductor could not find a C compiler" in lines[0].getMessage()
    assert "traceback" not in lines[0].getMessage()
    assert target.compiled.reason.startswith("RuntimeError")
    assert compiled.serving_mode(target) == compiled.EAGER
    assert greedy_runs(target, draft) == eager


def test_a_compiled_step_that_disagrees_is_not_used(pair, caplog):
    target, _ = pair

    def off_by_a_little(base):
        step = compiled.eager_step(base)
        return lambda ids, cache: step(ids, cache) * 1.01  # a wrong kernel: close, but outside fp32's tolerance

    with caplog.at_level(logging.INFO, logger="spectr_gbv"):
        assert compiled.attach(target).compile_now(off_by_a_little) == compiled.EAGER
    lines = [r.getMessage() for r in lines_from(caplog)]
    assert len(lines) == 1 and "differ from eager" in lines[0]
    assert type(target.start(PROMPT)) is HFSession


def test_a_compile_whose_target_does_not_load_logs_one_line(caplog):
    def no_target():
        raise OSError("no such model folder")

    with caplog.at_level(logging.INFO, logger="spectr_gbv"):
        thread = compiled.compile_in_background(no_target)
        thread.join(30)
    lines = [r.getMessage() for r in lines_from(caplog, thread.ident)]
    assert len(lines) == 1 and "no such model folder" in lines[0]


# --------------------------------------------------------------------------- the static cache


def test_a_session_that_outgrows_its_static_cache_goes_on_eagerly_with_the_same_tokens(tiny_dirs):
    target, draft = load(tiny_dirs)
    eager = greedy_runs(target, draft)
    stand_in_scoring(target, capacity=12)
    compiled.attach(target).compile_now(stand_in_compiler)  # the prompt and a few tokens fit
    session = target.start(PROMPT)
    assert isinstance(session, StaticHFSession)
    assert greedy_runs(target, draft) == eager
    for _ in range(12):  # plain decoding, one step at a time, past the capacity
        session.branch_logits(1)
        session.commit(0, [7])
    assert not session.static and session.cached == len(PROMPT) - 1 + 12


def test_static_cache_logits_equal_the_dynamic_caches(pair):
    """Scoring a tree of drafts and committing a path over the static cache gives the dynamic
    cache's logits (rounding aside), so a switched target is the same target."""
    target, _ = pair
    dynamic = target.start(PROMPT)
    compiled.attach(target).compile_now(stand_in_compiler)
    static = target.start(PROMPT)
    blocks = torch.tensor([[7, 8, 9], [7, 10, 11]])
    for session in (dynamic, static):
        session.logits = [session.branch_logits(1)]
        session.commit(0, [12])
        session.logits.append(session.score(blocks))
        session.commit(1, [7, 10, 13])  # two drafted tokens of the second block accepted, then a correction
        session.logits.append(session.score(blocks))
        session.commit(0, [14])
        session.logits.append(session.branch_logits(1))
    for got, expected in zip(static.logits, dynamic.logits):
        torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-5)
    # the trees went through the scoring bucket, padded: it passed its check, which counts the cache's entries
    assert (16, ()) in target.compiled.scoring.ready and not target.compiled.scoring.failed


def test_torch_compile_raising_leaves_the_target_eager(pair, monkeypatch, caplog):
    """The default compiler path (`compile_step`) with torch.compile itself failing."""
    target, _ = pair

    def no_compiler(*args, **kwargs):
        raise RuntimeError("torch.compile is not supported here")

    monkeypatch.setattr(torch, "compile", no_compiler)
    with caplog.at_level(logging.INFO, logger="spectr_gbv"):
        assert compiled.attach(target).compile_now() == compiled.EAGER
    lines = [r.getMessage() for r in lines_from(caplog)]
    assert len(lines) == 1 and "torch.compile is not supported here" in lines[0]
    assert type(target.start(PROMPT)) is HFSession


def test_a_compiled_step_that_fails_in_a_run_is_retaken_eagerly_and_the_target_goes_eager(pair, caplog):
    target, draft = pair
    eager = greedy_runs(target, draft)
    calls = {"n": 0}

    def fails_after_the_check(base):
        step = compiled.eager_step(base)

        def flaky(ids, cache):
            calls["n"] += 1
            if calls["n"] > compiled.CHECK_STEPS + 2:  # the check's steps and two of the run's pass
                step(ids, cache)  # it even wrote its entries before failing
                raise RuntimeError("CUDA graph replay failed")
            return step(ids, cache)

        return flaky

    compiled.attach(target).compile_now(fails_after_the_check)
    assert compiled.serving_mode(target) == compiled.COMPILED
    caplog.clear()  # the switch's own line
    with caplog.at_level(logging.INFO, logger="spectr_gbv"):
        ar = generate(target, None, PROMPT, method="ar", temperature=0, max_new_tokens=12, detail=False).tokens
    assert ar == eager["ar"]
    lines = [r.getMessage() for r in lines_from(caplog)]
    assert len(lines) == 1 and "CUDA graph replay failed" in lines[0]
    assert compiled.serving_mode(target) == compiled.EAGER


# --------------------------------------------------------------------------- the page


def test_the_run_header_says_how_the_target_ran(pair):
    from components.wiring.runs import header_line
    from spectr_gbv.pairs import TOY_KEY, get_pair

    target, _ = pair
    assert compiled.serving_mode(get_pair(TOY_KEY).target) is None  # a lookup table runs no forward
    line = header_line("default", ["sd"], 1, 4, 0.7, 0, served=compiled.serving_mode(target))
    assert "target eager" in line
    compiled.attach(target).compile_now(stand_in_compiler)
    line = header_line("default", ["sd"], 1, 4, 0.7, 0, served=compiled.serving_mode(target))
    assert "target compiled" in line and "eager" not in line
    assert "target" not in header_line("toy", ["sd"], 1, 4, 0.7, 0, served=None).replace("**", "")


def test_generate_on_a_teaching_pair_names_no_mode():
    from components.tabs.generate import generate_stream

    *_, last = generate_stream("toy", "the cat", "sd", 1, 2, 0.7, 4, 0)
    assert "target eager" not in last.metrics_line and "target compiled" not in last.metrics_line
    assert "seed 0" in last.metrics_line


def test_the_start_compiles_the_app_defaults_bucket_and_the_buckets_hold_the_apps_largest_tree():
    from components.serving.limits import LIMITS
    from components.wiring.inputs import DEFAULT_K, DEFAULT_L

    assert (compiled_scoring.DEFAULT_DRAFTS, compiled_scoring.DEFAULT_LENGTH) == (DEFAULT_K, DEFAULT_L)
    assert compiled_scoring.bucket_for(1 + DEFAULT_K * DEFAULT_L) == compiled_scoring.default_bucket()
    assert compiled_scoring.bucket_for(1 + LIMITS.block_tokens) is not None  # one pending token, K x L nodes
    assert [compiled_scoring.bucket_for(w) for w in (1, 2, 3, 9, 16, 17, 129)] == [2, 2, 4, 16, 16, 32, None]


def test_padding_hides_the_pads_from_every_real_row_and_each_pad_sees_only_itself():
    from spectr_gbv.trie import DraftTrie, ScoringLayout

    trie = DraftTrie.of_blocks([[5, 6, 7], [5, 8, 9]])  # five nodes, after two pending tokens: 7 wide
    layout = ScoringLayout.of(trie, 2, torch.float32, torch.device("cpu"))
    past, width, capacity = 10, 16, 32
    ids = torch.tensor([[3, 4] + trie.tokens])
    positions = (past + layout.offsets)[None]
    padded_ids, mask, padded_positions = compiled_scoring.padded_inputs(ids, positions, layout.recent_mask, past,
                                                                        width, capacity)
    assert padded_ids.shape == padded_positions.shape == (1, width) and mask.shape == (1, 1, width, capacity)
    visible = mask[0, 0] == 0
    assert torch.equal(visible[:7], layout.attention_mask(past, capacity) == 0)  # real rows: as unpadded
    assert not visible[:7, past + 7 :].any()  # no real row sees a pad (or any slot past the tree)
    for row in range(7, width):
        assert visible[row].nonzero().flatten().tolist() == [past + row]
    assert torch.equal(padded_ids[0, :7], ids[0]) and torch.equal(padded_positions[0, :7], positions[0])


def test_cuda_graph_replays_take_turns_and_hand_back_copies():
    """A CUDA graph writes every replay's outputs into the same memory: one visitor's replay must
    not overwrite another's before it reads them. A stand-in graph with one output buffer, called
    from many threads with a tiny switch interval: each thread reads its own input back."""
    buffer = torch.zeros(4)
    held = []

    def graphed(x, extra):
        held.append(compiled.CUDA_GRAPH_REPLAY.locked())
        buffer.copy_(x)
        for _ in range(20):  # room for another thread to run mid-replay
            pass
        return buffer, buffer * 0 + extra

    replay = compiled.one_replay_at_a_time(graphed)
    replay(torch.zeros(4), 0)  # the first call compiles (the compile thread's check), outside the lock
    assert held == [False]
    held.clear()
    wrong = []

    def visitor(i):
        x = torch.full((4,), float(i))
        for _ in range(200):
            out, other = replay(x, i)
            if out.data_ptr() == buffer.data_ptr() or not torch.equal(out, x) or not torch.equal(other, x):
                wrong.append(i)

    in_threads_switching_often(visitor, 6)
    assert wrong == [] and all(held) and len(held) == 1200
    assert replay(torch.ones(4), 1)[0].data_ptr() != buffer.data_ptr()


def test_a_graph_compiling_does_not_hold_up_the_replays_of_others():
    """A scoring bucket compiles in the background while sessions replay the graphs they use: its
    first call must not wait for, or hold, the replays' lock."""
    first_call = compiled.one_replay_at_a_time(lambda x: x + 1)
    done = []
    with compiled.CUDA_GRAPH_REPLAY:  # a visitor's replay going on
        worker = threading.Thread(target=lambda: done.append(first_call(torch.zeros(2))), daemon=True)
        worker.start()
        worker.join(10)
    assert len(done) == 1 and torch.equal(done[0], torch.ones(2))


def test_the_static_cache_pool_takes_back_a_cache_from_a_finalizer_in_a_thread_holding_its_lock(tiny_dirs):
    """A session's cache goes back to the pool from a weakref finalizer, which garbage collection
    may run in a thread that holds the pool's lock: that must not deadlock."""
    target, _ = load(tiny_dirs)
    switch = compiled.CompiledStep(target.model, capacity=16)
    cache = switch.new_cache()
    done = threading.Event()

    def give_back_inside_the_lock():
        with switch._pool_lock:
            switch._give_back(cache)
        done.set()

    threading.Thread(target=give_back_inside_the_lock, daemon=True).start()
    assert done.wait(10), "the pool's lock is not reentrant"
    assert switch.new_cache() is cache
