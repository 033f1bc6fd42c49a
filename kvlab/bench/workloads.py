"""Inputs of the benchmark cases, built on the GPU: K/V, paged caches, batches, the float64 truth."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvlab.cache.batch import AttentionBatch, cdiv
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.quantization.per_tensor import calibrate_scale
from kvlab.quantization.schemes import QuantMode, get_scheme
from kvlab.reference.attention import reference_attention


@dataclass(eq=False)
class DenseKV:
    """K and V of ``batch`` sequences of ``context`` tokens, ``[batch, num_kv_heads, context, head]``.

    This is the layout torch SDPA reads; :meth:`sequence` gives one sequence as the
    ``[context, num_kv_heads, head]`` view the cache writer and the reference take (no copy).
    """

    keys: torch.Tensor
    values: torch.Tensor

    def sequence(self, b: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.keys[b].permute(1, 0, 2), self.values[b].permute(1, 0, 2)

    @property
    def batch(self) -> int:
        return self.keys.shape[0]

    @property
    def context(self) -> int:
        return self.keys.shape[2]


def random_kv(batch: int, context: int, num_kv_heads: int, head_size: int, dtype: torch.dtype,
              gen: torch.Generator) -> DenseKV:
    """N(0, 1) K/V drawn sequence by sequence (bounds the fp32 temporary to one sequence)."""
    shape = (batch, num_kv_heads, context, head_size)
    keys = torch.empty(shape, dtype=dtype, device="cuda")
    values = torch.empty(shape, dtype=dtype, device="cuda")
    for b in range(batch):
        keys[b] = torch.randn(shape[1:], generator=gen, device="cuda").to(dtype)
        values[b] = torch.randn(shape[1:], generator=gen, device="cuda").to(dtype)
    return DenseKV(keys, values)


@dataclass(eq=False)
class PagedSets:
    """One cache holding ``len(batches)`` copies of the same K/V under different block ids."""

    cache: PagedKVCache
    batches: list[AttentionBatch]


def paged_copies(scheme: str, kv: DenseKV, *, query_len: int, block_size: int, sets: int,
                 gen: torch.Generator, rounding: str = "nearest") -> PagedSets:
    """Write ``kv`` into a fresh cache ``sets`` times over shuffled blocks, with the Triton writer.

    Every block table row gets one padding column pointing at a never-written (NaN) block.
    Per-tensor fp8 scales are calibrated with ``absmax`` on the data.
    """
    from kvlab.kernels.cache_write import launch_cache_write

    sch = get_scheme(scheme, kv.keys.dtype)
    per_seq = cdiv(kv.context, block_size)
    total = sets * kv.batch * per_seq + 1
    order = torch.randperm(total, generator=gen, device="cuda").to(torch.int32)
    spare = order[-1:]
    k_scale = v_scale = 1.0
    if sch.mode == QuantMode.FP8_PER_TENSOR:
        k_scale = calibrate_scale(kv.keys, sch, "absmax")
        v_scale = calibrate_scale(kv.values, sch, "absmax")
    cache = PagedKVCache.allocate(sch, total, block_size, kv.keys.shape[1], kv.keys.shape[3],
                                  device="cuda", k_scale=k_scale, v_scale=v_scale, model_dtype=kv.keys.dtype)
    pos = torch.arange(kv.context, device="cuda")
    batches = []
    for s in range(sets):
        ids = order[s * kv.batch * per_seq:(s + 1) * kv.batch * per_seq].view(kv.batch, per_seq)
        table = torch.cat([ids, spare.expand(kv.batch, 1)], dim=1).contiguous()
        for b in range(kv.batch):
            k, v = kv.sequence(b)
            slots = table[b, pos // block_size].long() * block_size + pos % block_size
            launch_cache_write(cache, k, v, slots, rounding=rounding)
        batches.append(AttentionBatch.from_lengths([query_len] * kv.batch, [kv.context] * kv.batch, table))
    return PagedSets(cache, batches)


def truth(query: torch.Tensor, kv: DenseKV, batch: AttentionBatch) -> torch.Tensor:
    """Float64 attention on the unquantized K/V, sequence by sequence on the GPU."""
    keys, values = zip(*(kv.sequence(b) for b in range(kv.batch)), strict=True)
    return reference_attention(query, list(keys), list(values), batch)
