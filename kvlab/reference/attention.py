"""Reference attention in float64: the oracle every kernel in kvlab is checked against.

Two entry points share one piece of math:

* :func:`paged_attention_reference` reads K and V from a :class:`~kvlab.cache.PagedKVCache`,
  dequantized exactly (``code × scale`` in float64), through the block table;
* :func:`reference_attention` takes K and V directly, one tensor per sequence — given the original,
  unquantized K/V it is the *truth*, so ``error(paged reference, truth)`` is the quantization error
  alone and ``error(kernel, paged reference)`` is the kernel's own arithmetic.

The math, for a query token at absolute position ``p`` of a sequence, query head ``h`` and its KV head
``g = h // (num_q_heads / num_kv_heads)`` (grouped-query attention)::

    S_j = scale · q_h · k_{g,j}                    for keys j with j <= p (causal)
                                                   and p − j < W (sliding window, vLLM's convention)
    S_j = c · tanh(S_j / c)                        optional logit softcap c
    out = Σ_j softmax(S)_j · v_{g,j}

Everything runs in float64 on the device of the inputs, in query chunks so long prefills stay small.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from kvlab.cache.batch import AttentionBatch
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.validation import require_float, require_positive_finite, require_rank

#: Query rows processed at once per sequence; bounds the float64 score matrix to
#: ``num_q_heads × 256 × seq_len`` values.
_QUERY_CHUNK = 256


def check_attention_options(
    num_q_heads: int, num_kv_heads: int, sliding_window: int | None, softcap: float | None
) -> None:
    """Validate GQA head counts, window and softcap (shared by the reference and the kernels)."""
    if num_q_heads % num_kv_heads != 0:
        raise ValueError(
            f"num_q_heads ({num_q_heads}) must be a multiple of num_kv_heads ({num_kv_heads}) "
            "for grouped-query attention"
        )
    if sliding_window is not None and (isinstance(sliding_window, bool) or not isinstance(sliding_window, int)
                                       or sliding_window < 1):
        raise ValueError(f"sliding_window must be None or an integer >= 1 (tokens), got {sliding_window!r}")
    # c = inf would compute inf * tanh(S / inf) = inf * 0 = NaN; "no cap" is spelled None
    if softcap is not None and (
        isinstance(softcap, bool) or not isinstance(softcap, (int, float)) or not 0 < softcap < math.inf
    ):
        raise ValueError(f"softcap must be None (no cap) or a finite number > 0, got {softcap!r}")


def check_softmax_scale(scale: float | None) -> None:
    """Validate a softmax scale: ``None`` (``1 / sqrt(head_size)``) or a finite number > 0."""
    if scale is not None:
        require_positive_finite(scale, "scale", "multiplies q.k; None for 1/sqrt(head_size)")


def _attend_one_sequence(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    context_len: int,
    scale: float,
    sliding_window: int | None,
    softcap: float | None,
) -> torch.Tensor:
    """``q [Q, Hq, D]``, ``k [S, Hkv, D]``, ``v [S, Hkv, Dv]`` (float64) → ``[Q, Hq, Dv]``."""
    num_q, hq, _ = q.shape
    seq_len, hkv, dv = v.shape
    group = hq // hkv
    out = torch.empty(num_q, hq, dv, dtype=torch.float64, device=q.device)
    keys = k.permute(1, 0, 2)  # [Hkv, S, D]
    vals = v.permute(1, 0, 2)  # [Hkv, S, Dv]
    key_pos = torch.arange(seq_len, device=q.device)
    for lo in range(0, num_q, _QUERY_CHUNK):
        hi = min(lo + _QUERY_CHUNK, num_q)
        qc = q[lo:hi].reshape(hi - lo, hkv, group, -1).permute(1, 2, 0, 3)  # [Hkv, G, Qc, D]
        scores = torch.einsum("hgqd,hsd->hgqs", qc, keys) * scale
        if softcap is not None:
            scores = softcap * torch.tanh(scores / softcap)
        q_pos = context_len + torch.arange(lo, hi, device=q.device)
        distance = q_pos[:, None] - key_pos[None, :]  # p - j
        allowed = distance >= 0
        if sliding_window is not None:
            allowed &= distance < sliding_window
        scores = scores.masked_fill(~allowed, float("-inf"))
        probs = torch.softmax(scores, dim=-1)
        res = torch.einsum("hgqs,hsd->hgqd", probs, vals)  # [Hkv, G, Qc, Dv]
        out[lo:hi] = res.permute(2, 0, 1, 3).reshape(hi - lo, hq, dv)
    return out


def reference_attention(
    query: torch.Tensor,
    keys: Sequence[torch.Tensor],
    values: Sequence[torch.Tensor],
    batch: AttentionBatch,
    *,
    scale: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
) -> torch.Tensor:
    """Causal (optionally windowed, soft-capped) GQA attention in float64 on given K/V.

    Args:
        query: ``[num_tokens, num_q_heads, head_size]`` new tokens of all sequences, packed.
        keys: per sequence ``[seq_len_i, num_kv_heads, head_size]`` (all of its tokens).
        values: per sequence ``[seq_len_i, num_kv_heads, head_size_v]``.
        batch: query offsets and sequence lengths (its block table is not used).
        scale: softmax scale, default ``1 / sqrt(head_size)``.
        sliding_window: ``W`` tokens — a query at position ``p`` sees keys ``j`` with ``p − j < W``.
        softcap: logit softcap ``c`` (scores become ``c · tanh(S / c)``).

    Returns:
        ``[num_tokens, num_q_heads, head_size_v]`` float64.
    """
    require_rank(query, 3, "query", "[num_tokens, num_q_heads, head_size]")
    require_float(query, "query")
    if query.shape[0] != batch.num_tokens:
        raise ValueError(
            f"query has {query.shape[0]} rows but the batch has {batch.num_tokens} new tokens "
            "(query_start_loc[-1])"
        )
    if len(keys) != batch.num_seqs or len(values) != batch.num_seqs:
        raise ValueError(f"keys and values must hold one tensor per sequence ({batch.num_seqs})")
    head_size = query.shape[2]
    num_kv_heads = keys[0].shape[1] if batch.num_seqs else 1
    check_attention_options(query.shape[1], num_kv_heads, sliding_window, softcap)
    check_softmax_scale(scale)
    if scale is None:
        scale = head_size**-0.5
    starts = batch.query_start_loc.tolist()
    seq_lens = batch.seq_lens_list
    head_size_v = values[0].shape[2] if batch.num_seqs else head_size
    out = torch.empty(query.shape[0], query.shape[1], head_size_v, dtype=torch.float64, device=query.device)
    for i, (k, v) in enumerate(zip(keys, values, strict=True)):
        if k.dim() != 3 or k.shape[1] != num_kv_heads or k.shape[2] != head_size:
            raise ValueError(
                f"keys[{i}] must be [seq_len, {num_kv_heads}, {head_size}], got {tuple(k.shape)}"
            )
        if v.dim() != 3 or v.shape[1] != num_kv_heads:
            raise ValueError(
                f"values[{i}] must be [seq_len, {num_kv_heads}, head_size_v] (as many heads as keys), "
                f"got {tuple(v.shape)}"
            )
        if k.shape[0] < seq_lens[i] or v.shape[0] < seq_lens[i]:
            raise ValueError(f"keys[{i}]/values[{i}] hold fewer than seq_lens[{i}] = {seq_lens[i]} tokens")
        lo, hi = starts[i], starts[i + 1]
        if hi == lo:
            continue
        n = seq_lens[i]
        out[lo:hi] = _attend_one_sequence(
            query[lo:hi].to(torch.float64),
            k[:n].to(torch.float64),
            v[:n].to(torch.float64),
            n - (hi - lo),
            scale,
            sliding_window,
            softcap,
        )
    return out


def prefix_attention(
    query: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    context_lens: Sequence[int],
    *,
    num_queries: int,
    scale: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
) -> list[torch.Tensor]:
    """Float64 attention at the end of several prefixes of one sequence.

    For each context length ``c``, the tokens ``c − num_queries … c − 1`` attend causally to the keys
    ``0 … c − 1``: what :func:`reference_attention` computes for a batch of one sequence with
    ``seq_len = c`` and ``num_queries`` new tokens, with the checks and conversions done once for all
    the prefixes instead of once each (the math is the same function, so the outputs are equal).

    Args:
        query: ``[tokens, num_q_heads, head_size]`` queries of the whole sequence.
        keys: ``[tokens, num_kv_heads, head_size]``; values ``[tokens, num_kv_heads, head_size_v]``.
        context_lens: context lengths in tokens, each within ``[num_queries, tokens]``.
        num_queries: query tokens at the end of each context (1 = a decode step).
        scale, sliding_window, softcap: as :func:`reference_attention`.

    Returns:
        One ``[num_queries, num_q_heads, head_size_v]`` float64 tensor per context length.
    """
    require_rank(query, 3, "query", "[tokens, num_q_heads, head_size]")
    require_float(query, "query")
    require_rank(keys, 3, "keys", "[tokens, num_kv_heads, head_size]")
    require_rank(values, 3, "values", "[tokens, num_kv_heads, head_size_v]")
    n, num_kv_heads, head_size = keys.shape
    if head_size != query.shape[2] or values.shape[:2] != keys.shape[:2] or query.shape[0] < n:
        raise ValueError(
            f"keys must be [tokens, num_kv_heads, {query.shape[2]}], values hold as many tokens and heads, "
            f"and query at least as many tokens; got query {tuple(query.shape)}, keys {tuple(keys.shape)}, "
            f"values {tuple(values.shape)}"
        )
    check_attention_options(query.shape[1], num_kv_heads, sliding_window, softcap)
    check_softmax_scale(scale)
    if isinstance(num_queries, bool) or not isinstance(num_queries, int) or num_queries < 1:
        raise ValueError(f"num_queries must be an integer >= 1 (tokens), got {num_queries!r}")
    for c in context_lens:
        if not num_queries <= c <= n:
            raise ValueError(f"context length {c} must be within [{num_queries}, {n}] tokens")
    scale = head_size**-0.5 if scale is None else scale
    k, v = keys.to(torch.float64), values.to(torch.float64)
    return [
        _attend_one_sequence(query[c - num_queries : c].to(torch.float64), k[:c], v[:c], c - num_queries,
                             scale, sliding_window, softcap)
        for c in context_lens
    ]


def paged_attention_reference(
    query: torch.Tensor,
    cache: PagedKVCache,
    batch: AttentionBatch,
    *,
    scale: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
) -> torch.Tensor:
    """Float64 attention over a paged, possibly quantized cache (dequantized exactly).

    Arguments as :func:`reference_attention`, with K/V read from ``cache`` through
    ``batch.block_table``. Returns ``[num_tokens, num_q_heads, head_size_v]`` float64.
    """
    check_paged_inputs(query, cache, batch)
    keys, values = [], []
    for i, n in enumerate(batch.seq_lens_list):
        k, v = cache.gather(batch.block_table[i], n, torch.float64)
        keys.append(k)
        values.append(v)
    return reference_attention(
        query, keys, values, batch, scale=scale, sliding_window=sliding_window, softcap=softcap
    )


def check_paged_inputs(query: torch.Tensor, cache: PagedKVCache, batch: AttentionBatch) -> None:
    """Validate a query against a cache and a batch (shared by the reference and the kernels)."""
    require_rank(query, 3, "query", "[num_tokens, num_q_heads, head_size]")
    require_float(query, "query")
    if query.shape[2] != cache.head_size:
        raise ValueError(
            f"query head size {query.shape[2]} does not match the cache's head_size {cache.head_size}"
        )
    if query.shape[1] % cache.num_kv_heads != 0:
        raise ValueError(
            f"num_q_heads ({query.shape[1]}) must be a multiple of the cache's num_kv_heads "
            f"({cache.num_kv_heads})"
        )
    if query.shape[0] != batch.num_tokens:
        raise ValueError(
            f"query has {query.shape[0]} rows but the batch has {batch.num_tokens} new tokens "
            "(query_start_loc[-1])"
        )
    if query.device != cache.device or batch.device != cache.device:
        raise ValueError(
            f"query ({query.device}), batch ({batch.device}) and cache ({cache.device}) must be on one device"
        )
    batch.check_against(cache.num_blocks, cache.block_size)
