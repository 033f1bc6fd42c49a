"""Split 1-byte decodes: 128-key tiles, or 64-key tiles when each segment holds only a few.

A one-wave split decode ends on every program's last tile, converted and multiplied with nothing left
to load (``kernel_notes.md``, round 13). With 64-key tiles that last step is half as long, at the
price of twice the loop steps. Measured first on the grids of round 13's other A/B runs: B=1,
L=32768 (segments of 4 tiles of 128 keys) 2-3% faster, B=16, L=8192 (16 tiles) 7-12% slower. This
script finds where the one turns into the other: the library's split count with 128-key tiles
(``t128``), and the same split count with 64-key tiles (``t64``), on cases whose segments hold 2 to 32
tiles of 128 keys, alternately, two rounds in opposite orders. Writes ``short_segment_tile_ab.csv``
into the folder given as the first argument (default ``.``). With ``--small`` after it, the short
cases only, with 32-key tiles as well (``short_segment_tile_small_ab.csv``).

    PYTHONPATH=.:benchmarks python3 benchmarks/short_segment_tile_ab.py "$OUT" [--small]
"""

import dataclasses
import sys

from decode_ab_cases import alternate, print_best, run_grid

from kvlab.kernels.attention import prepare_paged_attention

#: (B, L) with the segments' tiles of 128 keys under the library's split count in the comment
CASES = ((1, 16384), (2, 8192),  # 2 tiles
         (1, 32768), (4, 8192),  # 4
         (1, 65536), (2, 32768), (4, 16384), (8, 8192),  # 8
         (16, 8192), (8, 32768))  # 16, 32
SCHEMES = ("int8_per_token_head", "fp8_e4m3", "fp8_per_token_head")
VARIANTS = ("t128", "t64")
SMALL_CASES = ((1, 8192), (1, 16384), (2, 8192), (1, 32768), (4, 8192))
SMALL_VARIANTS = ("t128", "t64", "t32")


def measure(ctx, config, case, scheme, cache, batches, variants=VARIANTS):
    def launches_for(variant):
        calls = []
        for s in range(case.sets):
            rule = prepare_paged_attention(case.queries[s], cache, batches[s]).tiling
            tiling = dataclasses.replace(rule, tile_n=int(variant[1:]), num_splits=rule.num_splits)
            calls.append(prepare_paged_attention(case.queries[s], cache, batches[s], tiling=tiling))
        return calls, [c.run for c in calls]

    return alternate(ctx, config, case, scheme, variants, launches_for)


def main() -> None:
    if "--small" in sys.argv[2:]:
        def small(*args):
            return measure(*args, variants=SMALL_VARIANTS)
        print_best(run_grid("short_segment_tile_small_ab.csv", SMALL_CASES, SCHEMES, small), SMALL_VARIANTS)
    else:
        print_best(run_grid("short_segment_tile_ab.csv", CASES, SCHEMES, measure), VARIANTS)


if __name__ == "__main__":
    main()
