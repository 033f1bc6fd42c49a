"""Decode: fp8 codes into bf16 operands in 4 instructions per pair, against the 5 they replaced.

Per-tensor and per-token-head fp8 codes become bf16 dot operands with a sign-extending byte permute,
a shift, one mask and a multiply per pair (:func:`kvlab.kernels.numerics.fp8_to_bf16_asm`). Before,
the permute put each code in the high byte, and two masks and an ``or`` moved the sign and the
other bits apart (:func:`previous_fp8_asm` below). Both are timed in one process, alternately:
``before``, ``after``, then in the reverse order, ``ROUNDS`` times, on the decode cases below (other
schemes run once per round as the run's yardstick). Each row keeps its median µs (CUDA-graph
replays, inputs rotated past the L2 as in ``kvlab bench``), whether its output is bit-identical to
``before``'s, and its relative error against the float64 truth. Writes ``decode_gap_ab.csv`` into
the folder given as the first argument (default ``.``) and prints a summary (best of the rounds).

``results/decode_gap_ab_NVIDIA_H100_80GB_HBM3.csv`` is this script's output.
``results/decode_gap_ab_pdl_NVIDIA_H100_80GB_HBM3.csv`` came from its first version (commit
``5df0b98``, before the benchmark's steady-state warm-up), which also timed a third variant: the
split-K merge kernel launched as a programmatic dependent of the attention kernel (rows ``fp8 asm``
= the conversion alone, ``after`` = both). That variant was not adopted (``kernel_notes.md``,
round 10) and is gone from the kernels.

    PYTHONPATH=. python3 benchmarks/decode_gap_ab.py "$OUT"
"""

from decode_ab_cases import alternate, prepare_calls, print_best, run_grid

CASES = ((1, 1024), (1, 8192), (1, 32768), (16, 8192), (16, 32768), (64, 1024), (64, 32768))
SCHEMES = ("bfloat16", "fp8_e4m3", "fp8_e5m2", "fp8_per_token_head", "int8_per_token_head",
           "int4_per_token_head", "kivi2")
ROUNDS = 2


def previous_fp8_asm(mant_bits: int, exp_bias: int) -> str:
    """The fp8 → bf16 PTX before this change: code in the high byte, sign and field bits moved apart."""
    mask = (0x7F << (7 - mant_bits)) * 0x10001
    rebias = ((127 + 127 - exp_bias) << 7) * 0x10001
    half = (f"shr.b32 t, {{x}}, {mant_bits + 1};\nand.b32 t, t, {mask:#x};\n"
            "and.b32 {x}, {x}, 0x80008000;\nor.b32 {x}, {x}, t;\nmul.rn.bf16x2 {out}, {x}, s;\n")
    return ("{\n.reg .b32 a, b, t, s;\n" f"mov.b32 s, {rebias:#x};\n"
            "prmt.b32 a, $2, 0, 0x1404;\nprmt.b32 b, $2, 0, 0x3424;\n"
            + half.format(x="a", out="$0") + half.format(x="b", out="$1") + "}")


FP8_FIELDS = {"fp8_e4m3": (3, 7), "fp8_e5m2": (2, 15), "fp8_per_token_head": (3, 7)}


def prepare(scheme, case, cache, batches, variant):
    """Prepared calls of every rotation set, switched to ``variant``."""
    calls = prepare_calls(case, scheme, cache, batches)
    if variant == "before" and scheme in FP8_FIELDS:
        for call in calls:
            launch = call._launch
            launch.consts = dict(launch.consts, FP8_DECODE_ASM=previous_fp8_asm(*FP8_FIELDS[scheme]))
    return calls


def main() -> None:
    def measure(ctx, config, case, scheme, cache, batches):
        def launches_for(variant):
            calls = prepare(scheme, case, cache, batches, variant)
            return calls, [c.run for c in calls]

        variants = ("before", "after") if scheme in FP8_FIELDS else ("after",)
        return alternate(ctx, config, case, scheme, variants, launches_for, ROUNDS, "same_as_before")

    rows = run_grid("decode_gap_ab.csv", CASES, SCHEMES, measure)
    print_best(rows, ("before", "after"))


if __name__ == "__main__":
    main()
