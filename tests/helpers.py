"""Helpers shared by several test modules (not a test module: pytest does not collect it).

Test modules import from here, never from one another. Fixtures shared by several modules are
in conftest.py. Imports of the app, gradio and transformers stay inside the functions, so that
a module importing one helper does not load them all.
"""

from __future__ import annotations

import contextlib
import itertools
import sys
import threading
import time
from collections import Counter

import numpy as np
import torch
from scipy.stats import chisquare

from spectr_gbv import METHODS, generate
from spectr_gbv.methods.base import VerifyInput
from spectr_gbv.randomness import ScriptedRandomness


class ScriptedAhead(ScriptedRandomness):
    """Scripted uniforms that are also handed out ahead in blocks, in order, as `TorchRandomness`
    hands them out: a rule then takes its path for a stream of uniforms."""

    def uniform_block(self, n: int, device: torch.device) -> torch.Tensor:
        return self._uniforms(n, device)


def last(stream):
    """The final item a handler's generator yields (its result after every streamed step)."""
    *_, final = stream
    return final


# ------------------------------------------------------------------ the app's handlers


def toy_generate(method="spectr_gbv", K=3, L=4, tokens=20, prompt="the cat", pair="toy"):
    """Generate's handler run to its end (temperature 0.8, seed 1): its final outputs."""
    from components.tabs import generate as generate_view

    return last(generate_view.generate_stream(pair, prompt, method, K, L, 0.8, tokens, 1))


def page_defaults(pair: str, prompt: str) -> dict:
    """The settings the page opens with on `pair`, read from the built (not launched) app."""
    import app

    demo = app.build_demo(default_pair=pair, default_prompt=prompt)
    by_id = {b.elem_id: b for b in demo.blocks.values() if getattr(b, "elem_id", None)}
    by_label = {getattr(b, "label", None): b for b in demo.blocks.values()}
    return dict(method=by_label["Method (Generate, Fidelity, Race)"].value, K=by_id["num-drafts"].value,
                L=by_id["draft-length"].value, T=by_label["T (temperature)"].value,
                tokens=by_label["Max new tokens"].value, seed=by_label["Seed"].value,
                methods=by_label["Methods (Compare, Sweep)"].value, repeats=by_id["compare-repeats"].value,
                values=by_id["sweep-values"].value, runs=by_id["fidelity-runs"].value,
                fidelity_tokens=by_label["First tokens compared"].value)


def assert_clear(message) -> None:
    """An error message a user can act on: words, not Gradio's bare "Error", a traceback or markup."""
    assert isinstance(message, str) and len(message) > 15, message  # not Gradio's bare "Error" (or nothing)
    assert "internal error" not in message.lower() and "Traceback" not in message, message
    assert "<" not in message, message  # markup from the input is escaped (the toast renders HTML)


# ------------------------------------------------------------------ stand-in model pairs


def stand_in_pair(cost: str, seconds: float, calls: list):
    """The Toy world's tables as a 'real model' pair under the default key: every call sleeps
    (cost "sleep"), or burns CPU (any other cost), `seconds`, and appends to `calls`."""
    from spectr_gbv import toy
    from spectr_gbv.models.function import FunctionModel
    from spectr_gbv.pairs import DEFAULT_KEY, PAIRS, Pair

    def slow(probs_fn):
        def probs(context):
            calls.append(1)
            end = time.perf_counter() + seconds
            if cost == "sleep":
                time.sleep(seconds)
            else:
                while time.perf_counter() < end:
                    pass
            return probs_fn(context)
        return probs

    target = FunctionModel(slow(toy._target_probs), len(toy.WORDS), name="stand-in target")
    draft = FunctionModel(slow(toy._draft_probs), len(toy.WORDS), name="stand-in draft")
    return Pair(PAIRS[DEFAULT_KEY], target, draft, toy.encode, toy.decode)


def slow_toy_pair(seconds: float):
    """The Toy world, every model call `seconds` slower: a run long enough to press Stop in."""
    from spectr_gbv import toy
    from spectr_gbv.models.function import FunctionModel
    from spectr_gbv.pairs import PAIRS, TOY_KEY, Pair

    def slow(probs_fn):
        def probs(context):
            time.sleep(seconds)
            return probs_fn(context)
        return probs

    target = FunctionModel(slow(toy._target_probs), len(toy.WORDS), name="slow toy target")
    draft = FunctionModel(slow(toy._draft_probs), len(toy.WORDS), name="slow toy draft")
    return Pair(PAIRS[TOY_KEY], target, draft, toy.encode, toy.decode, list(toy.WORDS))


# ------------------------------------------------------------------ laws and expectations


def chi_square_p_value(samples: list[tuple[int, ...]], law: dict[tuple[int, ...], float]) -> float:
    """Chi-square p-value of `samples` against `law`; outcomes expected fewer than 5 times are pooled."""
    counts = Counter(samples)
    observed, expected = [], []
    pooled_observed, pooled_expected = 0, 0.0
    for outcome, prob in law.items():
        if prob * len(samples) < 5:
            pooled_observed += counts.get(outcome, 0)
            pooled_expected += prob * len(samples)
        else:
            observed.append(counts.get(outcome, 0))
            expected.append(prob * len(samples))
    if pooled_expected > 0:
        observed.append(pooled_observed)
        expected.append(pooled_expected)
    expected_arr = np.array(expected)
    return chisquare(observed, expected_arr * (sum(observed) / expected_arr.sum())).pvalue


def theory_expected_accepted(name: str, target_fn, draft_fn, num_drafts: int, draft_length: int) -> float:
    """sum over draft tuples of P(tuple) * E[tau | tuple], from the method's theory function."""
    from spectr_gbv.exact import sequence_prob, verify_input_for

    vocab = len(target_fn(()))
    blocks = list(itertools.product(range(vocab), repeat=draft_length))
    total = 0.0
    for drafts in itertools.product(blocks, repeat=num_drafts):
        weight = 1.0
        for x in drafts:
            weight *= sequence_prob(x, draft_fn)
        total += weight * METHODS[name].expected_accepted(verify_input_for(drafts, target_fn, draft_fn))
    return total


# ------------------------------------------------------------------ transformers models


def full_logits(model, ids: list[int]) -> torch.Tensor:
    """An `HFModel`'s logits at every position of `ids`, by one full forward (no cache)."""
    with torch.inference_mode():
        return model.model(torch.tensor([ids], device=model.device)).logits[0, :, : model.vocab_size].float()


def greedy(model, prompt: list[int], n: int) -> list[int]:
    """Plain greedy decoding of an `HFModel` by full recomputes: the reference for T = 0."""
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(full_logits(model, ids)[-1].argmax()))
        if ids[-1] == model.eos_token_id:
            break
    return ids[len(prompt):]


def assert_first_two_tokens_follow_the_target_law(target, draft) -> None:
    """Chi-square of 1,200 seeded two-token SpecTr-GBV outputs against the law computed from the target."""
    target.eos_token_id = None  # let every token id count as an outcome
    prompt = [2, 3]
    V = target.vocab_size
    first = torch.softmax(full_logits(target, prompt)[-1].double(), -1)
    law = {}
    for a, b in itertools.product(range(V), repeat=2):
        law[(a, b)] = (first[a] * torch.softmax(full_logits(target, prompt + [a])[-1].double(), -1)[b]).item()
    samples = [
        tuple(generate(target, draft, prompt, method="spectr_gbv", num_drafts=3, draft_length=2, max_new_tokens=2,
                       seed=seed, with_theory=False).tokens)
        for seed in range(1200)
    ]
    assert chi_square_p_value(samples, law) > 1e-3


@contextlib.contextmanager
def one_torch_thread():
    """One torch thread for tiny models: they gain nothing from two, and on a busy machine the second
    thread's waits made their runs ten times slower."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def recording_fused_draft(model, feature_layers=(0, 1)):
    """(draft, handed): a fused feature-draft head (seed 0) on a tiny transformers `model`, and the list
    every feature tensor the engine hands its sessions is appended to, in order."""
    from spectr_gbv.models.feature_draft import FeatureDraftHead, FeatureDraftModel, FeatureDraftShape

    config = model.config
    torch.manual_seed(0)
    head = FeatureDraftHead(FeatureDraftShape.of_target(config, feature_layers=feature_layers))
    draft = FeatureDraftModel(head, model.get_input_embeddings().weight.detach(),
                              model.get_output_embeddings().weight.detach(), list(range(config.vocab_size)),
                              config.vocab_size, None, "tiny fused draft")
    handed, real_start = [], draft.start

    def recording_start(prompt_ids):
        session = real_start(prompt_ids)
        real_add = session.add_features
        session.add_features = lambda features: (handed.append(features.clone()), real_add(features))[1]
        return session

    draft.start = recording_start
    return draft, handed


def two_drafts(seed: int, vocab: int, support: int, length: int, parting: int | None) -> VerifyInput:
    """Two drafts from a draft law on `support` of `vocab` tokens, a target 60 % away from it (so
    that phase 2 stops often), identical up to depth `parting` and different there (None: equal)."""
    g = torch.Generator().manual_seed(seed)
    on = torch.randperm(vocab, generator=g)[:support].sort().values
    draft = torch.zeros(2, length, vocab, dtype=torch.float64)
    draft[..., on] = torch.softmax(2.0 * torch.randn(2, length, support, generator=g, dtype=torch.float64), -1)
    noise = torch.softmax(2.0 * torch.randn(2, length + 1, vocab, generator=g, dtype=torch.float64), -1)
    target = 0.6 * noise + 0.4 * torch.cat([draft, draft[:, -1:]], 1)
    tokens = torch.multinomial(draft.reshape(-1, vocab), 1, generator=g).reshape(2, length)
    if parting is None:
        tokens[1] = tokens[0]
    else:
        tokens[1, :parting] = tokens[0, :parting]
        if tokens[1, parting] == tokens[0, parting]:  # another token of the support
            place = int((on == tokens[0, parting]).nonzero()[0, 0])
            tokens[1, parting] = on[place - 1]
    return VerifyInput.build(tokens, draft, target)  # shared prefixes get draft 0's rows


def in_threads_switching_often(target, count: int) -> None:
    """`target(i)` for i in 0..count-1, each in a thread of its own, the interpreter switching threads as
    often as it allows (a race in shared state then shows in a few hundred rounds); returns when all end."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        sys.setswitchinterval(interval)
