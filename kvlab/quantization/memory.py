"""Bytes a KV cache spends per token and per page, scales included.

One *page* is one block of one layer: ``block_size`` tokens × ``num_kv_heads`` × (K + V). For a
per-token-head scheme every (token, head) row also carries two fp32 scales (K and V), which is what
makes an int8 page 33,792 bytes instead of 32,768 for 8 KV heads × head 128 × block 16
(vLLM: ``page_size_bytes = real_page_size_bytes + 2 * block_size * num_kv_heads * 4``).
Per-tensor fp8 scales are two fp32 numbers per *layer*; they live outside the pages and are not
counted here, as in vLLM.
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
        data_bytes: K and V elements (``num_kv_heads * (head_size + head_size_v) * element_bytes``).
        scale_bytes: per-token-head scales (``2 * num_kv_heads * 4``), 0 for other schemes.
    """

    data_bytes: int
    scale_bytes: int

    @property
    def total_bytes(self) -> int:
        """``data_bytes + scale_bytes``."""
        return self.data_bytes + self.scale_bytes


def token_footprint(
    scheme: str | KVCacheScheme, num_kv_heads: int, head_size: int, head_size_v: int | None = None
) -> TokenFootprint:
    """Bytes per token per layer for a scheme, split into data and scales.

    Args:
        scheme: a kv-cache dtype name or scheme.
        num_kv_heads: KV heads of the layer (on one GPU, after tensor parallelism).
        head_size: K head size (elements).
        head_size_v: V head size (elements); defaults to ``head_size``.
    """
    sch = get_scheme(scheme)
    require_positive_int(num_kv_heads, "num_kv_heads")
    require_positive_int(head_size, "head_size")
    hv = head_size if head_size_v is None else require_positive_int(head_size_v, "head_size_v")
    data = num_kv_heads * (head_size + hv) * sch.element_bytes
    scales = 2 * num_kv_heads * SCALE_BYTES if sch.has_token_head_scales else 0
    return TokenFootprint(data_bytes=data, scale_bytes=scales)


def kv_bytes_per_token(
    scheme: str | KVCacheScheme, num_kv_heads: int, head_size: int, head_size_v: int | None = None
) -> int:
    """Bytes one token occupies in one layer's cache (K + V + per-token-head scales)."""
    return token_footprint(scheme, num_kv_heads, head_size, head_size_v).total_bytes


def page_size_bytes(
    scheme: str | KVCacheScheme,
    block_size: int,
    num_kv_heads: int,
    head_size: int,
    head_size_v: int | None = None,
) -> int:
    """Bytes of one block of one layer: ``block_size × kv_bytes_per_token``.

    Example: 8 KV heads, head 128, block 16 → bf16 65,536; fp8 32,768; int8/fp8 per-token-head 33,792.
    """
    require_positive_int(block_size, "block_size")
    return block_size * kv_bytes_per_token(scheme, num_kv_heads, head_size, head_size_v)
