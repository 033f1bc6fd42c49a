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
# # Solution — Exercise 13, quantize a block of keys per channel (KIVI)

# %% tags=["solution"]
import torch


def quantize_key_block(keys: torch.Tensor, bits: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """KIVI keys of one block, per channel: ``(packed uint8, scale fp16 [H, D], zero fp16 [H, D])``."""
    x = keys.float()
    q = torch.tensor(float(2**bits - 1))
    zero = x.amin(dim=0).half()
    scale = torch.clamp((x.amax(dim=0) - zero.float()) / q, min=2.0**-14).half()
    inverse = torch.ones_like(scale, dtype=torch.float32) / scale.float()
    codes = torch.round(torch.clamp((x - zero.float()) * inverse, 0.0, float(2**bits - 1))).to(torch.int32)
    per_byte = 8 // bits
    b, h, d = keys.shape
    shifts = torch.arange(per_byte, dtype=torch.int32) * bits
    packed = (codes.reshape(b, h, d // per_byte, per_byte) << shifts).sum(dim=-1).to(torch.uint8)
    return packed, scale, zero


# %% [markdown]
# ## Answers
#
# 1. Per token, the scale spans the +40 offset: about 40 / 3 ≈ 13 per step at 2 bits, so the other
#    channels (σ ≈ 1) all land on one or two codes. Per channel, the offset is subtracted by the zero
#    point and each channel gets its own three steps over its own range.
# 2. A per-channel group needs all of its tokens before its min and max are known. Keys can wait in
#    the bf16 residual until their block is full; values are read token by token by the PV product
#    and have no outlier channels, so they are grouped per token and need no waiting.
# 3. `128 × 2 × 2 = 512` bytes per head per block: 32 bytes per token at block 16 (as much as the
#    2-bit codes), 16 at block 32. Longer blocks make 2-bit keys cheaper.

# %%
if __name__ == "__main__":  # run as a notebook or a script: verify the solution
    from kvlab.exercises import check_quantize_key_block

    print(check_quantize_key_block(quantize_key_block))
