"""Launch one decode call of kvlab's paged attention, for a profiler to look at.

    ncu --clock-control none -k regex:_paged_attention_kernel -c 1 --section SpeedOfLight \\
        python3 benchmarks/profile_decode.py int8_per_token_head 64 32768

Arguments: scheme, batch, context (defaults: int8_per_token_head, 64, 32768); Hq=32, Hkv=8, D=128,
block 16, bf16 queries, as in ``kvlab bench``.
"""

import sys

import torch

from kvlab.bench.attention_cases import attention_case, paged
from kvlab.bench.config import BenchConfig
from kvlab.kernels.attention import prepare_paged_attention

scheme = sys.argv[1] if len(sys.argv) > 1 else "int8_per_token_head"
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 64
context = int(sys.argv[3]) if len(sys.argv) > 3 else 32768
config = BenchConfig(schemes=(scheme,), l2_multiple=1)
case = attention_case(config, batch, context, 1)
paged_sets = paged(config, case, scheme)
call = prepare_paged_attention(case.queries[0], paged_sets.cache, paged_sets.batches[0])
print(call.tiling)
call.run()
torch.cuda.synchronize()
