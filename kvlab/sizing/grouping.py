"""Group layers into KV-cache groups that share one block table per request (spec §2.2).

Rules, in order:

1. ``disable_hybrid_kv_cache_manager``: sliding/chunked layers are *promoted* to
   :class:`FullAttentionSpec` (window recorded) unless all specs are already equal.
2. No layers → no groups.
3. All specs equal (full specs that differ only in the recorded window merge) → one group.
4. One type, one block size, different shapes → one :class:`UniformTypeSpecs` group.
5. Otherwise (hybrid): unify page sizes (scale smaller pages' block sizes by ``Pmax / P``; when that
   does not divide, pad [new] or raise ``NotImplementedError`` [classic]); bucket equal specs in layer
   order; ``group_size = min(bucket sizes)``, or ``max`` when ``max < 1.5 × min``; each bucket of
   ``n`` layers becomes ``cdiv(n, group_size)`` groups, group ``i`` taking ``layers[i::num_groups]``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from kvlab.sizing.specs import (
    AttentionSpec,
    ChunkedLocalAttentionSpec,
    FullAttentionSpec,
    GroupSpec,
    SlidingWindowSpec,
    UniformTypeSpecs,
    cdiv,
)


@dataclass(frozen=True)
class KVCacheGroup:
    """Layers that share one block table per request.

    Attributes:
        layer_names: the member layers, in the order they were assigned.
        spec: their common spec (a :class:`UniformTypeSpecs` for a uniform-type group).
    """

    layer_names: tuple[str, ...]
    spec: GroupSpec

    @property
    def kind(self) -> str:
        """``"full"``, ``"sliding_window"`` or ``"chunked_local"``."""
        return self.spec.kind

    @property
    def block_size(self) -> int:
        """Tokens per block in this group."""
        return self.spec.block_size

    @property
    def page_size_bytes(self) -> int:
        """Bytes of one block of one member layer (the summed page for a uniform-type group)."""
        return self.spec.page_size_bytes

    @property
    def bytes_per_block(self) -> int:
        """Bytes one block id of this group occupies over all its layers."""
        if isinstance(self.spec, UniformTypeSpecs):
            return self.spec.page_size_bytes
        return self.spec.page_size_bytes * len(self.layer_names)


@dataclass(frozen=True)
class Grouping:
    """The result of :func:`group_layers`.

    Attributes:
        groups: the KV-cache groups.
        group_size: layers per group slot (the number of shared tensors in the classic layout);
            for a uniform-type group, its number of layers.
        layout: ``"uniform"`` (one spec), ``"uniform_type"`` or ``"hybrid"``.
        padding_layers: empty slots in hybrid groups ("Add k padding layers").
        warnings: messages vLLM would log (padding).
    """

    groups: tuple[KVCacheGroup, ...]
    group_size: int
    layout: str
    padding_layers: int = 0
    warnings: tuple[str, ...] = ()


def promote_to_full(specs: Mapping[str, AttentionSpec]) -> dict[str, AttentionSpec]:
    """Sliding and chunked specs become full-attention specs that remember their window (§2.2.1).

    Raises:
        ValueError: when no layer is full attention ("Failed to promote").
    """
    if not any(isinstance(s, FullAttentionSpec) for s in specs.values()):
        raise ValueError(
            "Failed to promote the sliding-window/chunked layers to full attention: the model has no "
            "full-attention layer; disable_hybrid_kv_cache_manager needs at least one"
        )
    promoted: dict[str, AttentionSpec] = {}
    for name, spec in specs.items():
        base = {f.name: getattr(spec, f.name) for f in dataclasses.fields(AttentionSpec)}
        if isinstance(spec, SlidingWindowSpec):
            promoted[name] = FullAttentionSpec(**base, sliding_window=spec.sliding_window)
        elif isinstance(spec, ChunkedLocalAttentionSpec):
            promoted[name] = FullAttentionSpec(**base, attention_chunk_size=spec.attention_chunk_size)
        else:
            promoted[name] = spec
    return promoted


def _merge_equal_specs(specs: list[AttentionSpec]) -> AttentionSpec | None:
    """The one spec all ``specs`` amount to, or ``None`` when they differ.

    Full-attention specs that differ only in the recorded window merge into one that keeps it.
    """
    first = specs[0]
    if all(s == first for s in specs):
        return first
    if not all(isinstance(s, FullAttentionSpec) for s in specs):
        return None
    bare = [dataclasses.replace(s, sliding_window=None, attention_chunk_size=None) for s in specs]
    if any(b != bare[0] for b in bare):
        return None
    windows = {s.sliding_window for s in specs} - {None}
    chunks = {s.attention_chunk_size for s in specs} - {None}
    if len(windows) > 1:
        raise ValueError(
            f"all sliding-window layers in one group must have the same window size; got {sorted(windows)}"
        )
    if windows and chunks:
        raise ValueError("sliding-window and chunked-local layers cannot be promoted into one group")
    if len(chunks) > 1:
        raise ValueError(
            f"all chunked-local layers in one group must have the same chunk size; got {sorted(chunks)}"
        )
    return dataclasses.replace(
        bare[0], sliding_window=next(iter(windows), None), attention_chunk_size=next(iter(chunks), None)
    )


def _is_uniform_type(specs: list[AttentionSpec]) -> bool:
    first = specs[0]
    if any(s.block_size != first.block_size for s in specs):
        return False
    if isinstance(first, FullAttentionSpec):
        return all(isinstance(s, FullAttentionSpec) for s in specs)
    if isinstance(first, SlidingWindowSpec):
        return all(
            isinstance(s, SlidingWindowSpec) and s.sliding_window == first.sliding_window for s in specs
        )
    if isinstance(first, ChunkedLocalAttentionSpec):
        return all(
            isinstance(s, ChunkedLocalAttentionSpec) and s.attention_chunk_size == first.attention_chunk_size
            for s in specs
        )
    return False


def unify_page_sizes(specs: Mapping[str, AttentionSpec], pad_pages: bool) -> dict[str, AttentionSpec]:
    """Make every page as large as the largest one by scaling block sizes (or padding).

    Raises:
        NotImplementedError: a page does not divide the largest one and ``pad_pages`` is False.
    """
    max_page = max(s.page_size_bytes for s in specs.values())
    unified: dict[str, AttentionSpec] = {}
    for name, spec in specs.items():
        page = spec.page_size_bytes
        if page == max_page:
            unified[name] = spec
        elif max_page % page == 0:
            unified[name] = spec.with_block_size(spec.block_size * (max_page // page))
        elif pad_pages:
            unified[name] = dataclasses.replace(spec, page_size_padded=max_page)
        else:
            raise NotImplementedError(
                f"layer {name!r} has a page of {page} B that does not divide the largest page "
                f"({max_page} B); this profile cannot unify the page sizes (a newer one pads them)"
            )
    return unified


def group_layers(
    specs: Mapping[str, AttentionSpec], *, pad_pages: bool = False, disable_hybrid: bool = False
) -> Grouping:
    """Group layers as vLLM's ``get_kv_cache_groups`` does (§2.2).

    Args:
        specs: ``{layer_name: spec}`` in layer order.
        pad_pages: pad non-divisible pages ([new]) instead of raising ([classic]).
        disable_hybrid: promote sliding/chunked layers to full attention.
    """
    if not specs:
        return Grouping(groups=(), group_size=0, layout="uniform")
    specs = dict(specs)
    if disable_hybrid and _merge_equal_specs(list(specs.values())) is None:
        specs = promote_to_full(specs)
    names = list(specs)
    values = list(specs.values())

    merged = _merge_equal_specs(values)
    if merged is not None:
        return Grouping(groups=(KVCacheGroup(tuple(names), merged),), group_size=len(names), layout="uniform")
    if _is_uniform_type(values):
        spec = UniformTypeSpecs(tuple(specs.items()))
        return Grouping(
            groups=(KVCacheGroup(tuple(names), spec),), group_size=len(names), layout="uniform_type"
        )

    unified = unify_page_sizes(specs, pad_pages)
    buckets: dict[AttentionSpec, list[str]] = {}
    for name, spec in unified.items():
        buckets.setdefault(spec, []).append(name)
    sizes = [len(layers) for layers in buckets.values()]
    smallest, largest = min(sizes), max(sizes)
    group_size = largest if largest < 1.5 * smallest else smallest

    groups: list[KVCacheGroup] = []
    for spec, layers in buckets.items():
        num_groups = cdiv(len(layers), group_size)
        groups.extend(KVCacheGroup(tuple(layers[i::num_groups]), spec) for i in range(num_groups))
    padding = len(groups) * group_size - len(names)
    warnings = (
        (
            f"Add {padding} padding layers, may waste at most {padding * 100 // (len(names) + padding)}% "
            "KV cache memory",
        )
        if padding
        else ()
    )
    return Grouping(tuple(groups), group_size, "hybrid", padding, warnings)
