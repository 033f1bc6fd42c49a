"""Where a short decode's fixed cost goes: the attention kernel, the split-K merge, the launches.

A decode's time is close to ``F + bytes / R`` (``kernel_notes.md``, round 11). This script takes
``F`` apart on the GPU, for each case and scheme below, with four timings of the same prepared calls
(CUDA-graph replays, inputs rotated past the L2 as in ``kvlab bench``):

* ``full``: the call as the library runs it (attention kernel, then the merge kernel if split);
* ``attention``: the attention kernel alone (its partials are written, nobody merges them);
* ``merge``: the merge kernel alone, over the partials the attention kernel left;
* ``empty``: an empty kernel launched on the attention kernel's grid, as often as the calls launch
  kernels (the floor of launching and retiring that grid inside a graph).

Writes ``decode_fixed_cost.csv`` into the folder given as the first argument (default ``.``) and
prints one line per case and scheme.

    PYTHONPATH=.:benchmarks python3 benchmarks/decode_fixed_cost.py "$OUT"
"""

import dataclasses

from decode_ab_cases import decode_bytes, prepare_calls, run_grid

from kvlab.bench.measure import time_graph_us
from kvlab.kernels.runtime import tl, triton
from kvlab.kernels.split_reduce import launch_split_reduce

CASES = ((1, 1024), (1, 8192), (1, 32768), (16, 8192), (64, 1024))
SCHEMES = ("bfloat16", "int8_per_token_head", "fp8_e4m3", "int4_per_token_head", "kivi2")


@triton.jit
def _empty_kernel(x_ptr, N: tl.constexpr):
    # does nothing: its graph replay is the cost of launching and retiring a grid of this shape
    if tl.program_id(0) < 0:
        tl.store(x_ptr, N)


def variant_launches(calls, variant):
    """Callables that launch ``variant`` of each prepared call."""
    launches = []
    for call in calls:
        launch = call._launch
        if variant == "full":
            launches.append(call.run)
        elif variant == "attention":
            launches.append(dataclasses.replace(launch, fused_merge=True))  # skips the merge kernel
        elif variant == "merge":
            def merge(launch=launch):
                launch_split_reduce(launch.out, launch.part_acc, launch.part_stat, launch.out_scale,
                                    launch.consts["OUT_DTYPE"])
            launches.append(merge)
        else:
            def empty(launch=launch):
                _empty_kernel[launch.grid](launch.out, 1, num_warps=launch.options["num_warps"])
            launches.append(empty)
    return launches


def main() -> None:
    def measure(ctx, config, case, scheme, cache, batches):
        batch, context = case.kv.batch, case.kv.context
        calls = prepare_calls(case, scheme, cache, batches)
        splits = calls[0]._launch.grid[1]
        floor_us = decode_bytes(config, scheme, batch, context) / ctx.copy_bw_gbps / 1e3
        row = dict(device=ctx.device, batch=batch, context=context, scheme=scheme,
                   grid=calls[0]._launch.grid[0] * splits, num_splits=splits,
                   copy_floor_us=round(floor_us, 2))
        for variant in ("full", "attention", "merge", "empty"):
            skip = variant == "merge" and splits == 1
            us = 0.0 if skip else time_graph_us(variant_launches(calls, variant), config.repeats)
            row[f"{variant}_us"] = round(us, 2)
        row["pct_copy_bw"] = round(100 * row["copy_floor_us"] / row["full_us"], 1)
        return [row]

    run_grid("decode_fixed_cost.csv", CASES, SCHEMES, measure)


if __name__ == "__main__":
    main()
