"""Split decode: key loops with and without the hint that tile numbers are never negative.

A split segment's first tile is known only at run time, so without the hint the compiler computes
each key's block and offset in it as a signed division (``split_decode_rules.NONNEGATIVE_TILE_HINT``;
offline for sm_90 an int8 decode step takes 1,884 instructions without it, 1,572 with it). Both
variants run the same kernel (``TILES_NONNEGATIVE`` on or off), timed alternately, two rounds in
opposite orders, every output compared bit for bit with ``no_hint``'s. Writes ``tile_hint_ab.csv``
into the folder given as the first argument (default ``.``).

    PYTHONPATH=.:benchmarks python3 benchmarks/tile_hint_ab.py "$OUT"
"""

from decode_ab_cases import constexpr_ab

CASES = ((1, 1024), (1, 8192), (1, 32768), (4, 8192), (16, 1024), (16, 8192), (16, 32768))
SCHEMES = ("bfloat16", "int8_per_token_head", "fp8_per_token_head", "fp8_e4m3")
VARIANTS = ("no_hint", "hint")


def main() -> None:
    constexpr_ab("tile_hint_ab.csv", CASES, SCHEMES, VARIANTS, "TILES_NONNEGATIVE",
                 lambda variant, launch: variant == "hint" and launch.grid[1] > 1)


if __name__ == "__main__":
    main()
