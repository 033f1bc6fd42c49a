"""Mixed batches over an 8-bit cache: which prefill path is faster, and does the rule pick it?

One prefill chunk (2,048 new tokens over 8,192) shares a batch with ``D`` decodes of ``L`` tokens each.
Both paths are timed on the same batch (CUDA-graph replays, alternated twice, best kept): the fused
kernel and dequantize-first (:mod:`kvlab.kernels.dequantized_prefill`), whose scratch copies the
decodes' contexts too. ``saved_per_copied`` is what
:func:`~kvlab.kernels.dequantized_prefill.dequantize_first_rule` compares with 3: the chunk's saved token
conversions, ``8,192 · (2,048 // 64 − 1)``, over the decodes' context tokens. The break-even of each
scheme is where ``faster`` changes. Writes
``prefill_mixed_batch_ab.csv`` into the folder given as the first argument (default ``.``).

    PYTHONPATH=. python3 benchmarks/prefill_mixed_batch_ab.py "$OUT"
"""

import os
import sys

import torch

from kvlab.bench.context import gpu_context
from kvlab.bench.measure import time_graph_us
from kvlab.bench.results import write_dict_rows
from kvlab.cache.example import build_paged_example
from kvlab.kernels.attention import prepare_paged_attention
from kvlab.kernels.dequantized_prefill import PREFILL_QUERY_BLOCK, dequantize_first_rule

MIXES = [(0, 0), (1, 2048), (4, 1024), (16, 1024), (4, 8192), (32, 2048), (8, 8192), (10, 8192), (12, 8192),
         (16, 8192), (63, 8192)]
SCHEMES = ("int8_per_token_head", "fp8_e4m3")
out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
ctx = gpu_context()
rows = []
for scheme in SCHEMES:
    for decodes, length in MIXES:
        qlens, slens = [2048] + [1] * decodes, [8192] + [length] * decodes
        ex = build_paged_example(qlens, slens, num_q_heads=32, num_kv_heads=8, head_size=128, scheme=scheme,
                                 seed=decodes + length, device="cuda")
        best = {}
        for rnd in range(2):
            for first in ((False, True) if rnd == 0 else (True, False)):
                call = prepare_paged_attention(ex.query, ex.cache, ex.batch, dequantize_first=first)
                us = time_graph_us([call.run], 20)
                best[first] = min(best.get(first, float("inf")), us)
                del call
        saved = 8192 * (2048 // PREFILL_QUERY_BLOCK - 1)
        ratio = saved / (decodes * length) if decodes else float("inf")
        rows.append(dict(device=ctx.device, scheme=scheme, decodes=decodes, decode_len=length,
                         saved_per_copied=round(ratio, 2), fused_us=round(best[False], 1),
                         dequantize_first_us=round(best[True], 1),
                         rule_picks="dequantize-first" if dequantize_first_rule(qlens, slens) else "fused",
                         faster="dequantize-first" if best[True] < best[False] else "fused"))
        print(rows[-1], flush=True)
        del ex
        torch.cuda.empty_cache()
write_dict_rows(rows, os.path.join(out_dir, "prefill_mixed_batch_ab.csv"))
