"""Paged attention in plain PyTorch float32: the fast CPU path of :func:`kvlab.attention`.

The same math as the float64 oracle (:mod:`kvlab.reference.attention`) — causal, grouped-query,
sliding window, softcap, K/V read through the block table and dequantized as ``code × scale`` — but
computed in float32 with ``torch.nn.functional.scaled_dot_product_attention``, so that a whole
language model can run through the paged cache on a CPU in seconds. Its result is checked against
the float64 oracle in the tests (relative error ~1e-6); it is a backend, not a second reference.

Per sequence, queries are processed in chunks and each chunk only reads the keys it can see (up to
its last query position, and back to the window start of its first query), so a causal prefill
costs about half of a full score matrix.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from kvlab.cache.batch import AttentionBatch
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.reference.attention import check_attention_options, check_paged_inputs

#: Query rows per SDPA call; bounds the float32 score matrix to ``num_q_heads × 512 × seq_len``.
_QUERY_CHUNK = 512


def _scores_softcapped(q, k, v, mask, scale, softcap, group):
    """``softmax(c·tanh(S/c))·V`` written out (SDPA has no softcap); ``q [H, Q, D]``, ``k/v [Hkv, S, D]``."""
    k = k.repeat_interleave(group, dim=0)
    v = v.repeat_interleave(group, dim=0)
    s = torch.matmul(q, k.transpose(1, 2)) * scale
    s = softcap * torch.tanh(s / softcap)
    s = s.masked_fill(~mask, float("-inf"))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def paged_attention_torch(
    query: torch.Tensor,
    cache: PagedKVCache,
    batch: AttentionBatch,
    *,
    scale: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
) -> torch.Tensor:
    """Float32 paged attention (arguments as :func:`kvlab.reference.paged_attention_reference`).

    Returns:
        ``[num_tokens, num_q_heads, head_size_v]`` in the query dtype (float32 math inside).
    """
    check_paged_inputs(query, cache, batch)
    hq, hkv = query.shape[1], cache.num_kv_heads
    check_attention_options(hq, hkv, sliding_window, softcap)
    group = hq // hkv
    if scale is None:
        scale = cache.head_size**-0.5
    out = torch.empty(query.shape[0], hq, cache.head_size_v, dtype=query.dtype, device=query.device)
    starts = batch.query_start_loc.tolist()
    for i, n in enumerate(batch.seq_lens_list):
        lo_q, hi_q = starts[i], starts[i + 1]
        if hi_q == lo_q:
            continue
        k_all, v_all = cache.gather(batch.block_table[i], n, torch.float32)
        context = n - (hi_q - lo_q)
        q_seq = query[lo_q:hi_q].to(torch.float32).transpose(0, 1)  # [Hq, Q, D]
        for lo in range(0, hi_q - lo_q, _QUERY_CHUNK):
            hi = min(lo + _QUERY_CHUNK, hi_q - lo_q)
            first, last = context + lo, context + hi - 1  # absolute positions of the chunk's queries
            k_lo = 0 if sliding_window is None else max(0, first - sliding_window + 1)
            k = k_all[k_lo : last + 1].transpose(0, 1)  # [Hkv, S', D]
            v = v_all[k_lo : last + 1].transpose(0, 1)
            q_pos = torch.arange(first, last + 1, device=query.device)
            k_pos = torch.arange(k_lo, last + 1, device=query.device)
            dist = q_pos[:, None] - k_pos[None, :]
            mask = dist >= 0
            if sliding_window is not None:
                mask &= dist < sliding_window
            q = q_seq[:, lo:hi]
            if softcap is None:
                # 4-D inputs and an additive float mask reach PyTorch's fused CPU kernel
                bias = torch.zeros(mask.shape, device=query.device).masked_fill_(~mask, float("-inf"))
                res = F.scaled_dot_product_attention(
                    q[None], k[None], v[None], attn_mask=bias, scale=scale, enable_gqa=group > 1
                )[0]
            else:
                res = _scores_softcapped(q, k, v, mask, scale, softcap, group)
            out[lo_q + lo : lo_q + hi] = res.transpose(0, 1).to(query.dtype)
    return out
