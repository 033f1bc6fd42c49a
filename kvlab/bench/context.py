"""Facts of one benchmark run (device, ceilings, versions) and how a measured row is filled in.

Every row is compared with three baselines measured in the same run and named in its own columns:

* the **physical floor**: the larger of ``bytes / copy bandwidth`` and ``FLOPs / matrix-product
  rate``, both ceilings measured on the device at the start of the run (``floor_us``, ``pct_floor``);
* **torch SDPA, default dispatch**: whatever backend torch picks for the same shape
  (``sdpa_default_us``, ``sdpa_default_backend``, ``x_sdpa_default``);
* **torch SDPA, flash forced** (``sdpa_flash_us``, ``x_sdpa_flash``).

The two SDPA baselines read contiguous bf16 K/V, so they are not paged and not quantized: they say
what a dense kernel does with the same attention, not what a serving engine's kernel does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kvlab.bench.results import BenchRow


@dataclass(frozen=True)
class RunContext:
    """Facts of the run that every row repeats.

    Attributes:
        device: GPU name.
        copy_bw_gbps: device-to-device copy bandwidth, GB/s (read + written bytes).
        peak_tflops: bf16 matrix-product rate, TFLOP/s (0 when not measured).
        triton, torch: versions.
    """

    device: str
    copy_bw_gbps: float
    triton: str
    torch: str
    peak_tflops: float = 0.0


@dataclass(frozen=True)
class SdpaBaselines:
    """The two SDPA times of one shape (µs); ``None`` where that backend refused the shape."""

    default_us: float | None
    default_backend: str
    flash_us: float | None


def csv_name(device: str, prefix: str = "decode") -> str:
    """``decode_NVIDIA_H100_80GB_HBM3.csv`` for a device name."""
    return f"{prefix}_{re.sub(r'[^A-Za-z0-9]+', '_', device).strip('_')}.csv"


def gpu_context() -> RunContext:
    """Device name, measured copy bandwidth and matrix rate, versions (needs a CUDA GPU)."""
    import torch
    import triton

    from kvlab.bench.measure import copy_bandwidths_gbps, matmul_tflops

    ways = copy_bandwidths_gbps()
    torch.cuda.empty_cache()
    peak = matmul_tflops()
    torch.cuda.empty_cache()
    print("copy bandwidth, GB/s (read + written): " + ", ".join(f"{k} {v:.0f}" for k, v in ways.items()))
    print(f"bf16 matrix product (8192³, cuBLAS): {peak:.0f} TFLOP/s")
    return RunContext(torch.cuda.get_device_name(), max(ways.values()), triton.__version__, torch.__version__,
                      peak)


def floor_us(ctx: RunContext, nbytes: int, flops: int = 0) -> float | None:
    """The physical floor of a call moving ``nbytes`` and doing ``flops``, µs (None without ceilings)."""
    if not ctx.copy_bw_gbps:
        return None
    t = nbytes / ctx.copy_bw_gbps / 1e3
    if flops and ctx.peak_tflops:
        t = max(t, flops / ctx.peak_tflops / 1e6)
    return t


def _ratio(us: float, base: float | None) -> float | None:
    return None if base is None else round(us / base, 3)


def make_row(ctx: RunContext, *, scheme: str, batch: int, context: int, kind: str, query_len: int, us: float,
             nbytes: int, err: float, flops: int = 0, sdpa: SdpaBaselines | None = None, **extra) -> BenchRow:
    """A result row with its bandwidth, floor and (when given) SDPA comparisons filled in."""
    gbps = nbytes / us / 1e3
    pct = round(100.0 * gbps / ctx.copy_bw_gbps, 1) if ctx.copy_bw_gbps else float("nan")
    floor = floor_us(ctx, nbytes, flops)
    if flops:
        extra.setdefault("tflops", round(flops / us / 1e6, 2))
    if sdpa is not None:
        extra.update(sdpa_default_us=None if sdpa.default_us is None else round(sdpa.default_us, 2),
                     sdpa_default_backend=sdpa.default_backend,
                     sdpa_flash_us=None if sdpa.flash_us is None else round(sdpa.flash_us, 2),
                     x_sdpa_default=_ratio(us, sdpa.default_us), x_sdpa_flash=_ratio(us, sdpa.flash_us))
    return BenchRow(scheme=scheme, batch=batch, context=context, kind=kind, query_len=query_len,
                    median_us=round(us, 2), bytes=nbytes, gbps=round(gbps, 1), pct_copy_bw=pct,
                    rel_err_truth=float(f"{err:.3e}"), device=ctx.device,
                    copy_bw_gbps=round(ctx.copy_bw_gbps, 1),
                    floor_us=None if floor is None else round(floor, 2),
                    pct_floor=None if floor is None else round(100.0 * floor / us, 1),
                    peak_tflops=round(ctx.peak_tflops, 1) if ctx.peak_tflops else None,
                    triton=ctx.triton, torch=ctx.torch, **extra)
