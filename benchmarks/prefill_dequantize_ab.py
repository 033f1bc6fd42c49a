"""8-bit prefill: convert each block once, then the 16-bit kernel, against the fused kernel, same run.

For each prefill case of ``kvlab bench`` (2,048 new tokens over 8,192, and 8,192 from an empty cache)
and each 8-bit scheme, the fused kernel (codes converted inside every program that reads a tile) and
the dequantize-first path (:mod:`kvlab.kernels.dequantized_prefill`) are timed alternately, ``ROUNDS``
times each, beside bf16 on the same K/V and queries. Per-token-head schemes add the dequantize-first
path with a bf16 scratch (``dequantize-first-bf16``; their default scratch is fp16). Each row records
the relative error against the float64 truth. Writes ``prefill_dequantize_ab.csv`` into the folder
given as the first argument (default ``.``) and prints a table.

    PYTHONPATH=. python3 benchmarks/prefill_dequantize_ab.py "$OUT"
"""

import math
import os
import sys

import torch

from kvlab.bench.attention_cases import attention_case, measure_kvlab_attention, paged
from kvlab.bench.config import BenchConfig
from kvlab.bench.context import gpu_context
from kvlab.bench.measure import time_graph_us
from kvlab.bench.results import write_dict_rows
from kvlab.bench.traffic import attention_flops
from kvlab.kernels.dequantized_prefill import prepare_dequantized_8bit_prefill
from kvlab.reference.metrics import relative_error

SCHEMES = ("fp8_e4m3", "fp8_e5m2", "int8_per_token_head", "fp8_per_token_head")
ROUNDS = 2

out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
config = BenchConfig()
ctx = gpu_context()
rows = []


def bf16_scratch(case, sets):
    """``(µs, relative error)`` of the dequantize-first path with its scratch forced to bf16."""
    sigma = 1.0 / math.sqrt(config.head_size)
    calls = [prepare_dequantized_8bit_prefill(case.queries[s], sets.cache, sets.batches[s], scale=sigma,
                                              dtype=torch.bfloat16) for s in range(case.sets)]
    us = time_graph_us([c.run for c in calls], config.repeats)
    return us, relative_error(calls[0].run(), case.truth)


def record(case, chunk, total, scheme, path, sets, rnd):
    if path == "dequantize-first-bf16":
        us, err = bf16_scratch(case, sets)
    else:
        first = {"fused": False, "dequantize-first": True, "16-bit": None}[path]
        row = measure_kvlab_attention(config, ctx, case, scheme, kind="prefill", paged_sets=sets,
                                      dequantize_first=first)
        us, err = row.median_us, row.rel_err_truth
    flops = attention_flops(batch=1, context=total, query_len=chunk, num_q_heads=config.num_q_heads,
                            head_size=config.head_size)
    rows.append(dict(device=ctx.device, new_tokens=chunk, total=total, scheme=scheme, path=path, round=rnd,
                     us=round(us, 1), tflops=round(flops / us / 1e6, 1), rel_err_truth=f"{err:.3e}"))
    print(rows[-1], flush=True)


for chunk, total in config.prefill:
    case = attention_case(config, 1, total, chunk)
    caches = {s: paged(config, case, s) for s in ("bfloat16", *SCHEMES)}
    for rnd in range(ROUNDS):
        record(case, chunk, total, "bfloat16", "16-bit", caches["bfloat16"], rnd)
        for scheme in SCHEMES:
            order = ["fused", "dequantize-first"]
            if "per_token_head" in scheme:
                order.append("dequantize-first-bf16")
            if rnd % 2:
                order.reverse()
            for path in order:
                record(case, chunk, total, scheme, path, caches[scheme], rnd)
    del case, caches
    torch.cuda.synchronize()
    torch.cuda.empty_cache()

write_dict_rows(rows, os.path.join(out_dir, "prefill_dequantize_ab.csv"))

print(f"\n{'case':>12} {'scheme':>20} {'path':>17} {'best us':>9} {'x bf16':>7} {'rel err':>10}")
for chunk, total in config.prefill:
    mine = [r for r in rows if (r["new_tokens"], r["total"]) == (chunk, total)]
    bf16 = min(r["us"] for r in mine if r["scheme"] == "bfloat16")
    for scheme in ("bfloat16", *SCHEMES):
        for path in ("16-bit", "fused", "dequantize-first", "dequantize-first-bf16"):
            got = [r for r in mine if r["scheme"] == scheme and r["path"] == path]
            if got:
                best = min(r["us"] for r in got)
                print(f"{chunk:>5}/{total:<6} {scheme:>20} {path:>17} {best:>9.1f} {best / bf16:>7.3f} "
                      f"{got[0]['rel_err_truth']:>10}")
