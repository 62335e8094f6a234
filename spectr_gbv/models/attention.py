"""Grouped-query attention that does not copy the cache, for transformers models on the CPU.

SmolLM2-135M (the default target) has 9 query heads sharing 3 key/value heads. transformers'
SDPA path, given a mask (every scoring forward of a drafts' tree carries one) or under
torch.compile, first repeats each key/value head for its queries (`repeat_kv`): a copy of the
layer's whole cache on every forward. For the compiled one-token step that is all 1,024 slots
of the static cache, in each of 30 layers, for every token: more memory traffic than the
weights' own. SDPA can share the heads itself (`enable_gqa=True`); on the CPU its flash kernel
then gives the same numbers as on the repeated heads, bit for bit (tests/test_attention.py),
without the copy.

So `grouped_sdpa` is transformers' SDPA attention with one change: where transformers would
repeat the heads, it passes `enable_gqa` instead. A one-token eager step keeps transformers'
own path (it packs the query heads instead of copying; its numbers differ from enable_gqa's in
the last bits, and plain decoding's tokens stay what they were). It is registered under
transformers' attention interface (`AttentionInterface`, with the SDPA mask), the library's
own extension point, and switched on for models on the CPU only: on CUDA, SDPA with a mask and
`enable_gqa` falls back to its slowest kernel, which is why transformers repeats the heads there.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

NAME = "sdpa_grouped"


def grouped_sdpa(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                 attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                 is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' `sdpa_attention_forward`, with SDPA sharing the key/value heads where
    transformers would copy them (see the module's docstring)."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.utils.import_utils import is_torchdynamo_compiling

    q_length = query.shape[2]
    shared = query.shape[1] != key.shape[1]
    # transformers' own path: no heads to share, a one-token eager step (packed query heads, no
    # copy), or an input this function does not handle (a position bias, a paged cache, a softcap)
    if (not shared or (q_length == 1 and not is_torchdynamo_compiling())
            or any(kwargs.get(name) is not None for name in ("position_bias", "cache", "softcap"))):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    is_causal = q_length > 1 and attention_mask is None and is_causal  # as transformers decides it
    if is_causal and key.shape[2] > q_length:  # a prefill into an empty static cache: as transformers slices it
        key, value = key[:, :, :q_length], value[:, :, :q_length]
    out = F.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask, dropout_p=dropout, scale=scaling,
                                         is_causal=is_causal, enable_gqa=True)
    return out.transpose(1, 2).contiguous(), None


def use_grouped_sdpa(model: torch.nn.Module) -> bool:
    """Switch a transformers model that runs SDPA attention to `grouped_sdpa`; True if it did.
    Models on another attention implementation (eager, flash) are left as they are."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    if getattr(model.config, "_attn_implementation", None) != "sdpa":
        return False
    AttentionInterface.register(NAME, grouped_sdpa)
    AttentionMaskInterface.register(NAME, sdpa_mask)  # the same masks as SDPA
    model.set_attn_implementation(NAME)
    return True
