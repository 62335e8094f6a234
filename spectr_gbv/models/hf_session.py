"""The engine's session interface over a loaded transformers model, with KV caches.

Decoding (`HFSession`): the prompt is prefilled once; the cache holds the committed
context. Drafting expands it to K rows and feeds one token per row per step; scoring
feeds the pending token(s) and the drafts' distinct prefixes (their trie) in one row with a
tree attention mask. `commit` keeps the accepted prefix and leaves the correction/bonus
token pending for the next forward. The whole prefix is never re-encoded.

Loading lives in `spectr_gbv.models.hf`, which re-exports `HFModel`, `HFSession` and `LoadedModel`.
transformers is imported only when a session starts (its `DynamicCache`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import torch

from ..probs import restricted_head_logits
from ..trie import DraftTrie, ScoringLayout
from .cpu_kernel import output_weight
from .feature_draft import target_features


@dataclass
class LoadedModel:
    name: str
    model: "torch.nn.Module"
    tokenizer: object
    output_token_ids: list[int] | None = None  # restricted output head, if the folder has one
    kernel: object | None = None  # the default target's cpu_kernel.KernelChoice on a CPU


class HFModel:
    """A loaded causal LM as the engine's `LanguageModel`."""

    def __init__(self, loaded: LoadedModel, vocab_size: int | None = None):
        self.loaded = loaded
        self.name = loaded.name
        self.model = loaded.model
        self.tokenizer = loaded.tokenizer
        self.vocab_size = vocab_size or len(loaded.tokenizer)
        self.eos_token_id = loaded.tokenizer.eos_token_id
        self.device = next(loaded.model.parameters()).device
        self.compiled = None  # a `compiled.CompiledStep` once the target's step is being compiled (`compiled.attach`)
        self.max_positions = getattr(loaded.model.config, "max_position_embeddings", None)
        self.output_token_ids = None
        if loaded.output_token_ids is not None:
            # Only these rows of the head are computed; the other logits are -inf.
            self.output_token_ids = torch.tensor(loaded.output_token_ids, dtype=torch.long, device=self.device)
            self.output_head = output_weight(loaded.model)[self.output_token_ids].contiguous()

    def start(self, prompt_ids: Sequence[int]) -> "HFSession":
        # The step is read once: the session keeps the mode it starts in (a switch never lands mid-run).
        step = self.compiled.step if self.compiled is not None else None
        if step is not None:
            from .static_session import StaticHFSession

            return StaticHFSession(self, list(prompt_ids), self.compiled, step)
        return HFSession(self, list(prompt_ids))


def _cached_prefix(fed: list[int], tokens: list[int]) -> int:
    """How many of the emitted tokens the row already holds in its cache: their longest common
    prefix, but always leaving one token pending (the next forward needs an input)."""
    keep = 0
    while keep < min(len(fed), len(tokens) - 1) and fed[keep] == tokens[keep]:
        keep += 1
    return keep


class HFSession:
    """One sequence being decoded, with a DynamicCache.

    As a draft: up to K parallel branches (the cache is expanded to K rows while drafting).
    As a target: `score` feeds the pending tokens and the drafts' trie in ONE row with a tree
    attention mask, so each distinct prefix is scored once and the committed cache is never
    copied K-fold; `commit` moves the accepted path's entries into place and crops the rest.
    For a feature-conditioned draft, `prefill` and `take_features` hand over the target's last
    hidden states of the committed positions, from forwards that run anyway.
    """

    def __init__(self, model: HFModel, prompt_ids: list[int]):
        from transformers import DynamicCache

        self.model = model
        self.cache = DynamicCache(config=model.model.config)
        self.cached = 0  # tokens of committed context held in the cache (one row between iterations)
        self.pending = list(prompt_ids)  # committed tokens not fed yet
        # Tokens fed after the pending ones, per row, kept on the device (no host sync while
        # drafting); read back once, at commit.
        self.branch_tokens: torch.Tensor | None = None  # [K, n]
        self.trie: DraftTrie | None = None  # the drafts scored by the last `score`
        self.fed_pending = 0  # pending tokens the last `score` fed before the trie
        self.collect_features = False  # set by `prefill`: a feature-conditioned draft reads them
        self.feature_layers: tuple[int, ...] = ()  # the layers whose outputs it fuses (empty: the final norm's)
        self.last_features: torch.Tensor | None = None  # [rows, n, F] of the last forward, when collecting
        self.fed_features: torch.Tensor | None = None  # [n, H]: features of the last scoring forward
        self.features: list[torch.Tensor] = []  # features of committed positions not taken yet
        self.forward_calls = 0

    def _hidden(self, input_ids: torch.Tensor, **kwargs) -> torch.Tensor:
        """The base model's last hidden states [rows, n, H] (after the final norm: what the head reads).

        When collecting features for a draft that fuses layers (EAGLE-3), the same forward also
        keeps those layers' outputs, concatenated, in `last_features`; else the final norm's."""
        self.forward_calls += 1
        base = self.model.model.base_model
        fused = self.collect_features and bool(self.feature_layers)
        out = base(input_ids=input_ids, past_key_values=self.cache, use_cache=True, output_hidden_states=fused or None,
                   **kwargs)
        if self.collect_features:
            self.last_features = target_features(out, self.feature_layers)
        return out.last_hidden_state

    def _head(self, hidden: torch.Tensor) -> torch.Tensor:
        """Logits over the shared vocabulary for the given rows only (the head is the costliest
        layer of a small model); a restricted head computes its rows and leaves -inf elsewhere."""
        model = self.model
        if model.output_token_ids is None:
            return model.model.get_output_embeddings()(hidden)[..., : model.vocab_size].float()
        return restricted_head_logits(hidden, model.output_head, model.output_token_ids, model.vocab_size)

    @torch.inference_mode()
    def _forward(self, input_ids: torch.Tensor, keep: int = 1) -> torch.Tensor:
        """Feed input_ids [K, n]; logits of the last `keep` positions only, [K, keep, V]."""
        return self._head(self._hidden(input_ids)[:, -keep:])

    def _ids(self, rows: list[list[int]]) -> torch.Tensor:
        return torch.tensor(rows, dtype=torch.long, device=self.model.device)

    def _expand(self, rows: int) -> None:
        if rows > 1:
            self.cache.batch_repeat_interleave(rows)

    def _crop(self, tokens: int) -> None:
        """Drop the cache's last `tokens` entries."""
        self.cache.crop(-tokens)  # transformers crops by a count of tokens to remove

    def _select_branch(self, branch: int) -> None:
        """Keep one row of the cache."""
        self.cache.batch_select_indices(torch.tensor([branch], device=self.model.device))

    def _key_width(self, used: int) -> int:
        """The width of a forward's attention mask when the cache will hold `used` entries."""
        return used

    @torch.inference_mode()
    def prefill(self, feature_layers: tuple[int, ...] = ()) -> None:
        """Feed all pending tokens but the last (a forward needs one input to give logits), keeping
        their features: a feature-conditioned draft needs them before its first draft.
        `feature_layers`: the target layers whose outputs the draft fuses (empty: the final norm's)."""
        self.collect_features = True
        self.feature_layers = tuple(feature_layers)
        if len(self.pending) > 1:
            self._hidden(self._ids([self.pending[:-1]]))
            self.features.append(self.last_features[0])
            self.cached += len(self.pending) - 1
            self.pending = self.pending[-1:]

    def take_features(self) -> torch.Tensor:
        """[m, H]: the features of the positions committed since the last call, in order."""
        width = self.model.model.config.hidden_size * max(len(self.feature_layers), 1)
        taken = torch.cat(self.features) if self.features else torch.empty(0, width)
        self.features = []
        return taken

    def branch_logits(self, num_branches: int) -> torch.Tensor:
        logits = self._forward(self._ids([self.pending]))[:, -1]  # [1, V]
        self.cached += len(self.pending)
        self.pending = []
        self._expand(num_branches)
        self.branch_tokens = torch.empty(num_branches, 0, dtype=torch.long, device=self.model.device)
        return logits.expand(num_branches, -1)

    def extend_branches(self, tokens: torch.Tensor) -> torch.Tensor:
        column = tokens.reshape(-1, 1).to(self.model.device)
        self.branch_tokens = torch.cat([self.branch_tokens, column], dim=1)
        return self._forward(column)[:, -1]

    @torch.inference_mode()
    def score(self, blocks: torch.Tensor, rows: list[list[int]] | None = None) -> torch.Tensor:
        """[K, L] drafts -> [K, L + 1, V] logits: q after the context and after every block prefix,
        from one forward over the pending tokens and the drafts' distinct prefixes. `rows`: the
        same drafts already on the host (the engine read them with other values), else read here."""
        trie = DraftTrie.of_blocks(blocks.tolist() if rows is None else rows)
        m, past = len(self.pending), self.cached
        device = self.model.device
        layout = ScoringLayout.of(trie, m, self.model.model.dtype, device)  # built once per trie shape
        ids = torch.tensor([self.pending + trie.tokens], dtype=torch.long, device=device)
        hidden = self._score_hidden(ids, layout, past)[0]
        logits = self._head(hidden[m - 1 :])  # root (q after the context), then one row per node
        self.fed_features = self.last_features[0] if self.collect_features else None
        self.fed_pending = m
        self.cached += m
        self.pending = []
        self.trie = trie
        return logits[layout.rows]

    def _score_hidden(self, ids: torch.Tensor, layout: ScoringLayout, past: int) -> torch.Tensor:
        """The scoring forward of `ids` [1, n] after `past` cached entries: hidden states [1, n, H]."""
        positions = (past + layout.offsets)[None]
        mask = layout.attention_mask(past, self._key_width(past + ids.shape[1]))[None, None]  # a static cache: its width
        return self._hidden(ids, attention_mask=mask, position_ids=positions)

    @torch.inference_mode()  # the cache's tensors are inference tensors: moved in place
    def _commit_trie(self, branch: int, tokens: list[int]) -> list[int]:
        trie, base = self.trie, self.cached
        path = trie.node_of[branch]
        keep = _cached_prefix([trie.tokens[node] for node in path], tokens)
        nodes = path[:keep]
        if nodes != list(range(keep)):  # move the path's entries to the front of the trie's slots
            source = torch.tensor([base + i for i in nodes], device=self.model.device)
            for layer in self.cache.layers:
                layer.keys[:, :, base : base + keep] = layer.keys[:, :, source]
                layer.values[:, :, base : base + keep] = layer.values[:, :, source]
        if trie.size > keep:
            self._crop(trie.size - keep)
        if self.fed_features is not None:
            rows = list(range(self.fed_pending)) + [self.fed_pending + i for i in nodes]
            self.features.append(self.fed_features[rows])
        self.fed_features = None
        self.cached += keep
        self.trie = None
        return tokens[keep:]

    def commit(self, branch: int, tokens: Sequence[int], drafted: Sequence[int] | None = None) -> None:
        tokens = list(tokens)
        if self.trie is not None:
            tokens = self._commit_trie(branch, tokens)
        elif self.branch_tokens is not None:
            fed_count = self.branch_tokens.shape[1]  # plain decoding fed none
            if drafted is not None:  # the caller read the block already: no second read
                fed = list(drafted[:fed_count])
            else:
                fed = self.branch_tokens[branch].tolist() if fed_count else []
            keep = _cached_prefix(fed, tokens)
            self._select_branch(branch)
            surplus = len(fed) - keep
            if surplus > 0:
                self._crop(surplus)
            self.cached += keep
            tokens = tokens[keep:]
        self.pending += tokens
        self.branch_tokens = None
