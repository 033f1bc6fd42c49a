"""Bytes a kernel must move at the least: each input read once, each output written once.

These are floors, not measurements: the kernel's time against them says how close it runs to the
memory system. Split-K partial results, re-reads through L2 and the like are the kernel's overhead
and are deliberately *not* counted.
"""

from __future__ import annotations

from kvlab.cache.batch import cdiv
from kvlab.quantization.memory import kv_bytes_per_token
from kvlab.quantization.schemes import get_scheme

_INDEX_BYTES = 4  # int32 block ids, offsets, lengths


def attention_bytes(scheme: str, *, batch: int, context: int, query_len: int, num_q_heads: int,
                    num_kv_heads: int, head_size: int, block_size: int, query_bytes: int = 2) -> int:
    """Bytes of one paged-attention call over ``batch`` sequences of ``context`` tokens each.

    K and V of every cached token (with per-token-head scales), the queries and outputs
    (``query_len`` rows per sequence), the block tables and the per-sequence metadata.
    """
    kv = batch * context * kv_bytes_per_token(scheme, num_kv_heads, head_size)
    q_and_out = 2 * batch * query_len * num_q_heads * head_size * query_bytes
    table = batch * cdiv(context, block_size) * _INDEX_BYTES
    meta = batch * 2 * _INDEX_BYTES + _INDEX_BYTES
    return kv + q_and_out + table + meta


def sdpa_bytes(*, batch: int, context: int, query_len: int, num_q_heads: int, num_kv_heads: int,
               head_size: int, element_bytes: int = 2) -> int:
    """Bytes of dense attention over contiguous K/V (no block table)."""
    kv = 2 * batch * context * num_kv_heads * head_size * element_bytes
    return kv + 2 * batch * query_len * num_q_heads * head_size * element_bytes


def write_bytes(scheme: str, *, tokens: int, num_kv_heads: int, head_size: int, input_bytes: int = 2) -> int:
    """Bytes of one cache write: K/V read in the model dtype, codes and scales written, slots read."""
    read = 2 * tokens * num_kv_heads * head_size * input_bytes
    written = tokens * kv_bytes_per_token(get_scheme(scheme), num_kv_heads, head_size)
    return read + written + tokens * 8  # int64 slot mapping


def attention_flops(*, batch: int, context: int, query_len: int, num_q_heads: int, head_size: int) -> int:
    """Multiply-adds × 2 of QKᵀ and PV over the causal key range of every query row."""
    keys = sum(context - query_len + 1 + i for i in range(query_len))  # causal: query i sees these
    return 4 * batch * num_q_heads * head_size * keys
