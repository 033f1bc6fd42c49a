"""Bytes a KV cache spends per token and per page, scales included.

One *page* is one block of one layer: ``block_size`` tokens × ``num_kv_heads`` × (K + V). For a
per-token-head scheme every (token, head) row also carries two fp32 scales (K and V), which is what
makes an int8 page 33,792 bytes instead of 32,768 for 8 KV heads × head 128 × block 16
(vLLM: ``page_size_bytes = real_page_size_bytes + 2 * block_size * num_kv_heads * 4``).
Per-tensor fp8 scales are two fp32 numbers per *layer*; they live outside the pages and are not
counted here, as in vLLM.

kvlab's low-bit schemes (:mod:`kvlab.quantization.lowbit_schemes`) pack 2 or 4 codes per byte and
carry fp32 or fp16 scales (and zero points); their KIVI key scales belong to a whole block, so their
bytes per token depend on the block size. The same functions count them, so sizing treats them
exactly like vLLM's dtypes. The KIVI residual (the newest tokens, in bf16) is a per-sequence staging
area outside the pages: :func:`residual_bytes_per_sequence`.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvlab.quantization.formats import SCALE_BYTES
from kvlab.quantization.schemes import KVCacheScheme, get_scheme
from kvlab.validation import require_positive_int


@dataclass(frozen=True)
class TokenFootprint:
    """Bytes one token occupies in one layer's cache.

    Attributes:
        data_bytes: K and V elements (``num_kv_heads * (head_size + head_size_v) * element_bytes``;
            for packed schemes ``* bits / 8``).
        scale_bytes: per-token-head scales (``2 * num_kv_heads * 4``), 0 for other vLLM schemes; for
            KIVI the fp16 scales and zero points per token (key pairs of a block spread over its tokens).
    """

    data_bytes: int
    scale_bytes: int

    @property
    def total_bytes(self) -> int:
        """``data_bytes + scale_bytes``."""
        return self.data_bytes + self.scale_bytes


def token_footprint(
    scheme: str | KVCacheScheme,
    num_kv_heads: int,
    head_size: int,
    head_size_v: int | None = None,
    block_size: int = 16,
) -> TokenFootprint:
    """Bytes per token per layer for a scheme, split into data and scales.

    Args:
        scheme: a kv-cache dtype name or scheme.
        num_kv_heads: KV heads of the layer (on one GPU, after tensor parallelism).
        head_size: K head size (elements).
        head_size_v: V head size (elements); defaults to ``head_size``.
        block_size: tokens per block; only KIVI schemes depend on it (their key scales are per block).
    """
    sch = get_scheme(scheme)
    require_positive_int(num_kv_heads, "num_kv_heads")
    require_positive_int(head_size, "head_size")
    require_positive_int(block_size, "block_size")
    hv = head_size if head_size_v is None else require_positive_int(head_size_v, "head_size_v")
    if sch.mode.is_low_bit:
        codes, scales = sch.page_bytes_per_head(head_size, hv, block_size)
        return TokenFootprint(data_bytes=num_kv_heads * codes // block_size,
                              scale_bytes=num_kv_heads * scales // block_size)
    data = num_kv_heads * (head_size + hv) * sch.element_bytes
    scales = 2 * num_kv_heads * SCALE_BYTES if sch.has_token_head_scales else 0
    return TokenFootprint(data_bytes=data, scale_bytes=scales)


def kv_bytes_per_token(
    scheme: str | KVCacheScheme,
    num_kv_heads: int,
    head_size: int,
    head_size_v: int | None = None,
    block_size: int = 16,
) -> int:
    """Bytes one token occupies in one layer's cache (K + V + scales and zero points)."""
    return token_footprint(scheme, num_kv_heads, head_size, head_size_v, block_size).total_bytes


def page_size_bytes(
    scheme: str | KVCacheScheme,
    block_size: int,
    num_kv_heads: int,
    head_size: int,
    head_size_v: int | None = None,
) -> int:
    """Bytes of one block of one layer: ``block_size × kv_bytes_per_token``.

    Example: 8 KV heads, head 128, block 16 → bf16 65,536; fp8 32,768; int8/fp8 per-token-head 33,792;
    (kvlab schemes) int4_per_token_head 17,408; kivi4 22,528; kivi2 14,336.
    """
    require_positive_int(block_size, "block_size")
    return block_size * kv_bytes_per_token(scheme, num_kv_heads, head_size, head_size_v, block_size)


def residual_bytes_per_sequence(
    scheme: str | KVCacheScheme,
    block_size: int,
    num_kv_heads: int,
    head_size: int,
    head_size_v: int | None = None,
) -> int:
    """Bytes of one sequence's bf16 residual in one layer (0 for schemes without one).

    A KIVI cache keeps at most ``residual_blocks × block_size`` newest tokens of each sequence in
    bf16 until their block is quantized: ``residual_blocks × block_size × H × (D + Dv) × 2``.
    """
    sch = get_scheme(scheme)
    require_positive_int(block_size, "block_size")
    if not sch.mode.is_low_bit or sch.residual_blocks == 0:
        return 0
    hv = head_size if head_size_v is None else head_size_v
    return sch.residual_tokens(block_size) * num_kv_heads * (head_size + hv) * 2
