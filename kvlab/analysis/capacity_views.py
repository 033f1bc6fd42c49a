"""Capacity numbers arranged for pictures: bytes per token by layer type, one request's blocks by group,
and maximum concurrency over a range of context lengths. Every number comes from
:mod:`kvlab.sizing` / :mod:`kvlab.serving`; this module only selects and groups them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvlab.models import ModelKV
from kvlab.quantization import TokenFootprint, get_scheme, token_footprint
from kvlab.serving import EngineConfig, capacity
from kvlab.sizing import KVCachePlan


@dataclass(frozen=True)
class LayerTypeBytes:
    """Bytes per token of one kind of layer on one GPU.

    Attributes:
        label: e.g. ``"sliding_window W=1024 · 8 KV heads × 256"``.
        kind: ``"full"``, ``"sliding_window"`` or ``"chunked_local"``.
        num_layers: layers of this type in the model.
        num_kv_heads: KV heads per GPU.
        head_size, head_size_v: K and V head sizes (elements).
        window: sliding window or chunk (tokens), ``None`` for full attention.
        data_bytes, scale_bytes: bytes per token per layer (K+V data, per-token-head scales).
        page_bytes: bytes of one block of one such layer (bytes).
    """

    label: str
    kind: str
    num_layers: int
    num_kv_heads: int
    head_size: int
    head_size_v: int
    window: int | None
    data_bytes: int
    scale_bytes: int
    page_bytes: int

    @property
    def total_bytes(self) -> int:
        """Bytes per token per layer, scales included."""
        return self.data_bytes + self.scale_bytes


def layer_type_bytes(
    model: ModelKV, kv_cache_dtype: str, block_size: int, tensor_parallel_size: int = 1
) -> list[LayerTypeBytes]:
    """One entry per distinct layer shape of ``model``, in order of first appearance."""
    mla = any(layer.kind == "mla" for layer in model.layers)
    scheme = None if mla else get_scheme(kv_cache_dtype, getattr(torch, model.dtype))
    out: dict[tuple, LayerTypeBytes] = {}
    counts: dict[tuple, int] = {}
    for layer in model.layers:
        if layer.kv_shared_with is not None:  # reads another layer's cache: stores nothing
            continue
        heads = layer.kv_heads_per_gpu(tensor_parallel_size)
        hv = layer.head_size_v or layer.head_size
        window = layer.sliding_window if layer.kind == "sliding_window" else layer.attention_chunk_size
        key = (layer.kind, heads, layer.head_size, hv, window)
        counts[key] = counts.get(key, 0) + 1
        if key not in out:
            page = layer.spec(block_size, kv_cache_dtype, model.dtype, tensor_parallel_size).page_size_bytes
            # an MLA layer stores one latent (K only): its page is the whole per-token cost
            fp = (token_footprint(scheme, heads, layer.head_size, hv) if layer.kind != "mla"
                  else TokenFootprint(page // block_size, 0))
            size = f"{layer.head_size}" if hv == layer.head_size else f"{layer.head_size}/{hv}"
            where = "" if window is None else f" W={window}"
            label = f"{layer.kind}{where} · {heads} KV heads × {size}"
            out[key] = LayerTypeBytes(label, layer.kind, 0, heads, layer.head_size, hv, window,
                                      fp.data_bytes, fp.scale_bytes, page)
    return [LayerTypeBytes(**{**v.__dict__, "num_layers": counts[k]}) for k, v in out.items()]


@dataclass(frozen=True)
class GroupBlocks:
    """One group's share of a ``max_model_len`` request.

    Attributes:
        group: group index.
        kind: the group's layer kind.
        num_layers: layers in the group.
        blocks: blocks the request holds at its peak in this group.
        bytes: ``blocks × bytes per block`` (each block id costs ``bytes_per_block`` of the pool).
    """

    group: int
    kind: str
    num_layers: int
    blocks: int
    bytes: int


def request_blocks_by_group(plan: KVCachePlan) -> list[GroupBlocks]:
    """Peak blocks of one ``max_model_len`` request, per group, with the pool bytes they occupy."""
    return [
        GroupBlocks(i, g.kind, len(g.layer_names), r, r * plan.bytes_per_block)
        for i, (g, r) in enumerate(zip(plan.config.groups, plan.blocks_per_request, strict=True))
    ]


@dataclass(frozen=True)
class ConcurrencyPoint:
    """Maximum concurrency at one ``max_model_len``.

    Attributes:
        max_model_len: L (tokens).
        max_concurrency: ``num_blocks / R``, or ``None`` when vLLM would refuse to start.
        kv_cache_tokens: the profile's "GPU KV cache size" (tokens), or ``None``.
        error: the startup error, or ``""``.
    """

    max_model_len: int
    max_concurrency: float | None
    kv_cache_tokens: int | None
    error: str = ""


def concurrency_curve(config: EngineConfig, lengths: Sequence[int]) -> list[ConcurrencyPoint]:
    """:func:`kvlab.serving.capacity` at each ``max_model_len`` in ``lengths`` (tokens)."""
    out = []
    for n in lengths:
        try:
            plan = capacity(config.replace(max_model_len=int(n)))
            out.append(ConcurrencyPoint(int(n), plan.max_concurrency, plan.kv_cache_tokens))
        except ValueError as exc:
            out.append(ConcurrencyPoint(int(n), None, None, str(exc)))
    return out
