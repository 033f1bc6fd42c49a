"""The error-versus-bytes frontier: what each KV scheme costs in memory and what it does to attention.

For every scheme, one sequence of real or synthetic K/V is written into a paged cache of that scheme
(the library's own writers: scales, zero points, KIVI's residual and all), and the float64 attention
of the last ``num_queries`` tokens over the cache is compared with the same attention over the
original K/V. That error, against the bytes one token costs (scales and zero points included), is
one point of the frontier; a scheme is *on* the frontier when no other scheme is both smaller and
more accurate.

The KIVI residual keeps the newest tokens in bf16, so its benefit depends on how long the context
is: at ``context`` tokens, ``R × block_size`` of them are exact. The points are measured at the
context given, and say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvlab.cache.batch import AttentionBatch, cdiv
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.kvdata.samples import KVSample
from kvlab.quantization import calibrate_scale, get_scheme, token_footprint
from kvlab.quantization.schemes import QuantMode
from kvlab.reference import paged_attention_reference, reference_attention, relative_error
from kvlab.validation import require_positive_int

#: The schemes of the frontier table: vLLM's formats, then kvlab's low-bit ones with value groups of
#: 32, 64 and 128 channels and residuals of one block and of 8 blocks (128 tokens at block 16, KIVI's
#: own setting).
FRONTIER_SCHEMES: tuple[str, ...] = (
    "bfloat16", "fp8_e4m3", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head",
    "int4_per_token_head", "kivi4", "kivi4_g32_r8",
    "kivi2", "kivi2_g64", "kivi2_g128", "kivi2_g32_r8", "kivi2_g64_r8", "kivi2_g128_r8",
)


@dataclass(frozen=True)
class FrontierPoint:
    """One scheme on one sample.

    Attributes:
        scheme: scheme name; ``is_vllm``: a vLLM ``--kv-cache-dtype`` (False: a kvlab scheme).
        bytes_per_token: bytes per token per layer at the sample's shape (K, V, scales, zero points).
        bits_per_element: ``8 × bytes_per_token / (KV heads × (D + Dv))``: comparable across shapes.
        rel_error: attention-output relative error against the unquantized K/V (float64 both ways),
            ``nan`` when the scheme does not fit the shape (see ``note``).
        source: the sample's label; ``context``: its tokens; ``note``: why a point is missing.
    """

    scheme: str
    is_vllm: bool
    bytes_per_token: int
    bits_per_element: float
    rel_error: float
    source: str
    context: int
    note: str = ""


def _cache_for(scheme: str, keys: torch.Tensor, values: torch.Tensor, block_size: int
               ) -> tuple[PagedKVCache, AttentionBatch]:
    """A cache of ``scheme`` holding the one sequence ``keys``/``values`` (blocks 0, 1, …)."""
    n, heads, d = keys.shape
    sch = get_scheme(scheme)
    scales = {}
    if sch.mode == QuantMode.FP8_PER_TENSOR:
        scales = dict(k_scale=calibrate_scale(keys, sch), v_scale=calibrate_scale(values, sch))
    nblocks = cdiv(n, block_size)
    cache = PagedKVCache.allocate(sch, nblocks, block_size, heads, d, head_size_v=values.shape[2], **scales)
    batch = AttentionBatch.from_lengths([n], [n], [list(range(nblocks))])
    by_sequence = {"batch": batch} if sch.mode.is_low_bit else {}
    cache.write(keys, values, batch.slot_mapping(block_size), **by_sequence)
    return cache, batch


def frontier(sample: KVSample, schemes: Sequence[str] = FRONTIER_SCHEMES, *, block_size: int = 16,
             num_queries: int = 16) -> list[FrontierPoint]:
    """Bytes per token and attention-output error of every scheme on one sample.

    Args:
        sample: Q/K/V of one layer and one sequence (:func:`kvlab.kvdata.kv_sample`).
        schemes: scheme names (vLLM's and kvlab's).
        block_size: tokens per block (KIVI key groups are blocks).
        num_queries: the last tokens of the sequence attend (a prefill chunk at the end of the context).

    Raises:
        ValueError: a KIVI residual longer than the context, or too few tokens for the queries.
    """
    require_positive_int(block_size, "block_size", minimum=2)
    require_positive_int(num_queries, "num_queries")
    n, heads, d = sample.keys.shape
    dv = sample.values.shape[2]
    if num_queries > n:
        raise ValueError(f"num_queries ({num_queries}) exceeds the sample's {n} tokens")
    qbatch = AttentionBatch.from_lengths([num_queries], [n], [list(range(cdiv(n, block_size)))])
    queries = sample.queries[n - num_queries:]
    truth = reference_attention(queries, [sample.keys], [sample.values], qbatch)
    points = []
    for name in schemes:
        sch = get_scheme(name)
        if sch.mode == QuantMode.KIVI and sch.residual_tokens(block_size) > n:
            raise ValueError(
                f"scheme {name!r} keeps {sch.residual_tokens(block_size)} residual tokens, longer than the "
                f"{n}-token context: use a longer sample or a shorter residual"
            )
        try:
            fp = token_footprint(sch, heads, d, dv, block_size)
        except ValueError as err:  # e.g. a value group larger than MiniLM's 32-channel heads
            points.append(FrontierPoint(name, sch.is_vllm, 0, float("nan"), float("nan"), sample.label, n,
                                        str(err)))
            continue
        cache, _ = _cache_for(sch, sample.keys, sample.values, block_size)
        out = paged_attention_reference(queries, cache, qbatch)
        points.append(FrontierPoint(
            name, sch.is_vllm, fp.total_bytes, round(8 * fp.total_bytes / (heads * (d + dv)), 3),
            relative_error(out, truth), sample.label, n))
    return points


def on_frontier(points: Sequence[FrontierPoint]) -> list[FrontierPoint]:
    """The points no other point beats on both bytes and error (the Pareto frontier), smallest first."""
    valid = sorted((p for p in points if p.rel_error == p.rel_error), key=lambda p: (p.bits_per_element,
                                                                                       p.rel_error))
    out, best = [], float("inf")
    for p in valid:
        if p.rel_error < best:
            out.append(p)
            best = p.rel_error
    return out
