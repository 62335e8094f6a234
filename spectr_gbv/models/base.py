"""The small interface between the decoding engine and any language model.

The engine never sees a framework object. A `LanguageModel` starts a `DecodeSession` on a
prompt; the session tracks the committed context and up to K parallel branches:

* drafting: `branch_logits(K)` gives the next-token logits after the committed context,
  replicated on K branches; `extend_branches(tokens)` appends one token to every branch and
  gives the logits after it (one batched forward per draft position);
* scoring: `score(blocks)` gives, for each of K blocks, the logits after the context and
  after every prefix of the block: [K, n+1, V] (one batched forward per iteration);
* `commit(branch, tokens)`: the iteration's emitted tokens become context. The first tau
  of them are the accepted prefix of `branch`; a cached implementation keeps that branch's
  state cropped to them and feeds the rest (the correction/bonus token) next time.

"Logits" are unnormalised log-probabilities; the engine turns them into the processed
distributions (temperature, top-k, top-p) that are both sampled and verified.

Optional capability, features (feature-conditioned drafts, the EAGLE family): a draft model
with `needs_features = True` reads the target's last hidden state of every committed
position. Its session has `add_features(features [m, H])`; the target's session then needs
`prefill()` (feed the prompt but its last token, so the first draft has features) and
`take_features()` (the features of the positions committed since the last call, taken from
the forwards it ran anyway). The engine hands them over after every commit, checking for
these methods with hasattr; ordinary drafts (`needs_features` absent or False) never see any
of this.
"""

from __future__ import annotations

from typing import Protocol, Sequence

import torch


class DecodeSession(Protocol):
    forward_calls: int  # model forwards so far (prefill included)

    def branch_logits(self, num_branches: int) -> torch.Tensor:  # [K, V]
        ...

    def extend_branches(self, tokens: torch.Tensor) -> torch.Tensor:  # tokens [K] -> [K, V]
        ...

    def score(self, blocks: torch.Tensor, rows: list[list[int]] | None = None) -> torch.Tensor:
        # blocks [K, n] -> [K, n+1, V]; rows: the same blocks on the host, where the caller read them
        ...

    def commit(self, branch: int, tokens: Sequence[int], drafted: Sequence[int] | None = None) -> None:
        # drafted: the branch's drafted tokens when the caller already holds them on the host
        # (a session that fed them then need not read them back)
        ...


class LanguageModel(Protocol):
    vocab_size: int
    eos_token_id: int | None
    device: torch.device

    def start(self, prompt_ids: Sequence[int]) -> DecodeSession:
        ...
