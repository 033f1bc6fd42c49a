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
# # Exercise 13 — Quantize a block of keys per channel (KIVI)
#
# *Follows lesson `02_quantization_error` (section 7). About 25 minutes.*
#
# kvlab's `kivi2`/`kivi4` caches (kvlab schemes, not vLLM `--kv-cache-dtype` values) quantize keys
# **per channel**: one full block of `B` tokens is one group, and each (head, channel) gets its own
# fp16 scale and zero point from the min and max **over the block's tokens**. With `Q = 2**bits - 1`:
#
# ```
# z = fp16( min_t x[t, h, d] )                               # zero point, [heads, head_size]
# s = fp16( max( (max_t x[t, h, d] - z) / Q , 2**-14 ) )     # scale, [heads, head_size]
# q = round_half_to_even( clamp( (x - z) * (1/s), 0, Q ) )   # in float32, with the fp16 z and s
# ```
#
# then the codes are **packed** `8 / bits` to a byte along the channels: code `k` of byte `j` holds
# channel `j * (8 / bits) + k` in bits `[k * bits, (k + 1) * bits)` (the first channel in the low bits).
#
# Write `quantize_key_block(keys, bits)` for `keys` of shape `[block_size, heads, head_size]`
# (float32, float16 or bfloat16) and `bits` 2 or 4. Return `(packed, scale, zero)`: `packed` a
# `uint8` tensor `[block_size, heads, head_size * bits // 8]`, `scale` and `zero` `float16` tensors
# `[heads, head_size]`. The check compares all three **bit for bit** with kvlab's quantizer.

# %% [markdown]
# ## Your code

# %% tags=["stub"]
import torch


def quantize_key_block(keys: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """KIVI keys of one block, per channel: ``(packed uint8, scale fp16 [H, D], zero fp16 [H, D])``."""
    raise NotImplementedError("write quantize_key_block")

# %% [markdown]
# <details><summary>Hint 1 — the axis</summary>
#
# Keys have outlier *channels*, so the group is a channel: reduce over the tokens, `dim=0`
# (`x.amin(dim=0)`, `x.amax(dim=0)`), which leaves one value per (head, channel).
# </details>
#
# <details><summary>Hint 2 — fp16 first, then the codes</summary>
#
# Round the zero point and the scale to float16 (`.half()`) and compute the codes from those rounded
# values (back in float32: `.float()`), so that `q * s + z` reproduces what the cache stores. Divide
# by a tensor (`torch.tensor(float(Q))`) and use `torch.ones_like(s32) / s32` for `1/s`.
# </details>
#
# <details><summary>Hint 3 — packing</summary>
#
# Reshape the codes to `[B, H, head_size // per_byte, per_byte]`, shift code `k` left by `k * bits`
# and sum over the last dimension (the bits do not overlap, so a sum is an OR); cast to `uint8`.
# </details>

# %% tags=["check"]
from kvlab.exercises import check_quantize_key_block

check_quantize_key_block(quantize_key_block)

# %% [markdown]
# ## Think about it
#
# 1. A key block has one channel with a +40 offset. How many levels does a per-**token** 2-bit scale
#    leave for the other channels? And a per-channel one?
# 2. Why can values not be quantized per channel over a block in the same way when the cache is
#    written one token at a time? (What does the residual hold?)
# 3. The scales cost `head_size × 2 × 2` bytes per head per block. How many bytes per token is that at
#    block 16 and at block 32, against 32 bytes of 2-bit codes for head 128?
