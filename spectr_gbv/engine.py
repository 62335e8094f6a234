"""The decoding loop: draft -> score -> verify -> commit, for any model pair and any method.

Token ids in, token ids out; the engine knows nothing about tokenisation or frameworks
(models are reached only through `spectr_gbv.models.base`). One iteration:

1. the draft model proposes K i.i.d. blocks of L tokens, sampled from exactly the
   processed distributions p that are handed to the verifier (one batched draft call per
   position);
2. the target scores all K blocks in one call, giving q at L+1 positions per block;
3. the method's verifier picks tau accepted tokens of one draft and a correction or
   bonus token;
4. both models commit the emitted tokens (a cached model keeps the winning branch).

`ar` samples the target directly, one token per target call: the baseline that
block efficiency and speedup are measured against.

Randomness: two generators seeded from `seed`, one for drafting and one for
verification, so identical settings give identical tokens.
"""

from __future__ import annotations

import time
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import partial
from typing import Callable, Iterator, Sequence

import torch

from .config import DecodeConfig
from .methods import METHODS
from .methods.base import Prefetched, VerifyInput, VerifyResult, read_with_drafts, trusted_drafts
from .models.base import DecodeSession, LanguageModel
from .probs import logits_to_probs, token_probs
from .randomness import sample_rows
from .records import IterationRecord, IterationTimings, RunRecord, TopToken
from .replays import remembering

# How many of the final distribution's most likely tokens an iteration record keeps.
FINAL_TOP_TOKENS = 10


def _generator(device: torch.device, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def _seconds_since(start: float, device: torch.device) -> float:
    # Timings are taken at phase boundaries only; on CUDA that needs one synchronize.
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - start


def draft_blocks(
    session: DecodeSession, config: DecodeConfig, num_drafts: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """K i.i.d. blocks and the distributions they were sampled from: ([K, L], [K, L, V])."""
    tokens, probs = [], []
    logits = session.branch_logits(num_drafts)
    for position in range(config.draft_length):
        p = logits_to_probs(logits, config.temperature, config.top_k, config.top_p)  # [K, V]
        x = sample_rows(p, generator)  # [K], no host sync
        tokens.append(x)
        probs.append(p)
        if position + 1 < config.draft_length:
            logits = session.extend_branches(x)
    return torch.stack(tokens, dim=1), torch.stack(probs, dim=1)


def _final_top(result: VerifyResult, inp: VerifyInput) -> list[TopToken]:
    """The final distribution's likeliest tokens, then the drawn token and every draft's token at the
    stop position when they are not among them (a rejected draft token has no residual mass, and a
    chart of the stop position must still show what it replaced)."""
    row = result.winning_draft or 0
    target = inp.target_probs[row, result.final_position]
    draft = inp.draft_probs[row, result.final_position] if result.final_position < inp.draft_length else None
    k = min(FINAL_TOP_TOKENS, inp.vocab_size)
    ids = torch.topk(result.final_distribution, k).indices.tolist()
    drafted = inp.draft_tokens[:, result.final_position].tolist() if draft is not None else []
    for token in [int(result.final_token), *drafted]:
        if token not in ids:
            ids.append(token)
    index = torch.tensor(ids, device=result.final_distribution.device)
    finals, targets = result.final_distribution[index].tolist(), target[index.to(target.device)].tolist()
    drafts = draft[index.to(draft.device)].tolist() if draft is not None else [None] * len(ids)
    return [TopToken(*row_values) for row_values in zip(ids, finals, targets, drafts)]


def _emit(tokens: list[int], remaining: int, eos_token_id: int | None) -> tuple[list[int], bool]:
    """Cap an iteration's tokens at the remaining budget and cut after an end-of-sequence token."""
    tokens = tokens[:remaining]
    if eos_token_id is not None and eos_token_id in tokens:
        return tokens[: tokens.index(eos_token_id) + 1], True
    return tokens, False


@dataclass(frozen=True)
class Proposal:
    """One iteration's input to verification: K drafts, their distributions, the target's."""

    draft_tokens: torch.Tensor  # [K, L] on the target's device
    draft_probs: torch.Tensor  # [K, L, V]
    target_probs: torch.Tensor  # [K, L+1, V]
    draft_s: float
    target_s: float
    # Read with the drafts' tokens where a `prefetch` was given; draft_probs are then already the
    # canonical float64 rows of `trusted_drafts` (`lean_input`).
    prefetched: Prefetched | None = None

    def lean_input(self) -> VerifyInput:
        """The `VerifyInput` of the lean loop (trusted: the engine made these distributions)."""
        if self.prefetched is None:
            return VerifyInput.trusted(self.draft_tokens, self.draft_probs, self.target_probs)
        return VerifyInput.of_trusted_drafts(self.draft_tokens, self.draft_probs, self.target_probs, self.prefetched)


def propose(
    config: DecodeConfig,
    num_drafts: int,
    target: DecodeSession,
    draft: DecodeSession,
    generator: torch.Generator,
    target_device: torch.device,
    draft_device: torch.device,
    timed: bool = True,
    prefetch: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> Proposal:
    """Steps 1 and 2: draft K blocks, score them with one target call. `timed`: the two phases'
    seconds (on CUDA each a device sync); the lean loop takes none and records 0. `prefetch`:
    the rule's values from the drafts alone (`MethodSpec.prefetch`), read with the drafts' tokens
    that the target reads to build its trie, in one copy (`Proposal.prefetched`)."""
    start = time.perf_counter()
    draft_tokens, draft_probs = draft_blocks(draft, config, num_drafts, generator)
    draft_s = _seconds_since(start, draft_device) if timed else 0.0

    start = time.perf_counter()
    draft_tokens, draft_probs = draft_tokens.to(target_device), draft_probs.to(target_device)
    prefetched = None
    if prefetch is not None:
        draft_tokens, draft_probs = trusted_drafts(draft_tokens, draft_probs)
        prefetched = read_with_drafts(draft_tokens, prefetch(draft_tokens, draft_probs))
    target_logits = target.score(draft_tokens, None if prefetched is None else prefetched.rows)
    target_probs = logits_to_probs(target_logits, config.temperature, config.top_k, config.top_p)
    target_s = _seconds_since(start, target_device) if timed else 0.0
    return Proposal(draft_tokens, draft_probs, target_probs, draft_s, target_s, prefetched)


def speculative_iteration(
    index: int,
    config: DecodeConfig,
    target: DecodeSession,
    draft: DecodeSession,
    generators: tuple[torch.Generator, torch.Generator],
    target_device: torch.device,
    draft_device: torch.device,
) -> tuple[IterationRecord, VerifyResult]:
    spec = METHODS[config.method]
    proposal = propose(config, config.effective_num_drafts, target, draft, generators[0], target_device, draft_device)

    start = time.perf_counter()
    inp = VerifyInput.build(proposal.draft_tokens, proposal.draft_probs, proposal.target_probs)
    result = spec.verify(inp, spec.randomness(generators[1], inp.num_drafts, inp.draft_length, target_device))
    verify_s = _seconds_since(start, target_device)

    theory = spec.expected_accepted(inp) if (config.with_theory and spec.expected_accepted) else None
    record = IterationRecord(
        index=index,
        draft_tokens=inp.draft_tokens.tolist(),
        draft_token_probs=token_probs(inp.draft_probs, inp.draft_tokens).tolist(),
        target_token_probs=token_probs(inp.target_probs[:, :-1], inp.draft_tokens).tolist(),
        num_accepted=result.num_accepted,
        winning_draft=result.winning_draft,
        accepted_tokens=result.accepted_tokens,
        final_token=result.final_token,
        final_kind=result.final_kind,
        emitted=[],
        tests=result.tests,
        final_top=_final_top(result, inp),
        expected_accepted=theory,
        timings=IterationTimings(proposal.draft_s, proposal.target_s, verify_s),
    )
    return record, result


def autoregressive_iteration(
    index: int, config: DecodeConfig, target: DecodeSession, generator: torch.Generator, device: torch.device
) -> IterationRecord:
    start = time.perf_counter()
    probs = logits_to_probs(target.branch_logits(1), config.temperature, config.top_k, config.top_p)[0]
    token = int(sample_rows(probs[None], generator)[0])
    target_s = _seconds_since(start, device)
    k = min(FINAL_TOP_TOKENS, probs.shape[-1])
    top = torch.topk(probs, k)
    final_top = [TopToken(t, v, v, None) for t, v in zip(top.indices.tolist(), top.values.tolist())]
    return IterationRecord(
        index, [], [], [], 0, None, [], token, "target", [], final_top=final_top,
        timings=IterationTimings(target_s=target_s),
    )


def _check_context_fits(target: LanguageModel, draft: LanguageModel | None, prompt_length: int, config: DecodeConfig) -> None:
    """Models that know their context length (transformers) must fit prompt + output + one block."""
    needed = prompt_length + config.max_new_tokens + config.draft_length + 1
    for model in (target, draft):
        limit = getattr(model, "max_positions", None)
        if model is not None and limit and needed > limit:
            raise ValueError(
                f"prompt too long: {prompt_length} prompt tokens + max_new_tokens {config.max_new_tokens} "
                f"+ one draft block of {config.draft_length + 1} need {needed} positions, but "
                f"{getattr(model, 'name', 'the model')} has a context of {limit}"
            )


def _start_feature_feed(target, draft, target_session, draft_session, prompt_ids) -> None:
    """A feature-conditioned draft needs the target's features of the prompt before its first draft."""
    if not (hasattr(target_session, "prefill") and hasattr(target_session, "take_features")):
        raise ValueError(f"draft {getattr(draft, 'name', 'model')!r} reads the target's features, which target "
                         f"{getattr(target, 'name', 'model')!r} does not provide")
    if len(prompt_ids) < 2:
        raise ValueError("a feature-conditioned draft needs a prompt of at least two tokens")
    target_session.prefill(getattr(draft, "feature_layers", ()))
    draft_session.add_features(target_session.take_features())


class DecodeRun:
    """The state of one decoding run: validated settings, both sessions, the two generators,
    and the commit step (output cap, end of sequence, the features hand-off). The engine's
    own loop and the coupled comparison (`spectr_gbv.coupled`) both drive it, so there is
    one implementation of what happens between iterations."""

    def __init__(self, target: LanguageModel, draft: LanguageModel | None, prompt_ids: Sequence[int],
                 config: DecodeConfig, speculative: bool | None = None):
        if not prompt_ids:
            raise ValueError("prompt_ids is empty: give at least one token of context")
        speculative = not config.is_autoregressive if speculative is None else speculative
        if draft is None and speculative:
            raise ValueError(f"method {config.method!r} needs a draft model")
        if draft is not None and draft.vocab_size != target.vocab_size:
            raise ValueError(f"draft and target vocabularies differ ({draft.vocab_size} != {target.vocab_size})")
        _check_context_fits(target, draft, len(prompt_ids), config)
        self.target, self.draft, self.config = target, draft, config
        self.target_session = target.start(prompt_ids)
        self.draft_session = draft.start(prompt_ids) if draft is not None and speculative else None
        self.feed_features = self.draft_session is not None and getattr(draft, "needs_features", False)
        if self.feed_features:
            _start_feature_feed(target, draft, self.target_session, self.draft_session, prompt_ids)
        self.generators = (
            _generator(draft.device if self.draft_session else target.device, 2 * config.seed),
            _generator(target.device, 2 * config.seed + 1),
        )
        self.produced, self.index, self.finished = 0, 0, False

    @property
    def remaining(self) -> int:
        return 0 if self.finished else self.config.max_new_tokens - self.produced

    def propose(self, num_drafts: int, timed: bool = True,
                prefetch: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None) -> Proposal:
        return propose(self.config, num_drafts, self.target_session, self.draft_session, self.generators[0],
                       self.target.device, self.draft.device, timed, prefetch)

    def commit(self, branch: int, tokens: list[int], drafted: list[int] | None = None) -> list[int]:
        """Make an iteration's tokens context (capped, cut after EOS); returns those emitted.
        `drafted`: the branch's drafted block, when the caller has read it already."""
        emitted, at_eos = _emit(tokens, self.remaining, self.target.eos_token_id)
        self.target_session.commit(branch, emitted)
        if self.draft_session is not None:
            self.draft_session.commit(branch, emitted, drafted)
            if self.feed_features:  # the committed positions' features, from the scoring forward just run
                self.draft_session.add_features(self.target_session.take_features())
        self.produced += len(emitted)
        self.index += 1
        self.finished = at_eos or self.produced >= self.config.max_new_tokens
        return emitted


def laws_kept_by(target: LanguageModel):
    """Around one iteration's verification: remember node laws in the target's `node_laws` (a
    `replays.Recent` the app gives its teaching pairs, whose fixed tables repeat nodes across runs);
    nothing for a target without one."""
    laws = getattr(target, "node_laws", None)
    return nullcontext() if laws is None else remembering(laws)


def decode_iterations(
    target: LanguageModel, draft: LanguageModel | None, prompt_ids: Sequence[int], config: DecodeConfig
) -> Iterator[IterationRecord]:
    """Yield one record per target call as decoding proceeds (for streaming UIs). The run
    starts (and its settings are checked) on the first `next`."""
    yield from run_iterations(DecodeRun(target, draft, prompt_ids, config))


def run_iterations(run: DecodeRun) -> Iterator[IterationRecord]:
    """The detailed loop over a started run: every iteration's full record (drafts, tests,
    the final distribution's top tokens), what the explorer and the charts draw."""
    config, target, draft = run.config, run.target, run.draft
    while run.remaining > 0:
        if run.draft_session is None:
            record = autoregressive_iteration(run.index, config, run.target_session, run.generators[0], target.device)
            branch = 0
        else:
            with laws_kept_by(target):
                record, result = speculative_iteration(run.index, config, run.target_session, run.draft_session,
                                                       run.generators, target.device, draft.device)
            branch = result.winning_draft or 0
        emitted = run.commit(branch, [*record.accepted_tokens, record.final_token])
        yield replace(record, emitted=emitted)


# ----------------------------------------------------------------------------- the lean loop


@dataclass(frozen=True)
class LeanStep:
    """What the lean loop keeps of one target call: the tokens it emitted and tau."""

    emitted: list[int]
    num_accepted: int


def lean_iterations(
    target: LanguageModel, draft: LanguageModel | None, prompt_ids: Sequence[int], config: DecodeConfig
) -> Iterator[LeanStep]:
    """`decode_iterations` without the records: one `LeanStep` per target call."""
    yield from run_lean(DecodeRun(target, draft, prompt_ids, config))


def run_lean(run: DecodeRun) -> Iterator[LeanStep]:
    """The lean loop over a started run. Per iteration it reads the host once for the drafts
    (the target session builds its token trie from them) and once for the decision (winner,
    tau, final token and the winner's block, in one copy), for every method with a tensor
    `decide`; a method without one runs its `verify`, which reads as it goes. No record, no
    theory line, no copy of a distribution leaves the device."""
    config = run.config
    spec = None if run.draft_session is None else METHODS[config.method]
    while run.remaining > 0:
        if spec is None:
            probs = logits_to_probs(run.target_session.branch_logits(1), config.temperature, config.top_k, config.top_p)
            token = sample_rows(probs, run.generators[0]).tolist()  # the one read of a plain step
            yield LeanStep(run.commit(0, token), 0)
            continue
        K = config.effective_num_drafts
        if spec.decide is not None:
            proposal = run.propose(K, timed=False)  # no phase timings: on CUDA each is a sync
            winner, tau, final, *block = spec.decide(proposal.lean_input(), run.generators[1]).tolist()  # the decision, one read
            yield LeanStep(run.commit(winner, [*block[:tau], final], drafted=block), tau)
        else:
            rng = spec.randomness(run.generators[1], K, config.draft_length, run.target.device)
            prefetch = None if spec.prefetch is None else partial(spec.prefetch, rng=rng)
            proposal = run.propose(K, timed=False, prefetch=prefetch)
            with laws_kept_by(run.target):
                result = spec.verify(proposal.lean_input(), rng)
            branch = result.winning_draft or 0
            drafted = None if proposal.prefetched is None else proposal.prefetched.rows[branch]  # spares the draft's read
            yield LeanStep(run.commit(branch, result.tokens, drafted=drafted), result.num_accepted)


@dataclass(frozen=True)
class LeanRun:
    """The lean mode's result: the tokens, and each target call's accepted count."""

    config: DecodeConfig
    prompt_ids: list[int]
    tokens: list[int]
    accepted: list[int]  # tau per target call (0 for plain decoding)
    stopped_at_eos: bool

    @property
    def target_calls(self) -> int:
        return len(self.accepted)

    @property
    def block_efficiency(self) -> float:
        return len(self.tokens) / max(self.target_calls, 1)

    @property
    def mean_accepted(self) -> float:
        return sum(self.accepted) / max(self.target_calls, 1)


def generate(
    target: LanguageModel,
    draft: LanguageModel | None,
    prompt_ids: Sequence[int],
    method: str = "spectr_gbv",
    num_drafts: int = 4,
    draft_length: int = 4,
    temperature: float = 1.0,
    max_new_tokens: int = 32,
    seed: int = 0,
    top_k: int | None = None,
    top_p: float | None = None,
    with_theory: bool = True,
    on_iteration: Callable[[IterationRecord], None] | None = None,
    detail: bool = True,
) -> RunRecord | LeanRun:
    """Decode `max_new_tokens` tokens (fewer at end-of-sequence) with `method`; return the run record.

    `on_iteration`, if given, sees every iteration record as it is produced; raising from it
    stops the run (the app uses it for per-request time budgets).

    `detail=False` is the lean mode: a `LeanRun` (tokens, target calls, each iteration's tau)
    and no distributions, records or theory line; the same tokens for the same seed. It is
    the mode to time (`spectr_gbv.bench`).
    """
    config = DecodeConfig(
        method=method, num_drafts=num_drafts, draft_length=draft_length, temperature=temperature,
        top_k=top_k, top_p=top_p, max_new_tokens=max_new_tokens, seed=seed, with_theory=with_theory and detail,
    )
    if not detail:
        return generate_lean(target, draft, prompt_ids, config)
    return generate_config(target, draft, prompt_ids, config, on_iteration)


def generate_lean(target: LanguageModel, draft: LanguageModel | None, prompt_ids: Sequence[int],
                  config: DecodeConfig) -> LeanRun:
    """The lean mode for a ready DecodeConfig (see `generate`)."""
    tokens: list[int] = []
    accepted: list[int] = []
    for step in lean_iterations(target, draft, prompt_ids, config):
        tokens += step.emitted
        accepted.append(step.num_accepted)
    stopped = target.eos_token_id is not None and bool(tokens) and tokens[-1] == target.eos_token_id
    return LeanRun(config, list(prompt_ids), tokens, accepted, stopped)


def generate_config(
    target: LanguageModel,
    draft: LanguageModel | None,
    prompt_ids: Sequence[int],
    config: DecodeConfig,
    on_iteration: Callable[[IterationRecord], None] | None = None,
) -> RunRecord:
    """`generate` for a ready DecodeConfig (callers that vary one setting use `dataclasses.replace`)."""
    iterations = []
    for record in decode_iterations(target, draft, prompt_ids, config):
        iterations.append(record)
        if on_iteration is not None:
            on_iteration(record)
    return run_record(config, prompt_ids, iterations, target.eos_token_id)


def run_record(config: DecodeConfig, prompt_ids: Sequence[int], iterations: list[IterationRecord],
               eos_token_id: int | None) -> RunRecord:
    """The run record of the iterations decoded so far (a streaming caller builds partial ones)."""
    tokens = [t for it in iterations for t in it.emitted]
    stopped = eos_token_id is not None and bool(tokens) and tokens[-1] == eos_token_id
    return RunRecord(config, list(prompt_ids), tokens, iterations, stopped)
