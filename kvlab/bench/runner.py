"""Whole benchmark runs: the decode grid, the prefill cases and the cache writes with their baselines;
tuning sweeps; and a tiny smoke test in Triton's interpreter."""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from kvlab.bench.attention_cases import attention_case, measure_kvlab_attention, measure_sdpa, paged
from kvlab.bench.config import BenchConfig
from kvlab.bench.context import RunContext, gpu_context, make_row
from kvlab.bench.results import BenchRow
from kvlab.bench.sweeps import Sweep
from kvlab.bench.traffic import attention_bytes, write_bytes
from kvlab.bench.write_case import measure_write
from kvlab.cache.example import build_paged_example
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.reference.attention import reference_attention
from kvlab.reference.metrics import relative_error


def _free() -> None:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def _progress(total: int, desc: str):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, unit="case")


def _attention_shapes(config: BenchConfig) -> list[tuple[str, int, int, int]]:
    """``(kind, batch, context, query_len)`` of every attention case of a run."""
    shapes = [("decode", b, L, 1) for L in config.contexts for b in config.batches]
    return shapes + [("prefill", 1, total, chunk) for chunk, total in config.prefill]


class _Rows(list):
    """Rows that call ``on_row(rows)`` after every append (to save partial results as they come)."""

    def __init__(self, on_row: Callable[[list[BenchRow]], None] | None):
        super().__init__()
        self._on_row = on_row

    def append(self, row: BenchRow) -> None:
        super().append(row)
        if self._on_row is not None:
            self._on_row(self)

    def extend(self, rows) -> None:
        for r in rows:
            self.append(r)


def run_gpu_benchmark(config: BenchConfig, ctx: RunContext | None = None,
                      on_row: Callable[[list[BenchRow]], None] | None = None) -> list[BenchRow]:
    """Every attention shape (SDPA's two baselines first, then every scheme) and the cache writes.

    ``on_row(rows_so_far)`` is called after each row (the CLI saves the CSV as it grows)."""
    ctx = ctx or gpu_context()
    rows = _Rows(on_row)
    shapes = _attention_shapes(config)
    total = (len(shapes) * (len(config.schemes) + int(config.sdpa))
             + len(config.schemes) * len(config.write_tokens))
    with _progress(total, "kvlab bench") as bar:
        for kind, batch, context, query_len in shapes:
            case = attention_case(config, batch, context, query_len)
            if config.sdpa:
                bar.set_postfix_str(f"sdpa {kind} B={batch} L={context}")
                rows.extend(measure_sdpa(config, ctx, case))
                bar.update()
            for scheme in config.schemes:
                bar.set_postfix_str(f"{kind} {scheme} B={batch} L={context}")
                rows.append(measure_kvlab_attention(config, ctx, case, scheme, kind=kind))
                _free()
                bar.update()
            del case
            _free()
        for tokens in config.write_tokens:
            for scheme in config.schemes:
                bar.set_postfix_str(f"write {scheme} T={tokens}")
                rows.append(measure_write(config, ctx, scheme, tokens))
                bar.update()
    return list(rows)


def run_sweep(config: BenchConfig, sweep: Sweep, ctx: RunContext | None = None,
              on_row: Callable[[list[BenchRow]], None] | None = None) -> list[BenchRow]:
    """Time every candidate launch shape of ``sweep`` side by side (``backend = kvlab-triton-sweep``).

    Attention candidates carry their tiling in the row's columns; write candidates their rows per
    program in ``tile_n``. The automatic choice is timed too (``backend = kvlab-triton``), so each
    case shows the rule against its alternatives in one run. Attention cases of a kind the config
    leaves out (no decode batches, no prefill cases: ``kvlab bench --sweep --parts decode``) are
    skipped.
    """
    ctx = ctx or gpu_context()
    rows = _Rows(on_row)
    # the config's parts: a decode case needs decode batches in the config, a prefill case prefill cases
    wanted = {"decode": bool(config.batches), "prefill": bool(config.prefill)}
    cases = {case: c for case, c in sweep.attention.items() if wanted.get(case[0], True)}
    total = sum((len(c) + 1) * len(sweep.schemes_for(case[0], config.schemes)) for case, c in cases.items())
    total += sum(len(v) + 1 for v in sweep.write.values())
    with _progress(total, "kvlab sweep") as bar:
        for (kind, batch, context, query_len), candidates in cases.items():
            case = attention_case(config, batch, context, query_len)
            for scheme in sweep.schemes_for(kind, config.schemes):
                sets = paged(config, case, scheme)
                for cand in (None, *candidates):
                    if cand is not None and not cand.fp8_fast_decode and "fp8" not in scheme:
                        continue  # the fp8 decoding path only matters to fp8 caches
                    int8_option = cand is not None and (not cand.int8_fast_decode
                                                        or cand.int8_fast_values is not None)
                    if int8_option and not scheme.startswith("int8"):
                        continue  # the int8 conversion only matters to int8 caches
                    if cand is not None and cand.fp8_half_dots and scheme not in ("fp8_e4m3", "fp8_e5m2"):
                        continue  # fp16 dots are a per-tensor fp8 option
                    row = measure_kvlab_attention(
                        config, ctx, case, scheme, kind=kind, tiling=cand and cand.tiling,
                        fp8_fast_decode=cand is None or cand.fp8_fast_decode,
                        fp8_half_dots=cand is not None and cand.fp8_half_dots,
                        decode_full_tiles=cand.decode_full_tiles if cand is not None else None,
                        int8_fast_decode=cand is None or cand.int8_fast_decode,
                        int8_fast_values=cand.int8_fast_values if cand is not None else None,
                        fused_merge=cand.fused_merge if cand is not None else None, paged_sets=sets)
                    if cand is not None:
                        row.backend = cand.backend(kind)
                    rows.append(row)
                    bar.write(_sweep_line(row))
                    bar.update()
                del sets
                _free()
            del case
            _free()
        for (scheme, tokens), candidates in sweep.write.items():
            for rpp in (None, *candidates):
                row = measure_write(config, ctx, scheme, tokens, rows_per_program=rpp)
                rows.append(row)
                bar.write(_sweep_line(row))
                bar.update()
    return list(rows)


def _sweep_line(r: BenchRow) -> str:
    return (f"sweep {r.kind:<7} {r.scheme:<20} B={r.batch:<5} L={r.context:<6} q={r.query_len:<5} "
            f"tile={r.tile_n} warps={r.num_warps} stages={r.num_stages} splits={r.num_splits} "
            f"regs={r.max_registers} {r.median_us:9.1f} us {r.pct_copy_bw:5.1f}% copy "
            f"{r.tflops if r.tflops is not None else '':>7} TF/s {r.backend}")


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
        rows.append(make_row(ctx, scheme=scheme, batch=2, context=55, kind="decode", query_len=1, us=us,
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
        rows.append(make_row(ctx, scheme=scheme, batch=16, context=0, kind="write", query_len=16, us=us,
                             nbytes=write_bytes(scheme, tokens=16, num_kv_heads=2, head_size=64), err=err,
                             bit_exact=exact))
    return rows


def _triton_version() -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return ""
