"""Per-layer KV-cache specs: what one layer stores per block, and how many blocks a request may hold.

A spec describes one attention layer *on one GPU* (KV heads already split by tensor parallelism).
Specs are frozen dataclasses compared by value, so layers with equal specs can share a group.

* :class:`FullAttentionSpec` keeps every token until the request ends. It can also record a window
  (``sliding_window`` / ``attention_chunk_size``) when a sliding or chunked layer was *promoted* to
  full allocation (``disable_hybrid_kv_cache_manager``).
* :class:`SlidingWindowSpec` frees blocks that left the window (``W - 1`` tokens back).
* :class:`ChunkedLocalAttentionSpec` frees the blocks of finished chunks.
* :class:`UniformTypeSpecs` bundles layers of one type but different shapes into one group.

Page sizes come from :func:`kvlab.quantization.page_size_bytes` (per-token-head scales included).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import cached_property
from typing import ClassVar

import torch

from kvlab.quantization import get_scheme, page_size_bytes
from kvlab.validation import require_choice, require_positive_int

#: The model dtypes ``kv_cache_dtype="auto"`` can resolve to.
MODEL_DTYPES: tuple[str, ...] = ("bfloat16", "float16", "float32")


def cdiv(a: int, b: int) -> int:
    """Ceiling division of non-negative integers."""
    return -(-a // b)


@dataclass(frozen=True)
class AttentionSpec:
    """Paged K+V of one attention layer on one GPU.

    Attributes:
        block_size: tokens per block.
        num_kv_heads: KV heads on this GPU.
        head_size: K head size (elements).
        head_size_v: V head size (elements); ``None`` means ``head_size``.
        kv_cache_dtype: a ``--kv-cache-dtype`` name (see :data:`kvlab.quantization.SCHEME_NAMES`).
        model_dtype: what ``"auto"`` stores: ``"bfloat16"``, ``"float16"`` or ``"float32"``.
        page_size_padded: when set, the page is padded to this many bytes (must be >= the real page).
    """

    kind: ClassVar[str] = "attention"

    block_size: int
    num_kv_heads: int
    head_size: int
    head_size_v: int | None = None
    kv_cache_dtype: str = "auto"
    model_dtype: str = "bfloat16"
    page_size_padded: int | None = None

    def __post_init__(self) -> None:
        require_positive_int(self.block_size, "block_size")
        require_positive_int(self.num_kv_heads, "num_kv_heads")
        require_positive_int(self.head_size, "head_size")
        if self.head_size_v is None:
            object.__setattr__(self, "head_size_v", self.head_size)
        require_positive_int(self.head_size_v, "head_size_v")
        require_choice(self.model_dtype, MODEL_DTYPES, "model_dtype")
        get_scheme(self.kv_cache_dtype, getattr(torch, self.model_dtype))  # raises on unknown names
        if self.page_size_padded is not None and self.page_size_padded < self.real_page_size_bytes:
            raise ValueError(
                f"page_size_padded ({self.page_size_padded} B) must be >= the real page "
                f"({self.real_page_size_bytes} B)"
            )

    @cached_property
    def real_page_size_bytes(self) -> int:
        """Bytes of one block of this layer: K, V and per-token-head scales."""
        scheme = get_scheme(self.kv_cache_dtype, getattr(torch, self.model_dtype))
        return page_size_bytes(scheme, self.block_size, self.num_kv_heads, self.head_size, self.head_size_v)

    @property
    def page_size_bytes(self) -> int:
        """Bytes one block of this layer occupies (the padded size when padding is set)."""
        return self.page_size_padded if self.page_size_padded is not None else self.real_page_size_bytes

    # -- per-request footprint (bytes and blocks) ------------------------------------------------------
    def admission_cap_blocks(self, in_flight_tokens: int, max_model_len: int) -> int | None:
        """Most blocks a request can hold at once in this layer, or ``None`` when unbounded (full)."""
        return None

    def max_blocks_per_request(self, max_model_len: int, in_flight_tokens: int) -> int:
        """Blocks one ``max_model_len`` request needs at its peak (§2.1)."""
        cap = self.admission_cap_blocks(in_flight_tokens, max_model_len)
        return cdiv(max_model_len, self.block_size) if cap is None else cap

    def max_memory_usage_bytes(self, max_model_len: int, in_flight_tokens: int) -> int:
        """Bytes one ``max_model_len`` request needs at its peak in this layer."""
        return self.max_blocks_per_request(max_model_len, in_flight_tokens) * self.page_size_bytes

    def num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """Leading tokens no future query attends to (their blocks can be freed); 0 for full attention."""
        return 0

    def with_block_size(self, block_size: int) -> AttentionSpec:
        """The same spec with another block size (the page scales with it)."""
        return dataclasses.replace(self, block_size=block_size, page_size_padded=None)


@dataclass(frozen=True)
class FullAttentionSpec(AttentionSpec):
    """A layer that keeps every token. ``sliding_window`` / ``attention_chunk_size`` are only set
    when a windowed layer was promoted to full allocation; they do not change the footprint.

    ``dcp_world_size``: with decode context parallelism each GPU of the group keeps one
    ``dcp``-th of a request's tokens, so a request needs ``cdiv(cdiv(L, dcp), B)`` blocks
    (``FullAttentionSpec.max_memory_usage_bytes`` in vLLM's ``kv_cache_interface.py``).
    """

    kind: ClassVar[str] = "full"

    sliding_window: int | None = None
    attention_chunk_size: int | None = None
    dcp_world_size: int = 1

    def __post_init__(self) -> None:
        super().__post_init__()
        require_positive_int(self.dcp_world_size, "decode_context_parallel_size")

    def max_blocks_per_request(self, max_model_len: int, in_flight_tokens: int) -> int:
        """``cdiv(cdiv(L, dcp), B)``: each GPU of a DCP group holds its share of the tokens."""
        return cdiv(cdiv(max_model_len, self.dcp_world_size), self.block_size)


@dataclass(frozen=True)
class SlidingWindowSpec(AttentionSpec):
    """A layer that attends to the last ``sliding_window`` tokens (the current one included).

    Attributes:
        sliding_window: window in tokens, W.
        extra_retained_tokens: tokens kept beyond the window (multi-module MTP, [new]); 0 otherwise.
    """

    kind: ClassVar[str] = "sliding_window"

    sliding_window: int = 0
    extra_retained_tokens: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        require_positive_int(self.sliding_window, "sliding_window")
        require_positive_int(self.extra_retained_tokens, "extra_retained_tokens", minimum=0)

    def admission_cap_blocks(self, in_flight_tokens: int, max_model_len: int) -> int:
        """``cdiv(min(W - 1 + extra + T, L), B) + 1``: the "+1" covers a window starting mid-block."""
        tokens = min(self.sliding_window - 1 + self.extra_retained_tokens + in_flight_tokens, max_model_len)
        return cdiv(tokens, self.block_size) + 1

    def num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """``max(0, n - W + 1 - extra)``: the next token attends to the last ``W - 1`` computed ones."""
        return max(0, num_computed_tokens - self.sliding_window + 1 - self.extra_retained_tokens)


@dataclass(frozen=True)
class ChunkedLocalAttentionSpec(AttentionSpec):
    """A layer that attends only within fixed chunks of ``attention_chunk_size`` tokens."""

    kind: ClassVar[str] = "chunked_local"

    attention_chunk_size: int = 0

    def __post_init__(self) -> None:
        super().__post_init__()
        require_positive_int(self.attention_chunk_size, "attention_chunk_size")

    def admission_cap_blocks(self, in_flight_tokens: int, max_model_len: int) -> int:
        """``cdiv(min(C + T, L), B)``."""
        return cdiv(min(self.attention_chunk_size + in_flight_tokens, max_model_len), self.block_size)

    def num_skipped_tokens(self, num_computed_tokens: int) -> int:
        """``(n // C) * C``: every token of a finished chunk."""
        return (num_computed_tokens // self.attention_chunk_size) * self.attention_chunk_size


@dataclass(frozen=True)
class UniformTypeSpecs:
    """Layers of one attention type (and block size) but different shapes, managed as one group.

    The page of the group is the sum of the member pages; each layer keeps its own tensor.

    Attributes:
        specs: ``(layer_name, spec)`` pairs, in layer order.
    """

    specs: tuple[tuple[str, AttentionSpec], ...]

    def __post_init__(self) -> None:
        if not self.specs:
            raise ValueError("UniformTypeSpecs needs at least one layer spec")
        first = self.specs[0][1]
        for name, spec in self.specs:
            if spec.kind != first.kind or spec.block_size != first.block_size:
                raise ValueError(
                    f"layer {name!r} ({spec.kind}, block {spec.block_size}) does not match "
                    f"{first.kind} with block {first.block_size}: "
                    "a uniform-type group needs one type and block size"
                )

    @property
    def representative(self) -> AttentionSpec:
        """The first member: type, block size and window of the whole group."""
        return self.specs[0][1]

    @property
    def kind(self) -> str:
        return self.representative.kind

    @property
    def block_size(self) -> int:
        return self.representative.block_size

    @property
    def page_size_bytes(self) -> int:
        """Sum of the member pages (bytes one block id costs across the group's layers)."""
        return sum(spec.page_size_bytes for _, spec in self.specs)

    def admission_cap_blocks(self, in_flight_tokens: int, max_model_len: int) -> int | None:
        return self.representative.admission_cap_blocks(in_flight_tokens, max_model_len)

    def max_blocks_per_request(self, max_model_len: int, in_flight_tokens: int) -> int:
        """``max`` over members of their blocks per request."""
        return max(spec.max_blocks_per_request(max_model_len, in_flight_tokens) for _, spec in self.specs)

    def max_memory_usage_bytes(self, max_model_len: int, in_flight_tokens: int) -> int:
        return self.max_blocks_per_request(max_model_len, in_flight_tokens) * self.page_size_bytes

    def num_skipped_tokens(self, num_computed_tokens: int) -> int:
        return self.representative.num_skipped_tokens(num_computed_tokens)


#: Any spec a group can carry.
GroupSpec = AttentionSpec | UniformTypeSpecs


def window_of(spec: GroupSpec) -> int | None:
    """The sliding window (tokens) of a sliding-window spec, else ``None``."""
    rep = spec.representative if isinstance(spec, UniformTypeSpecs) else spec
    return rep.sliding_window if isinstance(rep, SlidingWindowSpec) else None


def chunk_of(spec: GroupSpec) -> int | None:
    """The attention chunk (tokens) of a chunked-local spec, else ``None``."""
    rep = spec.representative if isinstance(spec, UniformTypeSpecs) else spec
    return rep.attention_chunk_size if isinstance(rep, ChunkedLocalAttentionSpec) else None
