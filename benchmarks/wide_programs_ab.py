"""Short 8-bit decodes on wider programs: 8 warps a program instead of 4, same warps per SM.

In a one-wave split decode every program ends on its last tile's conversion and dots with nothing
left to load, and the whole GPU waits for that tail (``kernel_notes.md``, round 13: the attention
call at B=1, L=32768 takes 12.5 µs more than a kernel that only reads the same pages). With 8 warps
a program, half as many programs run on a multiprocessor at once, each takes twice the tiles, and
each tile's work is shared by twice the warps: the last tile, and the tail, take half as long. The
same kernel runs on the rule's launch and on these, alternately, two rounds in opposite orders.
Writes ``wide_programs_ab.csv`` into the folder given as the first argument (default ``.``).

    PYTHONPATH=.:benchmarks python3 benchmarks/wide_programs_ab.py "$OUT"
"""

from decode_ab_cases import element_bytes, shapes_ab

CASES = ((1, 32768), (1, 8192), (4, 8192), (16, 8192), (64, 1024))
SCHEMES = ("int8_per_token_head", "fp8_e4m3", "fp8_per_token_head", "bfloat16")
#: (key tile, segments per sequence, stages, warps) beside the rule, per (batch, bytes per element)
SHAPES = {
    (1, 1): ((128, 33, 2, 8), (64, 33, 2, 8), (64, 66, 2, 4), (256, 33, 2, 8)),
    (1, 2): ((64, 17, 2, 8), (32, 33, 2, 4), (128, 17, 2, 8)),
    (4, 1): ((128, 8, 2, 8), (64, 8, 2, 8), (64, 16, 2, 4)),
    (4, 2): ((64, 4, 2, 8), (32, 8, 2, 4)),
    (16, 1): ((128, 2, 2, 8), (64, 2, 2, 8), (64, 4, 2, 4)),
    (16, 2): ((64, 1, 2, 8),),
    (64, 1): ((128, 1, 2, 8), (64, 1, 2, 8), (64, 1, 2, 4)),
    (64, 2): ((64, 1, 2, 8),),
}


def main() -> None:
    shapes_ab("wide_programs_ab.csv", CASES, SCHEMES,
              lambda config, case, scheme: SHAPES[(case.kv.batch, element_bytes(scheme))])


if __name__ == "__main__":
    main()
