"""A target session whose KV cache is preallocated, so its forwards can run compiled.

`StaticHFSession` is an `HFSession` over transformers' `StaticCache` (one row of `capacity`
tokens, lent by the target's `compiled.CompiledStep`): entries are written at the cache's
current length, and dropping entries (a rejected branch) only moves that length back, since
the attention mask hides every slot past it. A one-token forward with no mask (plain decoding's
step) runs the compiled step. The drafts' tree score runs the compiled scoring forward of the
smallest ready width bucket that holds it, padded (`compiled_scoring`); a tree wider than every
ready bucket, or too wide for the cache's free slots, is scored eagerly, and asks for its bucket
to be compiled in the background for later sessions. A prompt runs eagerly over the same cache.
The session reads the ready buckets once, when it starts, and keeps them.

A session that would outgrow the cache, or is asked for several rows (a draft's branches),
copies its entries into a DynamicCache and goes on as an eager `HFSession`: slower, never wrong.
"""

from __future__ import annotations

from typing import Callable

import torch

from ..trie import ScoringLayout
from .compiled import eager_step
from .compiled_scoring import bucket_for, eager_scorer, padded_score
from .hf_session import HFModel, HFSession


class StaticHFSession(HFSession):
    def __init__(self, model: HFModel, prompt_ids: list[int], switch, step: Callable):
        super().__init__(model, prompt_ids)
        self.cache = switch.lend_cache(self)
        self.capacity = switch.capacity
        self.switch = switch
        self.step = step
        self.scorers = switch.scoring.ready  # read once: the buckets ready now serve this session to its end
        self.static = True

    def _length(self) -> int:
        """Entries in the cache now: the committed ones and the tokens fed since (no device read)."""
        return self.cached + (self.branch_tokens.shape[1] if self.branch_tokens is not None else 0)

    def _to_dynamic(self) -> None:
        """Go on eagerly over a DynamicCache holding the same entries."""
        from transformers import DynamicCache

        length = self._length()
        dynamic = DynamicCache(config=self.model.model.config)
        for index, layer in enumerate(self.cache.layers):
            if layer.is_initialized and length:
                dynamic.update(layer.keys[:, :, :length].clone(), layer.values[:, :, :length].clone(), index)
        self.cache = dynamic
        self.static = False

    def _make_room(self, tokens: int) -> None:
        if self.static and self._length() + tokens > self.capacity:
            self._to_dynamic()

    def _hidden(self, input_ids: torch.Tensor, **kwargs) -> torch.Tensor:
        self._make_room(input_ids.shape[1])
        if self.static and tuple(input_ids.shape) == (1, 1) and not kwargs and not self.collect_features:
            self.forward_calls += 1
            return self._step(input_ids)
        return super()._hidden(input_ids, **kwargs)

    def _step(self, input_ids: torch.Tensor) -> torch.Tensor:
        """The compiled step; if it raises (it passed the check, but a run is not the check), the
        target goes eager and this step is taken again eagerly from the same cache length."""
        try:
            return self.step(input_ids, self.cache)
        except Exception as error:  # noqa: BLE001 - never a failed request for a compiler's fault
            self.switch.give_up(error)
            self._rewind(self._length())
            self.step = eager_step(self.model.model.base_model)
            return self.step(input_ids, self.cache)

    def _rewind(self, length: int) -> None:
        """Every layer's cache length back to `length` (a failed step may have written some)."""
        with torch.inference_mode():
            for layer in self.cache.layers:
                if layer.is_initialized:
                    layer.cumulative_length.fill_(length)

    def score(self, blocks: torch.Tensor, rows: list[list[int]] | None = None) -> torch.Tensor:
        # before the mask is built: its width is the cache's
        self._make_room(len(self.pending) + blocks.numel())
        return super().score(blocks, rows)

    def _score_hidden(self, ids: torch.Tensor, layout: ScoringLayout, past: int) -> torch.Tensor:
        layers = self.feature_layers if self.collect_features else ()
        width = ids.shape[1]
        wanted = bucket_for(width)
        if not self.static or wanted is None:
            return super()._score_hidden(ids, layout, past)
        if (wanted, layers) not in self.scorers:
            self.switch.scoring.want((wanted, layers))  # compiled in the background for later sessions
        fits = [bucket for bucket, key_layers in self.scorers
                if key_layers == layers and width <= bucket and past + bucket <= self.capacity]
        if not fits:
            return super()._score_hidden(ids, layout, past)
        bucket = min(fits)
        positions = (past + layout.offsets)[None]
        self.forward_calls += 1
        try:
            hidden, features = padded_score(self.scorers[bucket, layers], self.cache, ids, positions,
                                            layout.recent_mask, past, bucket)
        except Exception as error:  # noqa: BLE001 - never a failed request for a compiler's fault
            self.switch.scoring.give_up((bucket, layers), error)
            self._rewind(past)
            self.scorers = {key: scorer for key, scorer in self.scorers.items() if key != (bucket, layers)}
            hidden, features = padded_score(eager_scorer(self.model.model.base_model, layers), self.cache, ids,
                                            positions, layout.recent_mask, past, width)
        if self.collect_features:
            self.last_features = features
        return hidden

    def _expand(self, rows: int) -> None:
        if rows > 1 and self.static:
            self._to_dynamic()
        super()._expand(rows)

    def _crop(self, tokens: int) -> None:
        if not self.static:
            return super()._crop(tokens)
        with torch.inference_mode():  # the cache's tensors were made under it
            for layer in self.cache.layers:
                if layer.is_initialized:
                    layer.cumulative_length.sub_(tokens)  # the slots past it are masked until overwritten

    def _select_branch(self, branch: int) -> None:
        if self.static:
            return  # one row: nothing to select
        super()._select_branch(branch)

    def _key_width(self, used: int) -> int:
        return self.capacity if self.static else used
