"""Attention cases of the benchmark: kvlab's paged kernel and torch SDPA on the same shape."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvlab.bench.config import BenchConfig
from kvlab.bench.context import RunContext, SdpaBaselines, make_row
from kvlab.bench.measure import rotation_sets, time_graph_us
from kvlab.bench.results import BenchRow
from kvlab.bench.sdpa import SdpaShape, sdpa_baselines
from kvlab.bench.traffic import attention_bytes, attention_flops, sdpa_bytes
from kvlab.bench.workloads import DenseKV, paged_copies, random_kv, truth
from kvlab.cache.batch import AttentionBatch
from kvlab.reference.metrics import relative_error


@dataclass(eq=False)
class AttentionCase:
    """Inputs of one attention shape: K/V, rotated query sets, the float64 truth, SDPA's times."""

    kv: DenseKV
    queries: list[torch.Tensor]
    query_len: int
    truth: torch.Tensor
    sets: int
    sdpa: SdpaBaselines | None = None


def attention_case(config: BenchConfig, batch: int, context: int, query_len: int) -> AttentionCase:
    """Random K/V and queries of one shape (N(0, 1), seeded by the shape), and their float64 truth."""
    gen = torch.Generator(device="cuda").manual_seed(config.seed + 1000 * batch + context + query_len)
    kv = random_kv(batch, context, config.num_kv_heads, config.head_size, config.query_dtype, gen)
    smallest = attention_bytes("int8_per_token_head", batch=batch, context=context, query_len=query_len,
                               num_q_heads=config.num_q_heads, num_kv_heads=config.num_kv_heads,
                               head_size=config.head_size, block_size=config.block_size)
    sets = rotation_sets(smallest, config.l2_multiple)
    qshape = (batch * query_len, config.num_q_heads, config.head_size)
    queries = [torch.randn(qshape, generator=gen, device="cuda").to(config.query_dtype) for _ in range(sets)]
    meta = AttentionBatch.from_lengths([query_len] * batch, [context] * batch,
                                       torch.zeros(batch, 1, dtype=torch.int32, device="cuda"))
    return AttentionCase(kv, queries, query_len, truth(queries[0], kv, meta), sets)


def paged(config: BenchConfig, case: AttentionCase, scheme: str):
    """The case's K/V written into a paged cache of ``scheme`` (``sets`` copies, shuffled blocks)."""
    gen = torch.Generator(device="cuda").manual_seed(config.seed + 7)
    return paged_copies(scheme, case.kv, query_len=case.query_len, block_size=config.block_size,
                        sets=case.sets, gen=gen, rounding=config.rounding)


def _shape_numbers(config: BenchConfig, case: AttentionCase, scheme: str) -> tuple[int, int]:
    b, L = case.kv.batch, case.kv.context
    nbytes = attention_bytes(scheme, batch=b, context=L, query_len=case.query_len,
                             num_q_heads=config.num_q_heads, num_kv_heads=config.num_kv_heads,
                             head_size=config.head_size, block_size=config.block_size)
    flops = attention_flops(batch=b, context=L, query_len=case.query_len, num_q_heads=config.num_q_heads,
                            head_size=config.head_size)
    return nbytes, flops


def measure_kvlab_attention(config: BenchConfig, ctx: RunContext, case: AttentionCase, scheme: str, *,
                            kind: str, tiling=None, fp8_fast_decode: bool = True,
                            fp8_half_dots: bool = False, decode_full_tiles: bool | None = None,
                            int8_fast_decode: bool = True, int8_fast_values: bool | None = None,
                            fused_merge: bool | None = None, dequantize_first: bool | None = None,
                            paged_sets=None) -> BenchRow:
    """Time kvlab's paged attention for one scheme on one case (inputs rotated past the L2).

    ``dequantize_first`` picks an 8-bit prefill's path (``None``: the kernels' rule; see
    :mod:`kvlab.kernels.dequantized_prefill`); the other options shape the fused kernel."""
    from kvlab.kernels.attention import prepare_paged_attention

    paged_sets = paged_sets or paged(config, case, scheme)
    calls = [prepare_paged_attention(case.queries[s], paged_sets.cache, paged_sets.batches[s], tiling=tiling,
                                     fp8_fast_decode=fp8_fast_decode, fp8_half_dots=fp8_half_dots,
                                     decode_full_tiles=decode_full_tiles, int8_fast_decode=int8_fast_decode,
                                     int8_fast_values=int8_fast_values, fused_merge=fused_merge,
                                     dequantize_first=dequantize_first)
             for s in range(case.sets)]
    us = time_graph_us([c.run for c in calls], config.repeats)
    err = relative_error(calls[0].run(), case.truth)
    nbytes, flops = _shape_numbers(config, case, scheme)
    t = calls[0].tiling
    row = make_row(ctx, scheme=scheme, batch=case.kv.batch, context=case.kv.context, kind=kind,
                   query_len=case.query_len, us=us, nbytes=nbytes, err=err, flops=flops, sdpa=case.sdpa,
                   num_splits=t.num_splits, tile_n=t.tile_n, num_warps=t.num_warps, num_stages=t.num_stages,
                   max_registers=t.max_registers)
    del calls
    return row


def measure_sdpa(config: BenchConfig, ctx: RunContext, case: AttentionCase) -> list[BenchRow]:
    """Time both SDPA baselines on the case, store them on ``case.sdpa``, and return their own rows
    (``kind = "sdpa"``, ``backend`` naming the dispatch and the backend that ran)."""
    shape = SdpaShape(case.queries, case.kv.keys, case.kv.values, case.query_len, config.num_q_heads,
                      case.sets)
    case.sdpa, measured = sdpa_baselines(shape, config.repeats)
    b, L = case.kv.batch, case.kv.context
    nbytes = sdpa_bytes(batch=b, context=L, query_len=case.query_len, num_q_heads=config.num_q_heads,
                        num_kv_heads=config.num_kv_heads, head_size=config.head_size)
    _, flops = _shape_numbers(config, case, "bfloat16")
    rows = [make_row(ctx, scheme="bfloat16", batch=b, context=L, kind="sdpa", query_len=case.query_len, us=us,
                     nbytes=nbytes, err=relative_error(out, case.truth), flops=flops, sdpa=case.sdpa,
                     backend=f"torch-sdpa-{name}")
            for name, (us, out) in measured.items()]
    del shape, measured
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return rows
