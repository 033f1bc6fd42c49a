"""Random paged batches with their unquantized K/V: the shared test, benchmark and lesson fixture.

:func:`build_paged_example` draws K/V for every token of every sequence, scatters the blocks of each
sequence over a shuffled pool (so block tables are not the identity), writes them through the
reference quantizer and returns everything a comparison needs: the query, the original K/V (for the
truth path), the cache and the batch metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from kvlab.cache.batch import AttentionBatch, cdiv
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.quantization.per_tensor import calibrate_scale
from kvlab.quantization.schemes import KVCacheScheme, QuantMode, get_scheme
from kvlab.validation import require_positive_int

#: Signature of a K/V source: ``(num_tokens, num_kv_heads, head_size, generator) -> (K, V)`` in float32.
KVSource = Callable[[int, int, int, torch.Generator], tuple[torch.Tensor, torch.Tensor]]


def standard_normal_kv(
    num_tokens: int, num_kv_heads: int, head_size: int, generator: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """K and V drawn i.i.d. from N(0, 1), ``[num_tokens, num_kv_heads, head_size]`` float32."""
    shape = (num_tokens, num_kv_heads, head_size)
    dev = generator.device
    return (torch.randn(shape, generator=generator, device=dev),
            torch.randn(shape, generator=generator, device=dev))


@dataclass(eq=False)
class PagedExample:
    """A filled cache with everything needed to check attention over it.

    Attributes:
        query: ``[num_tokens, num_q_heads, head_size]`` in the query dtype.
        keys, values: per sequence, every token's K/V before quantization (in ``kv_dtype``).
        cache: the paged cache holding them (quantized by its scheme).
        batch: query offsets, sequence lengths and block tables.
        slot_mapping: slots of the new (query) tokens, as a cache write of this step would use.
    """

    query: torch.Tensor
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    cache: PagedKVCache
    batch: AttentionBatch
    slot_mapping: torch.Tensor


def build_paged_example(
    query_lens: Sequence[int],
    seq_lens: Sequence[int],
    *,
    num_q_heads: int,
    num_kv_heads: int,
    head_size: int,
    scheme: str | KVCacheScheme = "bfloat16",
    block_size: int = 16,
    query_dtype: torch.dtype = torch.bfloat16,
    kv_dtype: torch.dtype = torch.bfloat16,
    rounding: str = "nearest",
    k_scale: float | None = None,
    v_scale: float | None = None,
    spare_blocks: int = 2,
    seed: int = 0,
    device: str | torch.device = "cpu",
    kv_source: KVSource = standard_normal_kv,
) -> PagedExample:
    """A random batch over a freshly written paged cache.

    Args:
        query_lens: new tokens per sequence (1 for a decode, more for a prefill chunk, 0 allowed).
        seq_lens: total tokens per sequence, new ones included.
        num_q_heads, num_kv_heads, head_size: attention shape (``num_q_heads`` a multiple of
            ``num_kv_heads``).
        scheme: kv-cache dtype name.
        block_size: tokens per block.
        query_dtype: dtype of the query.
        kv_dtype: dtype the model produced K/V in (what the truth path sees); ``"auto"`` stores it.
        rounding: int8 per-token-head rounding (``"nearest"`` or ``"truncate"``).
        k_scale, v_scale: per-tensor fp8 scales; by default calibrated with ``"absmax"`` on the data.
        spare_blocks: extra never-written (poisoned) blocks; block-table padding points at them, so a
            kernel that reads past a sequence's blocks sees NaN.
        seed: seeds the generator (same seed, same example).
        device: where the tensors live.
        kv_source: draws K/V (default :func:`standard_normal_kv`).
    """
    if len(query_lens) != len(seq_lens):
        raise ValueError(
            f"query_lens ({len(query_lens)}) and seq_lens ({len(seq_lens)}) must have the same length"
        )
    require_positive_int(block_size, "block_size")
    require_positive_int(spare_blocks, "spare_blocks", minimum=1)
    sch = get_scheme(scheme, kv_dtype)
    device = torch.device(device)
    gen = torch.Generator(device=device).manual_seed(seed)

    blocks_per_seq = [cdiv(int(s), block_size) for s in seq_lens]
    num_blocks = sum(blocks_per_seq) + spare_blocks
    order = torch.randperm(num_blocks, generator=gen, device=device).cpu()
    spare = order[: spare_blocks].tolist()
    width = max(blocks_per_seq + [0]) + 1  # one padding column, pointing at a poisoned block
    table = torch.full((len(seq_lens), width), spare[0], dtype=torch.int32)
    cursor = spare_blocks
    for i, nb in enumerate(blocks_per_seq):
        table[i, :nb] = order[cursor : cursor + nb].to(torch.int32)
        cursor += nb

    keys, values = [], []
    for s in seq_lens:
        k, v = kv_source(int(s), num_kv_heads, head_size, gen)
        keys.append(k.to(kv_dtype))
        values.append(v.to(kv_dtype))

    empty = torch.zeros(0, num_kv_heads, head_size, dtype=kv_dtype, device=device)
    all_k = torch.cat(keys) if keys else empty
    all_v = torch.cat(values) if values else empty
    if sch.mode == QuantMode.FP8_PER_TENSOR:
        k_scale = calibrate_scale(all_k, sch, "absmax") if k_scale is None else k_scale
        v_scale = calibrate_scale(all_v, sch, "absmax") if v_scale is None else v_scale
    cache = PagedKVCache.allocate(
        sch, num_blocks, block_size, num_kv_heads, head_size,
        k_scale=k_scale or 1.0, v_scale=v_scale or 1.0, model_dtype=kv_dtype, device=device,
    )
    full = AttentionBatch.from_lengths(list(seq_lens), list(seq_lens), table, device=device)
    by_sequence = {"batch": full} if sch.mode.is_low_bit else {}  # KIVI's residual follows sequences
    cache.write(all_k, all_v, full.slot_mapping(block_size), rounding=rounding, **by_sequence)
    del all_k, all_v

    batch = AttentionBatch.from_lengths(list(query_lens), list(seq_lens), table, device=device)
    query = torch.randn(batch.num_tokens, num_q_heads, head_size, generator=gen, device=device)
    query = query.to(query_dtype)
    return PagedExample(
        query=query,
        keys=keys,
        values=values,
        cache=cache,
        batch=batch,
        slot_mapping=batch.slot_mapping(block_size),
    )
