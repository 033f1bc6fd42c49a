"""Does the benchmark's clock start before the GPU has the work? Three ways to time one graph replay.

``kvlab.bench.measure`` times each replay of a case's CUDA graph between two events, after a host
synchronisation. The start event then runs on an idle GPU at once, and the replay's kernels only
start when the host has submitted the graph: if that submission takes microseconds, they are
counted as the kernels' time. This script times the same graphs three ways, alternately:

* ``per_replay``: the benchmark's way (:func:`kvlab.bench.measure.time_graph_us`);
* ``behind_sleep``: the same, with a ~50 µs GPU spin enqueued before the start event, so the graph
  is submitted while the GPU still spins and the interval holds only the replay's GPU work;
* ``back_to_back``: ``BURST`` replays between two events, divided by ``BURST`` (each replay's
  submission overlaps the previous replay's work).

Cases: short and long decodes of five schemes, and an empty kernel (its graph's launch floor).
Writes ``timing_method_ab.csv`` into the folder given as the first argument (default ``.``).

    PYTHONPATH=.:benchmarks python3 benchmarks/timing_method_ab.py "$OUT"
"""

import statistics

import torch
from decode_ab_cases import decode_bytes, prepare_calls, run_grid
from decode_fixed_cost import variant_launches

from kvlab.bench.measure import capture_graph, time_graph_us, warm_up

CASES = ((1, 1024), (1, 8192), (1, 32768), (16, 8192), (64, 1024), (64, 32768))
SCHEMES = ("bfloat16", "int8_per_token_head", "fp8_e4m3", "int4_per_token_head", "kivi2")
BURST = 10
SPIN_CYCLES = 100_000  # ~50 µs at the H100's clock


def time_events(graph, per_sample: int, spin: bool, repeats: int) -> float:
    warm_up(graph.replay, 3)
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if spin:
            torch.cuda._sleep(SPIN_CYCLES)
        start.record()
        for _ in range(per_sample):
            graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) * 1000.0 / per_sample)
    return statistics.median(samples)


def methods(launches, repeats: int) -> dict[str, float]:
    n = len(launches)
    graph = capture_graph(launches)
    out = {}
    for rnd in range(2):
        order = ("per_replay", "behind_sleep", "back_to_back")
        for m in order if rnd == 0 else order[::-1]:
            if m == "per_replay":
                us = time_graph_us(launches, repeats)
            else:
                us = time_events(graph, BURST if m == "back_to_back" else 1, m == "behind_sleep", repeats) / n
            out[m] = min(out.get(m, float("inf")), us)
    del graph
    return {k: round(v, 2) for k, v in out.items()}


def main() -> None:
    def measure(ctx, config, case, scheme, cache, batches):
        batch, context = case.kv.batch, case.kv.context
        calls = prepare_calls(case, scheme, cache, batches)
        floor = decode_bytes(config, scheme, batch, context) / ctx.copy_bw_gbps / 1e3
        rows = []
        for variant in ("full", "empty"):
            row = dict(device=ctx.device, batch=batch, context=context, scheme=scheme, variant=variant,
                       sets=case.sets, num_splits=calls[0]._launch.grid[1])
            row.update(methods(variant_launches(calls, variant), config.repeats))
            if variant == "full":
                row.update({f"pct_copy_{k}": round(100 * floor / v, 1) for k, v in list(row.items())
                            if k in ("per_replay", "behind_sleep", "back_to_back")})
            rows.append(row)
        return rows

    run_grid("timing_method_ab.csv", CASES, SCHEMES, measure)


if __name__ == "__main__":
    main()
