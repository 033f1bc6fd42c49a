"""int4_per_token_head decodes on int8 tensor-core dots against the rule's bf16 dots.

The int8 path (``kernels/lowbit_int8_dot.py``, ``kernels/lowbit_int8_tile.py``) makes each code a
signed byte with one ``lop3`` per four codes, rounds the query (once) and ``p · v_scale`` (per tile)
to int8 per row, and computes the tile transposed (keys and channels as the dots' rows); offline, on
4 warps with 128-key tiles, it runs 793 loop instructions per warp and tile where the bf16 path runs
1,137 (``benchmarks/lowbit_compile_offline.py --new 1 --warps 4 --tile 128 --maxnreg 128 [--int8]
int4_per_token_head``), and its dots become Hopper's warp-group MMAs.
Variants, timed alternately (two rounds in opposite orders): ``rule`` (the library's launch),
``int8`` (the same launch shape with int8 dots) and, on full grids, int8 dots on 4 warps uncapped
with 128-key tiles (2 and 3 pipeline stages, 1 and 2 tiles a loop step) and 256-key tiles (unsplit,
and in 3 segments, which fill the waves of three 167-register programs per multiprocessor).
``INT8_AB_CASES`` (``"64x32768 ..."``) and ``INT8_AB_SHAPES`` replace the cases and the full-grid
shapes. Each row has the error against float64 attention on the unquantized K/V. Writes
``int4_int8_dot_ab.csv`` into the folder given as the first argument.

    PYTHONPATH=.:benchmarks python3 benchmarks/int4_int8_dot_ab.py "$OUT"
"""

import os

from decode_ab_cases import alternate, parse_shape, prepare_calls, print_best, run_grid

from kvlab.kernels.lowbit_attention_call import prepare_lowbit_attention

CASES = tuple(tuple(int(x) for x in c.split("x")) for c in
              os.environ.get("INT8_AB_CASES", "1x8192 1x32768 16x8192 64x8192 64x32768").split())
#: int8 launches tried on full grids: ``int8_`` and a launch shape name (``decode_ab_cases.parse_shape``)
_SHAPES = "int8_t128s1w4 int8_t128s1n3w4 int8_t128s1w4p2 int8_t256s1w4 int8_t256s3w4"
FULL_GRID = tuple(os.environ.get("INT8_AB_SHAPES", _SHAPES).split())
VARIANTS = ("rule", "int8") + FULL_GRID


def measure(ctx, config, case, scheme, cache, batches):
    rule = prepare_calls(case, scheme, cache, batches)
    variants = VARIANTS if rule[0].num_splits == 1 else VARIANTS[:2]

    def launches_for(variant):
        if variant == "rule":
            calls = prepare_calls(case, scheme, cache, batches)
        else:
            shape = dict(tile_n=rule[0].tile_n, num_splits=rule[0].num_splits, num_warps=rule[0].num_warps,
                         max_registers=rule[0].options.get("maxnreg"))
            if variant != "int8":
                shape = parse_shape(variant.removeprefix("int8_"))
            calls = [prepare_lowbit_attention(case.queries[s], cache, batches[s], int8_dots=True, **shape)
                     for s in range(case.sets)]
        return calls, [c.run for c in calls]

    return alternate(ctx, config, case, scheme, variants, launches_for)


def main() -> None:
    print_best(run_grid("int4_int8_dot_ab.csv", CASES, ("int4_per_token_head",), measure), VARIANTS)


if __name__ == "__main__":
    main()
