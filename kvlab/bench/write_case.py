"""The cache-write case of the benchmark: quantize-on-write of many tokens into shuffled slots."""

from __future__ import annotations

import torch

from kvlab.bench.config import BenchConfig
from kvlab.bench.context import RunContext, make_row
from kvlab.bench.measure import rotation_sets, time_graph_us
from kvlab.bench.results import BenchRow
from kvlab.bench.traffic import write_bytes
from kvlab.cache.batch import cdiv
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.quantization.per_tensor import calibrate_scale
from kvlab.quantization.schemes import QuantMode, get_scheme
from kvlab.reference.metrics import relative_error


def measure_write(config: BenchConfig, ctx: RunContext, scheme: str, tokens: int, *,
                  rows_per_program: int | None = None) -> BenchRow:
    """Time the Triton cache write of ``tokens`` tokens, and check it bit for bit on one set.

    The only baseline of a write is the physical floor (bytes / copy bandwidth): SDPA does not write
    caches. ``rows_per_program`` overrides the kernel's (token, head) rows per program (tuning).
    """
    from kvlab.kernels.cache_write import launch_cache_write
    from kvlab.kernels.launch_config import write_rows_per_program

    gen = torch.Generator(device="cuda").manual_seed(config.seed + tokens)
    hkv, d, bs = config.num_kv_heads, config.head_size, config.block_size
    nbytes = write_bytes(scheme, tokens=tokens, num_kv_heads=hkv, head_size=d)
    sets = rotation_sets(nbytes, config.l2_multiple)
    shape = (tokens, hkv, d)
    ks = [torch.randn(shape, generator=gen, device="cuda").to(config.query_dtype) for _ in range(sets)]
    vs = [torch.randn(shape, generator=gen, device="cuda").to(config.query_dtype) for _ in range(sets)]
    num_blocks = cdiv(sets * tokens, bs) + 1
    slots = torch.randperm(num_blocks * bs, generator=gen, device="cuda")[: sets * tokens].view(sets, tokens)
    sch = get_scheme(scheme, config.query_dtype)
    scales = {}
    if sch.mode == QuantMode.FP8_PER_TENSOR:
        scales = dict(k_scale=calibrate_scale(ks[0], sch), v_scale=calibrate_scale(vs[0], sch))

    def fresh(device: str = "cuda") -> PagedKVCache:
        return PagedKVCache.allocate(sch, num_blocks, bs, hkv, d, device=device,
                                     model_dtype=config.query_dtype, **scales)

    cache = fresh()
    saturated = torch.zeros(2 * tokens * hkv, dtype=torch.int32, device="cuda")
    opts = dict(rounding=config.rounding, saturated=saturated, rows_per_program=rows_per_program)
    launches = [lambda s=s: launch_cache_write(cache, ks[s], vs[s], slots[s], **opts) for s in range(sets)]
    us = time_graph_us(launches, config.repeats)
    tri = fresh()
    launch_cache_write(tri, ks[0], vs[0], slots[0], rounding=config.rounding,
                       rows_per_program=rows_per_program)
    # the reference runs on the CPU, where its divisions are correctly rounded (see the tests)
    ref = fresh("cpu")
    ref.write(ks[0].cpu(), vs[0].cpu(), slots[0].cpu(), rounding=config.rounding)
    exact = all(
        torch.equal(a.cpu().view(torch.uint8), b.view(torch.uint8))
        for a, b in ((tri.key, ref.key), (tri.value, ref.value), (tri.key_scale, ref.key_scale),
                     (tri.value_scale, ref.value_scale)) if a is not None
    )
    per_slot = tri.num_slots
    k_deq, v_deq = tri.dequantize(torch.float64)
    k_rows = k_deq.view(per_slot, hkv, d)[slots[0]]
    v_rows = v_deq.view(per_slot, hkv, d)[slots[0]]
    err = relative_error(torch.cat([k_rows, v_rows]), torch.cat([ks[0], vs[0]]))
    row = make_row(ctx, scheme=scheme, batch=tokens, context=0, kind="write", query_len=tokens, us=us,
                   nbytes=nbytes, err=err, bit_exact=exact,
                   backend="kvlab-triton" if rows_per_program is None else "kvlab-triton-sweep",
                   tile_n=rows_per_program or write_rows_per_program(hkv, d))
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return row
