# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exercise 10 — Predict the decode speed-up of an INT8 cache
#
# *Follows lesson `03_paged_attention_kernels`. About 20 minutes.*
#
# A decode step reads every cached key and value once and does about one multiply-add per byte it
# reads. A GPU can do hundreds of multiply-adds in the time it moves one byte from memory, so decode
# attention is **memory bound**: at best it takes `bytes / bandwidth`. The *roofline* prediction for
# two caches on the same GPU is then the ratio of their bytes.
#
# **Part A.** Write `decode_bytes(kv_cache_dtype, batch, context, num_q_heads, num_kv_heads,
# head_size, block_size)`: the bytes one decode call must move at the least, for `batch` sequences of
# `context` cached tokens, one new token each:
#
# * K and V of every cached token and KV head, plus the two fp32 scales per token and KV head of the
#   per-token-head schemes (`kvlab.kv_bytes_per_token(scheme, num_kv_heads, head_size)` gives the
#   bytes of one token);
# * the query read and the output written: `num_q_heads × head_size` bf16 values (2 bytes) each,
#   per sequence;
# * the block table: `cdiv(context, block_size)` int32 block ids (4 bytes) per sequence;
# * the metadata: two int32 per sequence (its length and query offset) plus one more int32.
#
# Example: int8 per-token-head, 64 sequences of 32,768 tokens, 32 query heads, 8 KV heads, head size
# 128, block size 16 → **4,430,758,404** bytes.

# %% tags=["stub"]
from kvlab import kv_bytes_per_token  # noqa: F401 (you will need it)


def decode_bytes(kv_cache_dtype: str, batch: int, context: int, num_q_heads: int, num_kv_heads: int,
                 head_size: int, block_size: int) -> int:
    """Bytes one decode call must move: K, V, scales, query, output, block table and metadata."""
    raise NotImplementedError("write decode_bytes")


# %% [markdown]
# <details><summary>Hint 1 — the cache</summary>
#
# `batch * context * kv_bytes_per_token(kv_cache_dtype, num_kv_heads, head_size)`.
# </details>
#
# <details><summary>Hint 2 — the rest</summary>
#
# Query and output: `2 * batch * num_q_heads * head_size * 2`. Block table:
# `batch * cdiv(context, block_size) * 4`. Metadata: `batch * 2 * 4 + 4`.
# </details>

# %% tags=["check"]
from kvlab.exercises import check_decode_bytes

check_decode_bytes(decode_bytes)

# %% [markdown]
# **Part B.** Write `predicted_decode_speedup(kv_cache_dtype, ...)` (same arguments): how many times
# faster than a **bf16** cache the `kv_cache_dtype` cache should decode, if both run at the same
# fraction of the memory bandwidth.

# %% tags=["stub"]
def predicted_decode_speedup(kv_cache_dtype: str, batch: int, context: int, num_q_heads: int,
                             num_kv_heads: int, head_size: int, block_size: int) -> float:
    """Roofline speed-up of ``kv_cache_dtype`` over a bf16 cache (ratio of bytes moved)."""
    raise NotImplementedError("write predicted_decode_speedup")


# %% tags=["check"]
from kvlab.exercises import check_decode_speedup

result = check_decode_speedup(predicted_decode_speedup)
result

# %% [markdown]
# ## Is decode really memory bound? And how close do real kernels come?
#
# The first cell compares the arithmetic intensity (FLOPs per byte) of a decode step with the
# ~260 FLOPs per byte an H100 offers (≈ 800 TFLOP/s bf16 over ≈ 3 TB/s). The second prints your
# predictions and, when GPU results of `kvlab bench` are in `benchmarks/results/`, the measured
# speed-ups next to them.

# %%
from kvlab.bench.traffic import attention_bytes, attention_flops

shape = dict(batch=64, context=32768, num_q_heads=32, head_size=128)
flops = attention_flops(query_len=1, **shape)
moved = attention_bytes("bfloat16", query_len=1, num_kv_heads=8, block_size=16, **shape)
print(f"decode, bf16 cache: {flops / moved:.2f} FLOP per byte (the GPU could do ~260)")

# %%
if result.passed:
    from kvlab.kvdata import find_benchmark_csv, load_benchmark_results

    shape = dict(num_q_heads=32, num_kv_heads=8, head_size=128, block_size=16)
    files = find_benchmark_csv()
    measured = load_benchmark_results(files) if files else None
    for batch, context in ((1, 1024), (1, 32768), (64, 1024), (64, 32768)):
        predicted = predicted_decode_speedup("int8_per_token_head", batch, context, **shape)
        line = f"batch {batch:3d}, context {context:6d}: predicted {predicted:.2f}×"
        if measured is not None:
            rows = {r["scheme"]: r for r in measured.select(kind="decode", batch=batch, context=context)}
            if "bfloat16" in rows and "int8_per_token_head" in rows:
                speedup = rows["bfloat16"]["median_us"] / rows["int8_per_token_head"]["median_us"]
                line += f", measured {speedup:.2f}× on {rows['bfloat16']['device']}"
        print(line)
    if measured is None:
        print("(no GPU benchmark results in benchmarks/results/: predictions only)")
else:
    print("Make the check above pass first.")

# %% [markdown]
# ## Think about it
#
# 1. Why is the predicted speed-up below 2 even for long contexts, and further below 2 for short
#    ones?
# 2. fp8 per-tensor stores one byte per element with no per-token scales. Which of fp8 and int8
#    per-token-head does the roofline favour, and by how much? What does per-token-head buy in return?
# 3. A measured speed-up below the prediction means the int8 kernel runs at a lower fraction of the
#    bandwidth than the bf16 one. Name two things an int8 kernel does per byte that a bf16 kernel
#    does not.
