"""Decode with and without the L2 prefetch of the K/V rows ahead of use, timed in one process.

``kernels/l2_prefetch.py`` asks the K/V rows of the tile ``AHEAD`` steps ahead into L2 during each
loop step (and a segment's first tiles before its loop). Variants ``(ahead, grain)``: ``(0, -)`` is
the kernel without it; ``grain`` is how many bytes of a row one ``prefetch`` instruction is counted
on to bring in (128: one per 128-byte line, 32: one per 32-byte sector). Every variant of a (case,
scheme) is timed on the same cache, the order reversed in the second round; each row keeps its
median µs (CUDA-graph replays, inputs rotated past the L2 as in ``kvlab bench``), its percent of the
copy bandwidth, whether its output is bit-identical to the variant without prefetch, and its
relative error against the float64 truth. Writes ``l2_prefetch_ab.csv`` into the folder given as the
first argument (default ``.``) and prints the best of the rounds per variant.

    PYTHONPATH=. python3 benchmarks/l2_prefetch_ab.py "$OUT" [--quick]
"""

import os
import sys
import time

import torch
from decode_gap_ab import LOWBIT, paged_sets  # the same cache builders (same folder)

from kvlab.bench.attention_cases import attention_case
from kvlab.bench.config import BenchConfig
from kvlab.bench.context import gpu_context
from kvlab.bench.measure import time_graph_us
from kvlab.bench.results import write_dict_rows
from kvlab.bench.traffic import attention_bytes
from kvlab.kernels.attention import prepare_paged_attention
from kvlab.kernels.lowbit_attention_call import prepare_lowbit_attention
from kvlab.reference.metrics import relative_error

CASES = ((1, 8192), (1, 32768), (16, 8192), (64, 1024), (64, 32768))
SCHEMES = ("bfloat16", "int8_per_token_head", "fp8_e4m3", "int4_per_token_head", "kivi2")
VARIANTS = ((0, 128), (2, 128), (2, 32), (4, 128))
ROUNDS = 2


def prepare(scheme, case, cache, batches, ahead, grain):
    """Prepared calls of every rotation set with the given prefetch."""
    if scheme in LOWBIT:
        return [prepare_lowbit_attention(case.queries[s], cache, batches[s], l2_ahead=ahead, l2_grain=grain)
                for s in range(case.sets)]
    return [prepare_paged_attention(case.queries[s], cache, batches[s], l2_ahead=ahead, l2_grain=grain)
            for s in range(case.sets)]


def main() -> None:
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    quick = "--quick" in sys.argv
    config = BenchConfig()
    ctx = gpu_context()
    rows = []
    start = time.time()
    for batch, context in CASES:
        case = attention_case(config, batch, context, 1)
        for scheme in SCHEMES:
            cache, batches = paged_sets(config, case, scheme)
            reference = None
            for rnd in range(1 if quick else ROUNDS):
                for ahead, grain in (VARIANTS if rnd % 2 == 0 else VARIANTS[::-1]):
                    calls = prepare(scheme, case, cache, batches, ahead, grain)
                    us = time_graph_us([c.run for c in calls], config.repeats)
                    out = calls[0].run().clone()
                    if ahead == 0 and reference is None:
                        reference = out
                    same = bool(torch.equal(out, reference)) if reference is not None else ""
                    nbytes = attention_bytes(scheme, batch=batch, context=context, query_len=1,
                                             num_q_heads=config.num_q_heads, num_kv_heads=config.num_kv_heads,
                                             head_size=config.head_size, block_size=config.block_size)
                    rows.append(dict(device=ctx.device, batch=batch, context=context, scheme=scheme,
                                     ahead=ahead, grain=grain, round=rnd, us=round(us, 2),
                                     pct_copy_bw=round(100 * nbytes / us / 1e3 / ctx.copy_bw_gbps, 1),
                                     num_splits=calls[0]._launch.grid[1], same_as_off=same,
                                     rel_err_truth=f"{relative_error(out, case.truth):.4e}",
                                     elapsed_s=round(time.time() - start, 1)))
                    print(rows[-1], flush=True)
                    del calls
            del cache, batches
            write_dict_rows(rows, os.path.join(out_dir, "l2_prefetch_ab.csv"))  # kept if the run is cut
        del case
        torch.cuda.synchronize()
        torch.cuda.empty_cache()

    best = {}
    for r in rows:
        key = (r["batch"], r["context"], r["scheme"], r["ahead"], r["grain"])
        best[key] = min(best.get(key, float("inf")), r["us"])
    print(f"{'B':>3} {'L':>6} {'scheme':22} " + " ".join(f"{f'{a}/{g}':>9}" for a, g in VARIANTS))
    for batch, context in CASES:
        for scheme in SCHEMES:
            cells = [best.get((batch, context, scheme, a, g), float("nan")) for a, g in VARIANTS]
            print(f"{batch:>3} {context:>6} {scheme:22} " + " ".join(f"{c:9.2f}" for c in cells))


if __name__ == "__main__":
    main()
