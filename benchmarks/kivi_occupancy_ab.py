"""Full-grid KIVI decodes with more warps per scheduler: split-K segments under a register cap.

At B=64 a KIVI decode is 512 programs of 2 warps at 255 registers, about four per multiprocessor,
so each scheduler has about two warps to choose from, and Nsight Compute shows the loop waiting on
its own dependencies (``lowbit_notes.md``, round 14). Two segments per sequence under a 128-register
cap make 1,024 programs that all fit at once (eight per multiprocessor), twice the warps per
scheduler, for the price of spilled registers and a merge. Timed beside the rule, alternately, two
rounds in opposite orders: ``t64s2n2w2r128`` (the candidate), ``t64s1n2w2r128`` (the cap alone) and
``t64s2`` (two segments uncapped: two waves). Writes ``kivi_occupancy_ab.csv`` into the folder
given as the first argument.

    PYTHONPATH=.:benchmarks python3 benchmarks/kivi_occupancy_ab.py "$OUT"
"""

from decode_ab_cases import shapes_ab

CASES = ((32, 32768), (64, 8192), (64, 32768))
SCHEMES = ("kivi4", "kivi2")
SHAPES = ((64, 2, 2, 2, 128), (64, 1, 2, 2, 128), (64, 2))


def main() -> None:
    shapes_ab("kivi_occupancy_ab.csv", CASES, SCHEMES, lambda config, case, scheme: SHAPES)


if __name__ == "__main__":
    main()
