"""Timing on the GPU, and the bandwidth ceiling the timings are compared with.

Times are medians of CUDA-graph replays: the launches of one case are captured once, so Python
and launch overhead stay out of the numbers (as they would in a serving engine that replays graphs),
and each replay is timed with CUDA events. Inputs smaller than a few L2 caches are rotated over
copies inside the graph, so a replay does not just re-read the L2.

**Warm-up is measured in time, not in replays.** Right after the host has been busy (building a
paged cache, freeing memory), the first tens of milliseconds of a compute-heavy kernel run slow: on
an H100 a per-tensor fp8 decode at B=64, L=32768 timed 1,806-1,812 µs in the first timing of a
fresh call and 1,535-1,556 µs in the timings after it on the same call, with 3 warm-up replays
(5 ms); an int8 per-token-head one on the same data did not change (1,625-1,643 µs). So every timing
first replays for at least :data:`MIN_WARMUP_S` seconds. That measures the steady state of a busy
GPU, where compute-bound kernels run at a lower clock than in a short burst: cuBLAS's bf16 product
gave 642-712 TFLOP/s this way and 790-794 after 3 replays, on the same H100.

**The clock starts before the GPU has the work.** Each replay is timed from an event recorded on an
idle GPU, while the host is still submitting the graph. Its first kernel starts before the rest is
submitted, so on an H100 this added 0-3% to short and mid-sized decodes and nothing measurable to
long ones (``benchmarks/timing_method_ab.py``); every row, baselines included, is timed alike.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import torch

#: untimed replays (or launches) before every timing run for at least this long, in seconds
MIN_WARMUP_S = 0.2


def warm_up(step: Callable[[], object], count: int) -> None:
    """Run ``step`` at least ``count`` times and for at least :data:`MIN_WARMUP_S` seconds of GPU time."""
    start, done = time.perf_counter(), 0
    while done < count or time.perf_counter() - start < MIN_WARMUP_S:
        step()
        done += 1
        if done % 8 == 0:  # keep the host within a few launches of the GPU, so the clock reads GPU time
            torch.cuda.synchronize()
    torch.cuda.synchronize()


def time_graph_us(launches: Sequence[Callable[[], object]], repeats: int, warmup: int = 3) -> float:
    """Median microseconds per launch of ``launches``, replayed as one CUDA graph.

    Args:
        launches: callables that only launch GPU work (no host synchronisation); one replay runs
            them all once, in order (rotation over input copies).
        repeats: timed replays.
        warmup: untimed replays first (at least; they go on for :data:`MIN_WARMUP_S` seconds).

    A library call that cannot be captured in a graph (some cuDNN paths) is timed without one instead
    (:func:`time_eager_us`), which includes its launch overhead.
    """
    try:
        return _time_graph_us(launches, repeats, warmup)
    except RuntimeError:
        torch.cuda.synchronize()
        return time_eager_us(launches, repeats, warmup)


def time_eager_us(launches: Sequence[Callable[[], object]], repeats: int, warmup: int = 3) -> float:
    """Median microseconds per launch, launched eagerly between two CUDA events (no graph)."""

    def launch_all() -> None:
        for fn in launches:
            fn()

    warm_up(launch_all, warmup)
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for fn in launches:
            fn()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0 / len(launches))
    return statistics.median(samples)


def capture_graph(launches: Sequence[Callable[[], object]]) -> torch.cuda.CUDAGraph:
    """One CUDA graph that runs ``launches`` once, in order (each is run twice before the capture, on
    the current and on a side stream, so that Triton compiles and modules load outside it)."""
    for fn in launches:
        fn()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for fn in launches:
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for fn in launches:
            fn()
    return graph


def _time_graph_us(launches: Sequence[Callable[[], object]], repeats: int, warmup: int) -> float:
    graph = capture_graph(launches)
    warm_up(graph.replay, warmup)
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0 / len(launches))
    del graph
    return statistics.median(samples)


def copy_bandwidths_gbps(nbytes: int = 2 << 30, repeats: int = 20) -> dict[str, float]:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written, three ways.

    ``memcpy``: ``Tensor.copy_`` (a memcpy node in the graph); ``kernel``: an elementwise kernel on
    the multiprocessors (``torch.neg`` into another tensor: one read, one write per element);
    ``memcpy_eager``: the same memcpy outside a graph, timed with events. The best of the three is the
    ceiling a memory-bound kernel is measured against (datasheet numbers are reached by nothing).
    """
    src = torch.randn(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    out = {
        "memcpy": time_graph_us([lambda: dst.copy_(src)], repeats),
        "kernel": time_graph_us([lambda: torch.neg(src, out=dst)], repeats),
    }
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        dst.copy_(src)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0)
    out["memcpy_eager"] = statistics.median(samples)
    return {k: 2 * nbytes / us / 1e3 for k, us in out.items()}


def matmul_tflops(n: int = 8192, repeats: int = 20) -> float:
    """Measured bf16 matrix-product rate in TFLOP/s: an ``n × n × n`` product through torch (cuBLAS),
    on N(0, 1) inputs (zeros run faster than real data). The compute ceiling of the physical floor."""
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    us = time_graph_us([lambda: torch.mm(a, b, out=c)], repeats)
    return 2.0 * n**3 / us / 1e6


def l2_bytes() -> int:
    """L2 cache size of the current GPU in bytes (50 MB on an H100 SXM if the driver hides it)."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    return int(getattr(props, "L2_cache_size", 0) or 50 * 2**20)


def rotation_sets(nbytes_per_set: int, l2_multiple: int, cap: int = 32) -> int:
    """Copies of the inputs to rotate over so that one replay touches ``l2_multiple`` × L2 bytes."""
    need = -(-(l2_multiple * l2_bytes()) // max(nbytes_per_set, 1))
    return max(1, min(cap, need))
