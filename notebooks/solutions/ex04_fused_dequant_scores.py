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
# # Solution — Exercise 4, dequantize inside the attention score

# %% tags=["solution"]
from kvlab.kernels.runtime import tl, triton


@triton.jit
def int8_scores_kernel(
    q_ptr, k_codes_ptr, k_scales_ptr, out_ptr, sm_scale, num_keys,
    NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_SIZE: tl.constexpr, BLOCK_KEYS: tl.constexpr,
):
    h = tl.program_id(0)  # the query head of this program
    g = h // GROUP  # its KV head: consecutive query heads share one
    d = tl.arange(0, HEAD_SIZE)
    j = tl.arange(0, BLOCK_KEYS)
    mask = j < num_keys
    q = tl.load(q_ptr + h * HEAD_SIZE + d)
    codes = tl.load(k_codes_ptr + (j[:, None] * NUM_KV_HEADS + g) * HEAD_SIZE + d[None, :],
                    mask=mask[:, None], other=0)
    scales = tl.load(k_scales_ptr + j * NUM_KV_HEADS + g, mask=mask, other=0.0)
    dots = tl.sum(q[None, :] * codes.to(tl.float32), axis=1)  # raw int8 codes, fp32 accumulation
    tl.store(out_ptr + h * num_keys + j, dots * (sm_scale * scales), mask=mask)


# %% [markdown]
# ## Answers
#
# 1. 128 bytes of codes + 4 bytes of scale = **132 bytes** per key token and KV head; bf16 needs
#    256. (V costs the same again.)
# 2. Fold it into the probabilities: `Σ_j (p_j · s_V[j]) · V̂_j`. vLLM rounds `p_j · s_V[j]` to the
#    query dtype and then runs the P·V product on the raw codes.
# 3. The point of the int8 cache is to read half the bytes. A separate dequantization pass reads the
#    int8 cache, writes a bf16 copy and the kernel then reads the copy: more traffic than a bf16 cache
#    in the first place. An unfused dequantization is a common reason for a quantized cache to run
#    *slower* than bf16.

# %%
if __name__ == "__main__":  # run as a notebook or a script: verify the solution
    from kvlab.exercises import check_int8_scores_kernel

    print(check_int8_scores_kernel(int8_scores_kernel))
