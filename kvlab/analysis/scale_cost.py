"""Bytes per token spent on data and on scales, for several schemes side by side."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvlab.quantization import token_footprint


@dataclass(frozen=True)
class SchemeBytes:
    """Bytes one token occupies in one layer's cache under one scheme.

    Attributes:
        scheme: scheme name.
        data_bytes: K and V elements (bytes).
        scale_bytes: per-token-head scales (bytes); 0 for per-tensor and unquantized schemes.
    """

    scheme: str
    data_bytes: int
    scale_bytes: int

    @property
    def total_bytes(self) -> int:
        """Data plus scales (bytes)."""
        return self.data_bytes + self.scale_bytes

    @property
    def scale_fraction(self) -> float:
        """Share of the token's bytes spent on scales (0..1): 64 / (2,048 + 64) = 3.0 %."""
        return self.scale_bytes / self.total_bytes

    @property
    def scale_overhead(self) -> float:
        """Scales relative to the data they scale (0..): 64 B on 2,048 B of data = +3.1 %."""
        return self.scale_bytes / self.data_bytes if self.data_bytes else 0.0


def scheme_bytes(schemes: Sequence[str], num_kv_heads: int, head_size: int) -> list[SchemeBytes]:
    """Per-token-per-layer bytes of each scheme (from :func:`kvlab.token_footprint`).

    Args:
        schemes: kv-cache dtype names.
        num_kv_heads: KV heads of the layer (on one GPU).
        head_size: channels per head (K and V).
    """
    rows = []
    for s in schemes:
        fp = token_footprint(s, num_kv_heads, head_size)
        rows.append(SchemeBytes(s, fp.data_bytes, fp.scale_bytes))
    return rows
