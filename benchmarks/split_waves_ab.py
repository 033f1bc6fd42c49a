"""Decode with few sequences: split-K into one wave of programs (the rule) or into several.

The launch rules split a short decode grid into as many segments as fill the GPU once (one wave),
so that every program starts at the same moment. Each then asks for its first tile, waits for it
with nothing to compute, and converts its last tile with nothing left to load: with four tiles a
program (B=1, L=32768, 1-byte caches) that start and end are a large share of the call. With
several waves of shorter segments, programs start as others finish, so one program's last tile
overlaps another's first load, at the price of more partials for the merge.

Each case times the rule's launch and launches of the same kernel with the key tile and split
count given here, alternately, two rounds in opposite orders; every output is compared bit for bit
with the rule's (split counts change the order of the sums, so equality is not expected; the error
against float64 is the check). Writes ``split_waves_ab.csv`` into the folder given as the first
argument (default ``.``).

    PYTHONPATH=.:benchmarks python3 benchmarks/split_waves_ab.py "$OUT"
"""

from decode_ab_cases import element_bytes, shapes_ab

import kvlab.kernels.attention_checks as attention_checks
import kvlab.kernels.launch_config as launch_config

CASES = ((1, 32768), (1, 8192), (4, 8192), (16, 8192))
SCHEMES = ("int8_per_token_head", "fp8_e4m3", "fp8_per_token_head", "bfloat16", "int4_per_token_head")
#: (key tile, segments per sequence[, pipeline stages]) tried beside the rule, per (batch, scheme's
#: bytes per element)
SHAPES = {
    (1, 1): ((128, 128), (128, 256), (64, 128), (64, 256), (64, 512), (64, 66, 3), (64, 128, 3),
             (32, 256, 3)),
    (1, 2): ((64, 66), (64, 132), (64, 264), (32, 264)),
    (4, 1): ((128, 32), (128, 64), (64, 64), (64, 128), (64, 32, 3)),
    (4, 2): ((64, 16), (64, 32), (64, 64)),
    (16, 1): ((128, 8), (128, 16), (64, 16), (64, 32)),
    (16, 2): ((64, 4), (64, 8)),
}
# a segment count above the library's cap is allowed here: the merge kernel holds any power of two
launch_config.MAX_SPLITS = attention_checks.MAX_SPLITS = 512


def main() -> None:
    shapes_ab("split_waves_ab.csv", CASES, SCHEMES,
              lambda config, case, scheme: SHAPES[(case.kv.batch, element_bytes(scheme))])


if __name__ == "__main__":
    main()
