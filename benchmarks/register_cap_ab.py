"""Short 1-byte decodes with more programs on each multiprocessor: register caps below 128.

Under the rule's cap of 128 registers a thread, four 4-warp decode programs fill a multiprocessor's
register file. With 64-key tiles (short segments, round 13) the compiler spills little below that:
offline for sm_90 at B=1, L=32768, fp8_e4m3 at 96 registers keeps 4 bytes of local loads in its
step, at 80 registers 18 (int8 and fp8 per-token-head: 32 and 53). At 96 registers five programs
fit, at 80 six: more programs to hide each one's latency, and a one-wave grid of more segments
(82 and 99 at B=1 instead of 66). This script times the rule beside those launches of the same
kernel, alternately, two rounds in opposite orders. Writes ``register_cap_ab.csv`` into the folder
given as the first argument (default ``.``).

    PYTHONPATH=.:benchmarks python3 benchmarks/register_cap_ab.py "$OUT"
"""

from decode_ab_cases import shapes_ab

CASES = ((1, 32768), (1, 16384), (1, 8192), (4, 8192), (16, 8192))
SCHEMES = ("fp8_e4m3", "int8_per_token_head", "fp8_per_token_head")
#: (key tile, segments, stages, warps, register cap) beside the rule, per batch: one wave of 5 or 6
#: programs per multiprocessor (132 of them) at caps 96 and 80
SHAPES = {
    1: ((64, 82, 2, 4, 96), (64, 99, 2, 4, 80)),
    4: ((64, 20, 2, 4, 96), (64, 24, 2, 4, 80)),
    16: ((128, 5, 2, 4, 96), (64, 5, 2, 4, 96), (64, 6, 2, 4, 80)),
}


def main() -> None:
    shapes_ab("register_cap_ab.csv", CASES, SCHEMES, lambda config, case, scheme: SHAPES[case.kv.batch])


if __name__ == "__main__":
    main()
