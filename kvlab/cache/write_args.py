"""What a cache write reports, and the checks every writer (reference or Triton) runs first."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from kvlab.validation import require_finite, require_float, require_int_tensor, require_rank

if TYPE_CHECKING:
    from kvlab.cache.paged_cache import PagedKVCache


@dataclass(frozen=True)
class WriteReport:
    """What one cache write did.

    Attributes:
        num_written: tokens written (slots >= 0).
        num_skipped: tokens with a negative (padding) slot, not written.
        key_saturated, value_saturated: per-tensor fp8 values clamped to the format's range.
    """

    num_written: int
    num_skipped: int
    key_saturated: int = 0
    value_saturated: int = 0


def check_finite_rows(key: torch.Tensor, value: torch.Tensor, slot_mapping: torch.Tensor) -> None:
    """Refuse NaN/Inf in the rows a write stores; padding rows (negative slots) are never stored, so
    they may hold anything (shared by the reference and the Triton writer)."""
    pad = (slot_mapping < 0)[:, None, None]
    require_finite(key.masked_fill(pad, 0), "key")
    require_finite(value.masked_fill(pad, 0), "value")


def check_write_args(
    cache: PagedKVCache, key: torch.Tensor, value: torch.Tensor, slot_mapping: torch.Tensor
) -> None:
    """Validate the arguments of a cache write into ``cache`` (shared by the reference and the Triton
    writers); raises ``ValueError`` saying which argument is wrong and what shape it must have."""
    require_rank(key, 3, "key", "[num_tokens, num_kv_heads, head_size]")
    require_rank(value, 3, "value", "[num_tokens, num_kv_heads, head_size]")
    require_float(key, "key")
    require_float(value, "value")
    expect_k = (cache.num_kv_heads, cache.head_size)
    expect_v = (cache.num_kv_heads, cache.head_size_v)
    if tuple(key.shape[1:]) != expect_k:
        raise ValueError(f"key must be [num_tokens, {expect_k[0]}, {expect_k[1]}] for this cache, "
                         f"got {tuple(key.shape)}")
    if tuple(value.shape[1:]) != expect_v or value.shape[0] != key.shape[0]:
        raise ValueError(
            f"value must be [{key.shape[0]}, {expect_v[0]}, {expect_v[1]}], got {tuple(value.shape)}"
        )
    require_int_tensor(slot_mapping, "slot_mapping", 1, "[num_tokens]")
    if slot_mapping.shape[0] != key.shape[0]:
        raise ValueError(
            f"slot_mapping must have one slot per token ({key.shape[0]}), got {slot_mapping.shape[0]}"
        )
    for name, t in (("key", key), ("value", value), ("slot_mapping", slot_mapping)):
        if t.device != cache.device:
            raise ValueError(f"{name} is on {t.device} but the cache is on {cache.device}")
    valid = slot_mapping[slot_mapping >= 0]
    if valid.numel():
        top = int(valid.max())
        if top >= cache.num_slots:
            raise ValueError(
                f"slot_mapping holds slot {top}, but the cache has {cache.num_slots} slots "
                f"({cache.num_blocks} blocks × {cache.block_size})"
            )
        if torch.unique(valid).numel() != valid.numel():
            raise ValueError(
                "slot_mapping writes the same slot twice; each slot may be written once per call"
            )
