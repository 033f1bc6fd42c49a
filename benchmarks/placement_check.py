"""Does where the int8 K and V codes sit in memory change the int8 decode time at B=64, L=32768?

The full benchmark measured this row at 1,640–1,979 µs by run while the same launch took 1,629–1,670
µs timed alone. What differs between the two is what was allocated and freed before the cache (the
case's dense K/V, SDPA's runs, four other caches), so the suspicion is the relative placement of
the K and V code tensors (the two streams one program reads). One process, one case, the int8
kernel timed as ``kvlab bench`` times it (CUDA-graph replays, median) after:

* ``fresh``: nothing else measured before;
* ``bench-order``: SDPA's two baselines and the other five schemes first, as the benchmark does;
* ``one-allocation``: the same codes copied into one tensor ``[2, blocks, 16, 8, 128]`` (K then V);
* ``one-allocation-vk``: the same with V first;
* ``fresh-again``: a new cache once more at the end.

Each row prints the two code tensors' addresses and their distance. Writes
``placement_B64_L32768.csv`` into the folder given as the first argument (default ``.``).

    PYTHONPATH=. python3 benchmarks/placement_check.py "$OUT"
"""

import csv
import os
import sys

import torch

from kvlab.bench.attention_cases import attention_case, measure_kvlab_attention, measure_sdpa, paged
from kvlab.bench.config import BenchConfig
from kvlab.bench.context import gpu_context
from kvlab.cache.paged_cache import PagedKVCache

SCHEME, BATCH, CONTEXT = "int8_per_token_head", 64, 32768
out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
config = BenchConfig()
ctx = gpu_context()
case = attention_case(config, BATCH, CONTEXT, 1)
rows = []


def free() -> None:
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def timed(label: str, sets) -> None:
    row = measure_kvlab_attention(config, ctx, case, SCHEME, kind="decode", paged_sets=sets)
    k, v = sets.cache.key.data_ptr(), sets.cache.value.data_ptr()
    rows.append(dict(label=label, us=round(row.median_us, 1), pct_copy=round(row.pct_copy_bw or 0, 1),
                     rel_err=f"{row.rel_err_truth:.3e}", key_ptr=hex(k), value_ptr=hex(v),
                     v_minus_k_mib=round((v - k) / 2**20, 3), key_mod_2mib=(k % 2**21)))
    print(rows[-1], flush=True)


def one_allocation(sets, v_first: bool):
    c = sets.cache
    buf = torch.empty((2, *c.key.shape), dtype=c.key.dtype, device="cuda")
    kbuf, vbuf = (buf[1], buf[0]) if v_first else (buf[0], buf[1])
    kbuf.copy_(c.key)
    vbuf.copy_(c.value)
    sets.cache = PagedKVCache(c.scheme, kbuf, vbuf, c.key_scale, c.value_scale, c.k_scale, c.v_scale)
    del c
    free()
    return sets


sets = paged(config, case, SCHEME)
timed("fresh", sets)
del sets
free()
measure_sdpa(config, ctx, case)
for other in ("bfloat16", "float16", "fp8_e4m3", "fp8_e5m2"):
    r = measure_kvlab_attention(config, ctx, case, other, kind="decode")
    print(other, round(r.median_us, 1), flush=True)
    free()
sets = paged(config, case, SCHEME)
timed("bench-order", sets)
sets = one_allocation(sets, v_first=False)
timed("one-allocation", sets)
del sets
free()
sets = one_allocation(paged(config, case, SCHEME), v_first=True)
timed("one-allocation-vk", sets)
del sets
free()
sets = paged(config, case, SCHEME)
timed("fresh-again", sets)

path = os.path.join(out_dir, "placement_B64_L32768.csv")
with open(path, "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
print("wrote", path)
