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

import os
import sys

import torch

from kvlab.bench.attention_cases import attention_case, paged
from kvlab.bench.config import BenchConfig
from kvlab.bench.context import gpu_context
from kvlab.bench.measure import time_graph_us
from kvlab.bench.results import write_dict_rows
from kvlab.bench.traffic import attention_bytes
from kvlab.kernels.attention import prepare_paged_attention
from kvlab.kernels.lowbit_attention_call import prepare_lowbit_call
from kvlab.reference.metrics import relative_error

CASES = ((1, 1024), (1, 8192), (1, 32768), (16, 8192), (16, 32768), (64, 1024), (64, 32768))
SCHEMES = ("bfloat16", "fp8_e4m3", "fp8_e5m2", "fp8_per_token_head", "int8_per_token_head",
           "int4_per_token_head", "kivi2")
LOWBIT = ("int4_per_token_head", "kivi4", "kivi2")
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


def paged_sets(config, case, scheme):
    """``(cache, batches)``: the case's K/V in ``case.sets`` copies of a paged cache of ``scheme``."""
    if scheme in LOWBIT:
        from lowbit_bench import lowbit_copies  # the low-bit benchmark's builder (same folder)

        gen = torch.Generator(device="cuda").manual_seed(config.seed + 7)
        return lowbit_copies(scheme, case.kv, 1, case.sets, gen)
    sets = paged(config, case, scheme)
    return sets.cache, sets.batches


def prepare(scheme, case, cache, batches, variant):
    """Prepared calls of every rotation set, switched to ``variant``."""
    calls = []
    for s in range(case.sets):
        if scheme in LOWBIT:
            call = prepare_lowbit_call(case.queries[s], cache, batches[s])
        else:
            call = prepare_paged_attention(case.queries[s], cache, batches[s])
        launch = call._launch
        if variant == "before" and scheme in FP8_FIELDS:
            launch.consts = dict(launch.consts, FP8_DECODE_ASM=previous_fp8_asm(*FP8_FIELDS[scheme]))
        calls.append(call)
    return calls


def main() -> None:
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    config = BenchConfig()
    ctx = gpu_context()
    rows = []
    for batch, context in CASES:
        case = attention_case(config, batch, context, 1)
        for scheme in SCHEMES:
            cache, batches = paged_sets(config, case, scheme)
            variants = ["before", "after"] if scheme in FP8_FIELDS else ["after"]
            reference = None
            for rnd in range(ROUNDS):
                for variant in (variants if rnd % 2 == 0 else variants[::-1]):
                    calls = prepare(scheme, case, cache, batches, variant)
                    us = time_graph_us([c.run for c in calls], config.repeats)
                    out = calls[0].run().clone()
                    if variant == "before" and reference is None:
                        reference = out
                    same = bool(torch.equal(out, reference)) if reference is not None else ""
                    nbytes = attention_bytes(scheme, batch=batch, context=context, query_len=1,
                                             num_q_heads=config.num_q_heads, num_kv_heads=config.num_kv_heads,
                                             head_size=config.head_size, block_size=config.block_size)
                    launch = calls[0]._launch
                    rows.append(dict(device=ctx.device, batch=batch, context=context, scheme=scheme,
                                     variant=variant, round=rnd, us=round(us, 2),
                                     pct_copy_bw=round(100 * nbytes / us / 1e3 / ctx.copy_bw_gbps, 1),
                                     num_splits=launch.grid[1], same_as_before=same,
                                     rel_err_truth=f"{relative_error(out, case.truth):.4e}"))
                    print(rows[-1], flush=True)
                    del calls
            del cache, batches
        del case
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    write_dict_rows(rows, os.path.join(out_dir, "decode_gap_ab.csv"))
    best = {}
    for r in rows:
        key = (r["batch"], r["context"], r["scheme"], r["variant"])
        best[key] = min(best.get(key, float("inf")), r["us"])
    print(f"{'B':>3} {'L':>6} {'scheme':22} {'before':>9} {'after':>9} {'after/before':>12}")
    for batch, context in CASES:
        for scheme in SCHEMES:
            a = best[(batch, context, scheme, "after")]
            b = best.get((batch, context, scheme, "before"), float("nan"))
            print(f"{batch:>3} {context:>6} {scheme:22} {b:9.2f} {a:9.2f} {a / b:12.3f}")


if __name__ == "__main__":
    main()
