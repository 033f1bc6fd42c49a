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
# # Exercise 4 — Dequantize inside the attention score (a Triton kernel)
#
# *Follows lesson `03_paged_attention_kernels`. About 30–40 minutes.*
#
# An int8 per-token-head cache never needs a dequantized copy of the keys. Because each key token
# `j` of KV head `g` has one scale `s[j, g]`, the scale can be pulled out of the dot product:
#
# ```
# S[h, j] = q_h · (s[j, g] · K̂[j, g])  =  (q_h · K̂[j, g]) · (sm_scale · s[j, g])       g = h // GROUP
# ```
#
# so the kernel multiplies raw int8 codes, and applies one scalar per key afterwards — this is what
# vLLM's Triton backend does for its per-token-head modes. `GROUP = num_q_heads / num_kv_heads`:
# consecutive query heads share one KV head (grouped-query attention).
#
# Write the body of `int8_scores_kernel`. One program handles one query head `h` and all keys:
#
# | pointer | layout | dtype |
# |---|---|---|
# | `q_ptr` | `[num_q_heads, HEAD_SIZE]` | fp32 |
# | `k_codes_ptr` | `[num_keys, NUM_KV_HEADS, HEAD_SIZE]` | int8 |
# | `k_scales_ptr` | `[num_keys, NUM_KV_HEADS]` | fp32 |
# | `out_ptr` | `[num_q_heads, num_keys]` | fp32 scores |
#
# All tensors are contiguous. `BLOCK_KEYS` is a power of two **at least** `num_keys`, so the key
# offsets must be masked. The kernel runs in Triton's interpreter on the CPU; each check takes a
# few seconds.

# %% [markdown]
# The answer key, in PyTorch (float64 on exactly dequantized keys):

# %%
import inspect

from kvlab.exercises.score_kernel import expected_scores

print(inspect.getsource(expected_scores))

# %% [markdown]
# ## Your kernel

# %% tags=["stub"]
from kvlab.kernels.runtime import tl, triton


@triton.jit
def int8_scores_kernel(
    q_ptr, k_codes_ptr, k_scales_ptr, out_ptr, sm_scale, num_keys,
    NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_SIZE: tl.constexpr, BLOCK_KEYS: tl.constexpr,
):
    # your code: h = tl.program_id(0) is this program's query head. Load q[h, :], the int8 keys and
    # the scales of KV head h // GROUP, and store the scores of the first num_keys keys in out[h, :].
    pass


# %% [markdown]
# <details><summary>Hint 1 — offsets</summary>
#
# `d = tl.arange(0, HEAD_SIZE)` indexes the head dimension and `j = tl.arange(0, BLOCK_KEYS)` the
# keys; `mask = j < num_keys`. Element `[j, g, d]` of the codes sits at
# `(j * NUM_KV_HEADS + g) * HEAD_SIZE + d`.
# </details>
#
# <details><summary>Hint 2 — a 2-D tile</summary>
#
# `j[:, None]` and `d[None, :]` broadcast to a `[BLOCK_KEYS, HEAD_SIZE]` tile of pointers. Load it
# with `mask=mask[:, None], other=0` and convert with `.to(tl.float32)`.
# </details>
#
# <details><summary>Hint 3 — the fused scale</summary>
#
# `tl.sum(q[None, :] * k, axis=1)` gives one dot product per key. Multiply by `sm_scale * s`,
# where `s` is the `[BLOCK_KEYS]` vector of key scales, and store with the same mask at
# `out_ptr + h * num_keys + j`.
# </details>

# %% tags=["check"]
from kvlab.exercises import check_int8_scores_kernel

result = check_int8_scores_kernel(int8_scores_kernel)
result

# %% [markdown]
# ## Launch it yourself
#
# Once the check passes, this cell launches your kernel on four query heads sharing two KV heads
# and prints its scores next to the answer key's.

# %%
if result.passed:
    import torch

    from kvlab import quantize_per_token_head

    gen = torch.Generator().manual_seed(0)
    q = torch.randn(4, 16, generator=gen)
    k_codes, k_scales = quantize_per_token_head(torch.randn(5, 2, 16, generator=gen), "int8_per_token_head")
    out = torch.empty(4, 5)
    int8_scores_kernel[(4,)](q, k_codes, k_scales, out, 16**-0.5, 5,
                             NUM_KV_HEADS=2, GROUP=2, HEAD_SIZE=16, BLOCK_KEYS=8)
    print("your kernel:\n", out)
    print("answer key:\n", expected_scores(q, k_codes, k_scales, 16**-0.5).float())
else:
    print("Make the check above pass first.")

# %% [markdown]
# ## Think about it
#
# 1. How many bytes does your kernel read per key token and KV head, scale included, for
#    `HEAD_SIZE = 128`? How many would a bf16 cache need?
# 2. The V side has a scale per token too. Where can `s_V[j]` go in `Σ_j p_j · (s_V[j] · V̂_j)` so
#    that the P·V product also multiplies raw codes?
# 3. Why would dequantizing the whole cache to bf16 *before* the kernel throw away the benefit?
