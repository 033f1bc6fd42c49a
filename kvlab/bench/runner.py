"""The benchmark cases: the decode grid, a prefill chunk, the cache write, torch SDPA, tiling sweeps."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch

from kvlab.bench.config import BenchConfig
from kvlab.bench.measure import copy_bandwidths_gbps, rotation_sets, time_graph_us
from kvlab.bench.results import BenchRow
from kvlab.bench.traffic import attention_bytes, attention_flops, sdpa_bytes, write_bytes
from kvlab.bench.workloads import DenseKV, paged_copies, random_kv, truth
from kvlab.cache.batch import AttentionBatch, cdiv
from kvlab.cache.example import build_paged_example
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.quantization.per_tensor import calibrate_scale
from kvlab.quantization.schemes import QuantMode, get_scheme
from kvlab.reference.attention import reference_attention
from kvlab.reference.metrics import relative_error


@dataclass(frozen=True)
class RunContext:
    """Facts of the run that every row repeats."""

    device: str
    copy_bw_gbps: float
    triton: str
    torch: str


def csv_name(device: str, prefix: str = "decode") -> str:
    """``decode_NVIDIA_H100_80GB_HBM3.csv`` for a device name."""
    return f"{prefix}_{re.sub(r'[^A-Za-z0-9]+', '_', device).strip('_')}.csv"


def gpu_context() -> RunContext:
    """Device name, measured copy bandwidth and versions (needs compiled Triton on a CUDA GPU)."""
    import triton

    ways = copy_bandwidths_gbps()
    torch.cuda.empty_cache()
    print("copy bandwidth, GB/s (read + written): " + ", ".join(f"{k} {v:.0f}" for k, v in ways.items()))
    return RunContext(torch.cuda.get_device_name(), max(ways.values()), triton.__version__, torch.__version__)


def _row(ctx: RunContext, *, scheme, batch, context, kind, query_len, us, nbytes, err, **extra) -> BenchRow:
    gbps = nbytes / us / 1e3
    pct = round(100.0 * gbps / ctx.copy_bw_gbps, 1) if ctx.copy_bw_gbps else float("nan")
    return BenchRow(scheme=scheme, batch=batch, context=context, kind=kind, query_len=query_len,
                    median_us=round(us, 2), bytes=nbytes, gbps=round(gbps, 1), pct_copy_bw=pct,
                    rel_err_truth=float(f"{err:.3e}"), device=ctx.device,
                    copy_bw_gbps=round(ctx.copy_bw_gbps, 1), triton=ctx.triton, torch=ctx.torch, **extra)


def _tiling_columns(call) -> dict:
    t = call.tiling
    return dict(num_splits=t.num_splits, tile_n=t.tile_n, num_warps=t.num_warps, num_stages=t.num_stages,
                max_registers=t.max_registers)


def _free() -> None:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


# -- attention -------------------------------------------------------------------------------------------


@dataclass(eq=False)
class _AttentionCase:
    kv: DenseKV
    queries: list[torch.Tensor]
    query_len: int
    truth: torch.Tensor
    sets: int


def _attention_case(config: BenchConfig, batch: int, context: int, query_len: int) -> _AttentionCase:
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
    return _AttentionCase(kv, queries, query_len, truth(queries[0], kv, meta), sets)


def _paged(config: BenchConfig, case: _AttentionCase, scheme: str):
    gen = torch.Generator(device="cuda").manual_seed(config.seed + 7)
    return paged_copies(scheme, case.kv, query_len=case.query_len, block_size=config.block_size,
                        sets=case.sets, gen=gen, rounding=config.rounding)


def measure_kvlab_attention(config: BenchConfig, ctx: RunContext, case: _AttentionCase, scheme: str, *,
                            kind: str, tiling=None, fp8_fast_decode: bool = True, paged=None) -> BenchRow:
    """Time kvlab's paged attention for one scheme on one case (inputs rotated past the L2)."""
    from kvlab.kernels.attention import prepare_paged_attention

    paged = paged or _paged(config, case, scheme)
    calls = [prepare_paged_attention(case.queries[s], paged.cache, paged.batches[s], tiling=tiling,
                                     fp8_fast_decode=fp8_fast_decode) for s in range(case.sets)]
    us = time_graph_us([c.run for c in calls], config.repeats)
    err = relative_error(calls[0].run(), case.truth)
    b, L = case.kv.batch, case.kv.context
    nbytes = attention_bytes(scheme, batch=b, context=L, query_len=case.query_len,
                             num_q_heads=config.num_q_heads, num_kv_heads=config.num_kv_heads,
                             head_size=config.head_size, block_size=config.block_size)
    flops = attention_flops(batch=b, context=L, query_len=case.query_len, num_q_heads=config.num_q_heads,
                            head_size=config.head_size)
    row = _row(ctx, scheme=scheme, batch=b, context=L, kind=kind, query_len=case.query_len, us=us,
               nbytes=nbytes, err=err, tflops=round(flops / us / 1e6, 2), **_tiling_columns(calls[0]))
    del calls
    return row


@contextlib.contextmanager
def _sdpa_backend(name: str) -> Iterator[None]:
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([getattr(SDPBackend, name)]):
        yield


def measure_sdpa(config: BenchConfig, ctx: RunContext, case: _AttentionCase) -> BenchRow:
    """torch SDPA on contiguous bf16 K/V ``[B, Hkv, L, D]`` with ``enable_gqa=True`` (no K/V copies).

    Tries the flash, then the memory-efficient, then the math backend; the one that ran is named in
    the ``backend`` column.
    """
    import torch.nn.functional as F

    b, L = case.kv.batch, case.kv.context
    dense = [case.kv] + [DenseKV(case.kv.keys.clone(), case.kv.values.clone()) for _ in range(case.sets - 1)]
    qshape = (b, case.query_len, config.num_q_heads, config.head_size)
    qs = [q.view(qshape).transpose(1, 2) for q in case.queries]
    chosen, out0 = None, None
    for name in ("FLASH_ATTENTION", "EFFICIENT_ATTENTION", "MATH"):
        try:
            with _sdpa_backend(name):
                out0 = F.scaled_dot_product_attention(qs[0], dense[0].keys, dense[0].values, enable_gqa=True)
            torch.cuda.synchronize()
            chosen = name
            break
        except RuntimeError:
            continue
    if chosen is None:
        raise RuntimeError("no SDPA backend ran this shape")

    def launch(s: int) -> Callable[[], object]:
        def fn():
            with _sdpa_backend(chosen):
                return F.scaled_dot_product_attention(qs[s], dense[s].keys, dense[s].values, enable_gqa=True)
        return fn

    us = time_graph_us([launch(s) for s in range(case.sets)], config.repeats)
    out = out0.transpose(1, 2).reshape(b * case.query_len, config.num_q_heads, config.head_size)
    err = relative_error(out, case.truth)
    nbytes = sdpa_bytes(batch=b, context=L, query_len=case.query_len, num_q_heads=config.num_q_heads,
                        num_kv_heads=config.num_kv_heads, head_size=config.head_size)
    row = _row(ctx, scheme="bfloat16", batch=b, context=L, kind="sdpa", query_len=case.query_len, us=us,
               nbytes=nbytes, err=err, backend=f"torch-sdpa-{chosen.lower()}")
    _free()
    return row


# -- cache write -----------------------------------------------------------------------------------------


def measure_write(config: BenchConfig, ctx: RunContext, scheme: str, tokens: int) -> BenchRow:
    """Time the Triton cache write of ``tokens`` tokens, and check it bit for bit on one set."""
    from kvlab.kernels.cache_write import launch_cache_write

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

    def fresh() -> PagedKVCache:
        return PagedKVCache.allocate(sch, num_blocks, bs, hkv, d, device="cuda",
                                     model_dtype=config.query_dtype, **scales)

    cache = fresh()
    saturated = torch.zeros(2 * tokens * hkv, dtype=torch.int32, device="cuda")
    launches = [lambda s=s: launch_cache_write(cache, ks[s], vs[s], slots[s], rounding=config.rounding,
                                               saturated=saturated) for s in range(sets)]
    us = time_graph_us(launches, config.repeats)
    tri = fresh()
    launch_cache_write(tri, ks[0], vs[0], slots[0], rounding=config.rounding)
    # the reference runs on the CPU, where its divisions are correctly rounded (see the tests)
    ref = PagedKVCache.allocate(sch, num_blocks, bs, hkv, d, device="cpu", model_dtype=config.query_dtype,
                                **scales)
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
    row = _row(ctx, scheme=scheme, batch=tokens, context=0, kind="write", query_len=tokens, us=us,
               nbytes=nbytes, err=err, bit_exact=exact)
    _free()
    return row


# -- whole runs ------------------------------------------------------------------------------------------


def _progress(total: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="case")


def run_gpu_benchmark(config: BenchConfig, ctx: RunContext | None = None) -> list[BenchRow]:
    """The decode grid (every scheme, and SDPA), one prefill chunk and the cache writes."""
    ctx = ctx or gpu_context()
    rows: list[BenchRow] = []
    per_case = len(config.schemes) + int(config.sdpa)
    total = (len(config.batches) * len(config.contexts) * per_case + len(config.schemes)
             + len(config.schemes) * len(config.write_tokens))
    with _progress(total, "kvlab bench") as bar:
        for context in config.contexts:
            for batch in config.batches:
                case = _attention_case(config, batch, context, 1)
                for scheme in config.schemes:
                    bar.set_postfix_str(f"decode {scheme} B={batch} L={context}")
                    rows.append(measure_kvlab_attention(config, ctx, case, scheme, kind="decode"))
                    _free()
                    bar.update()
                if config.sdpa:
                    bar.set_postfix_str(f"sdpa B={batch} L={context}")
                    rows.append(measure_sdpa(config, ctx, case))
                    bar.update()
                del case
                _free()
        case = _attention_case(config, 1, config.prefill_context, config.prefill_chunk)
        for scheme in config.schemes:
            bar.set_postfix_str(f"prefill {scheme}")
            rows.append(measure_kvlab_attention(config, ctx, case, scheme, kind="prefill"))
            _free()
            bar.update()
        del case
        _free()
        for tokens in config.write_tokens:
            for scheme in config.schemes:
                bar.set_postfix_str(f"write {scheme} T={tokens}")
                rows.append(measure_write(config, ctx, scheme, tokens))
                bar.update()
    return rows


def run_sweep(config: BenchConfig, cases: list[tuple[int, int]], tilings: dict, ctx: RunContext | None = None,
              fp8_decode_variants: bool = False) -> list[BenchRow]:
    """Time every tiling of ``tilings[(batch, context)]`` for every scheme of ``config``.

    Rows carry the tiling in their columns; ``backend`` says ``kvlab-triton-sweep`` (and
    ``-castdecode`` for the fp8 rows that use Triton's own fp8 → bf16 conversion).
    """
    ctx = ctx or gpu_context()
    rows: list[BenchRow] = []
    total = sum(len(tilings[c]) * len(config.schemes) for c in cases)
    with _progress(total, "kvlab sweep") as bar:
        for batch, context in cases:
            case = _attention_case(config, batch, context, 1)
            for scheme in config.schemes:
                paged = _paged(config, case, scheme)
                for tiling in tilings[(batch, context)]:
                    bar.set_postfix_str(f"{scheme} B={batch} L={context} {tiling}")
                    row = measure_kvlab_attention(config, ctx, case, scheme, kind="decode", tiling=tiling,
                                                  paged=paged)
                    row.backend = "kvlab-triton-sweep"
                    rows.append(row)
                    bar.write(_sweep_line(row))
                    bar.update()
                if fp8_decode_variants and get_scheme(scheme).storage_dtype == torch.float8_e4m3fn:
                    for tiling in tilings[(batch, context)][:2]:
                        row = measure_kvlab_attention(config, ctx, case, scheme, kind="decode", tiling=tiling,
                                                      fp8_fast_decode=False, paged=paged)
                        row.backend = "kvlab-triton-sweep-castdecode"
                        rows.append(row)
                        bar.write(_sweep_line(row))
                del paged
                _free()
            del case
            _free()
    return rows


def _sweep_line(r: BenchRow) -> str:
    return (f"sweep {r.scheme:<20} B={r.batch:<3} L={r.context:<6} tile={r.tile_n:<4} warps={r.num_warps} "
            f"stages={r.num_stages} splits={r.num_splits:<3} regs={r.max_registers} {r.median_us:9.1f} us "
            f"{r.gbps:7.0f} GB/s {r.pct_copy_bw:5.1f}% {r.backend}")


def run_interpreter_smoke(schemes: tuple[str, ...]) -> list[BenchRow]:
    """A tiny run of both kernels in Triton's interpreter: checks that everything runs and is
    accurate; its times are CPU interpreter times, not GPU numbers."""
    from kvlab.kernels import paged_attention, write_kv_cache

    ctx = RunContext("cpu (Triton interpreter)", 0.0, _triton_version(), torch.__version__)
    rows = []
    for scheme in schemes:
        ex = build_paged_example([1, 1], [40, 70], num_q_heads=8, num_kv_heads=2, head_size=64, scheme=scheme)
        t0 = time.perf_counter()
        out = paged_attention(ex.query, ex.cache, ex.batch)
        us = (time.perf_counter() - t0) * 1e6
        err = relative_error(out, reference_attention(ex.query, ex.keys, ex.values, ex.batch))
        nbytes = attention_bytes(scheme, batch=2, context=55, query_len=1, num_q_heads=8, num_kv_heads=2,
                                 head_size=64, block_size=16)
        rows.append(_row(ctx, scheme=scheme, batch=2, context=55, kind="decode", query_len=1, us=us,
                         nbytes=nbytes, err=err))
        k, v = ex.keys[0][:16], ex.values[0][:16]
        scales = dict(k_scale=ex.cache.k_scale, v_scale=ex.cache.v_scale)
        cache = PagedKVCache.allocate(scheme, 2, 16, 2, 64, **scales)
        t0 = time.perf_counter()
        write_kv_cache(cache, k, v, torch.arange(16))
        us = (time.perf_counter() - t0) * 1e6
        ref = PagedKVCache.allocate(scheme, 2, 16, 2, 64, **scales)
        ref.write(k, v, torch.arange(16))
        exact = torch.equal(cache.key.view(torch.uint8), ref.key.view(torch.uint8)) and torch.equal(
            cache.value.view(torch.uint8), ref.value.view(torch.uint8))
        kd, _ = cache.dequantize()
        err = relative_error(kd.view(32, 2, 64)[:16], k)
        rows.append(_row(ctx, scheme=scheme, batch=16, context=0, kind="write", query_len=16, us=us,
                         nbytes=write_bytes(scheme, tokens=16, num_kv_heads=2, head_size=64), err=err,
                         bit_exact=exact))
    return rows


def _triton_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return ""
