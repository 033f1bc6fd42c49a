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
# # Solution — Exercise 10, predict the decode speed-up of an INT8 cache

# %% tags=["solution"]
from kvlab import kv_bytes_per_token


def decode_bytes(kv_cache_dtype: str, batch: int, context: int, num_q_heads: int, num_kv_heads: int,
                 head_size: int, block_size: int) -> int:
    """Bytes one decode call must move: K, V, scales, query, output, block table and metadata."""
    cache = batch * context * kv_bytes_per_token(kv_cache_dtype, num_kv_heads, head_size)
    query_and_output = 2 * batch * num_q_heads * head_size * 2
    block_table = batch * -(-context // block_size) * 4
    metadata = batch * 2 * 4 + 4
    return cache + query_and_output + block_table + metadata


# %% tags=["solution"]
def predicted_decode_speedup(kv_cache_dtype: str, batch: int, context: int, num_q_heads: int,
                             num_kv_heads: int, head_size: int, block_size: int) -> float:
    """Roofline speed-up of ``kv_cache_dtype`` over a bf16 cache (ratio of bytes moved)."""
    shape = (batch, context, num_q_heads, num_kv_heads, head_size, block_size)
    return decode_bytes("bfloat16", *shape) / decode_bytes(kv_cache_dtype, *shape)


# %% [markdown]
# ## Answers
#
# 1. The scales: an int8 token costs 2,112 bytes instead of 2,048 for 8 KV heads × 128, so even the
#    cache part shrinks by 4096 / 2112 = 1.94×, not 2×. The query, output, block table and metadata do
#    not shrink at all, and they weigh more when the context is short: for 32 query heads, 8 KV heads
#    and head size 128 the prediction is 1.94× at 32,768 tokens, 1.93× at 1,024 and 1.76× at 32.
# 2. fp8 per-tensor moves 2,048 bytes per token, 3 % fewer than per-token-head: the roofline favours
#    it by about 1.03×. Per-token-head buys accuracy: each token and head gets its own scale, so an
#    outlier only coarsens its own vector, and no calibration of a layer-wide scale is needed.
# 3. For example: converting int8 codes to the dot's dtype before each product, loading and applying
#    the scales (one more gather per token and head), and — on GPUs where the transposed V operand
#    has no 8-bit matrix-load instruction — reading V from shared memory in single bytes. Any of these
#    can make the kernel issue-bound rather than memory-bound.

# %%
if __name__ == "__main__":  # run as a notebook or a script: verify the solution
    from kvlab.exercises import check_decode_bytes, check_decode_speedup

    print(check_decode_bytes(decode_bytes))
    print(check_decode_speedup(predicted_decode_speedup))
