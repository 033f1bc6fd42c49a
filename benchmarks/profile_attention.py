"""Launch one paged-attention call of kvlab's kernel, for a profiler to look at.

    ncu --clock-control none -k regex:paged_attention_kernel -c 1 --section SpeedOfLight \\
        python3 benchmarks/profile_attention.py int8_per_token_head 64 32768

Arguments: scheme, batch, context, query_len (defaults: int8_per_token_head, 64, 32768, 1). A
query length above 1 is a prefill chunk of that many new tokens ending at ``context`` (one sequence:
``bfloat16 1 8192 2048`` is the benchmark's chunk of 2,048 tokens over 8,192). Hq=32, Hkv=8, D=128,
block 16, bf16 queries, N(0, 1) K/V, as in ``kvlab bench``; one copy of the cache and no float64
truth (nothing but the launch is of interest), so the kernel launches exactly once.
"""

import sys

import torch

from kvlab.bench.config import BenchConfig
from kvlab.bench.workloads import paged_copies, random_kv
from kvlab.kernels.attention import prepare_paged_attention

scheme = sys.argv[1] if len(sys.argv) > 1 else "int8_per_token_head"
batch = int(sys.argv[2]) if len(sys.argv) > 2 else 64
context = int(sys.argv[3]) if len(sys.argv) > 3 else 32768
query_len = int(sys.argv[4]) if len(sys.argv) > 4 else 1
config = BenchConfig(schemes=(scheme,))
gen = torch.Generator(device="cuda").manual_seed(config.seed + 1000 * batch + context + query_len)
kv = random_kv(batch, context, config.num_kv_heads, config.head_size, config.query_dtype, gen)
query = torch.randn(batch * query_len, config.num_q_heads, config.head_size, generator=gen,
                    device="cuda").to(config.query_dtype)
sets = paged_copies(scheme, kv, query_len=query_len, block_size=config.block_size, sets=1, gen=gen)
call = prepare_paged_attention(query, sets.cache, sets.batches[0])
print(scheme, f"B={batch} L={context} q={query_len}", call.tiling, flush=True)
call.run()
torch.cuda.synchronize()
