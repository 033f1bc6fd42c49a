"""Decode: segments cut from each sequence's own length, or of one fixed size per launch.

With fixed-size segments (``split_decode_rules.FIXED_DECODE_SEGMENTS``) a program knows its first key
tile from its segment number alone, so it loads that tile's block ids beside the sequence's length
instead of after it: one round trip to memory fewer before the first K/V bytes are asked for. The
unsplit decodes (B=64 here) are timed with it forced on too (one segment per sequence, starting at
its first tile); the rule leaves them without it, since that measured slower. Both
variants run the same kernel (``FIXED_SEGMENTS`` on or off), timed alternately, two rounds in
opposite orders, every output compared bit for bit with ``per_sequence``'s. Writes
``fixed_segments_ab.csv`` into the folder given as the first argument (default ``.``).

    PYTHONPATH=.:benchmarks python3 benchmarks/fixed_segments_ab.py "$OUT"
"""

from decode_ab_cases import constexpr_ab

CASES = ((1, 1024), (1, 8192), (1, 32768), (4, 8192), (16, 8192), (16, 32768), (64, 1024), (64, 8192),
         (64, 32768))
SCHEMES = ("bfloat16", "int8_per_token_head", "fp8_per_token_head", "fp8_e4m3")
VARIANTS = ("per_sequence", "fixed")


def main() -> None:
    constexpr_ab("fixed_segments_ab.csv", CASES, SCHEMES, VARIANTS, "FIXED_SEGMENTS",
                 lambda variant, launch: variant == "fixed")


if __name__ == "__main__":
    main()
