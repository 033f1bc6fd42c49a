"""Launch one low-bit decode call (the workload of ``benchmarks/lowbit_bench.py``) for a profiler:

    ncu --clock-control none --kernel-name regex:lowbit_attention_kernel --launch-count 1 \\
        --section WarpStateStats ... python3 benchmarks/profile_lowbit_decode.py kivi2 64 32768

Arguments: scheme, batch, context (defaults: int4_per_token_head, 64, 32768), then launch options of
``prepare_lowbit_attention`` as ``name=value`` (integers; ``packed_fma=0`` for the scalar FMAs,
``int8_dots=1`` for int4's int8 products).
32 query / 8 KV heads, head 128, block 16, bf16 queries, N(0, 1) K/V written by the Triton writer.
The call is launched twice: the first compiles, the second is the one to profile
(``--launch-skip 1``); the output is checked finite.
"""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
from lowbit_bench import HKV, HQ, D, lowbit_copies  # noqa: E402

from kvlab.bench.workloads import random_kv  # noqa: E402
from kvlab.kernels.lowbit_attention_call import prepare_lowbit_attention  # noqa: E402

scheme = sys.argv[1] if len(sys.argv) > 1 else "int4_per_token_head"
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 64
context = int(sys.argv[3]) if len(sys.argv) > 3 else 32768
opts = {k: int(v) for k, v in (a.split("=") for a in sys.argv[4:])}
for flag in ("packed_fma", "int8_dots"):
    if flag in opts:
        opts[flag] = bool(opts[flag])
gen = torch.Generator(device="cuda").manual_seed(batch * 7 + context + 1)
kv = random_kv(batch, context, HKV, D, torch.bfloat16, gen)
cache, batches = lowbit_copies(scheme, kv, 1, 1, gen)
del kv
query = torch.randn(batch, HQ, D, generator=gen, device="cuda").to(torch.bfloat16)
call = prepare_lowbit_attention(query, cache, batches[0], **opts)
print(scheme, batch, context, opts, "splits", call.num_splits, "tile", call.tile_n, "warps", call.num_warps,
      call.options, flush=True)
for _ in range(2):
    call.out.fill_(float("nan"))
    out = call.run()
    torch.cuda.synchronize()
assert torch.isfinite(out).all(), "output not finite"
print("ok", float(out.float().abs().mean()))
