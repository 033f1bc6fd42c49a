"""Deliberately wrong Triton kernels for exercise 4, one common mistake each."""

from __future__ import annotations

from kvlab.kernels.runtime import tl, triton


@triton.jit
def scores_wrong_gqa(q_ptr, k_codes_ptr, k_scales_ptr, out_ptr, sm_scale, num_keys,
                     NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_SIZE: tl.constexpr,
                     BLOCK_KEYS: tl.constexpr):
    h = tl.program_id(0)
    g = h % NUM_KV_HEADS  # wrong: interleaves query heads over KV heads
    d = tl.arange(0, HEAD_SIZE)
    j = tl.arange(0, BLOCK_KEYS)
    mask = j < num_keys
    q = tl.load(q_ptr + h * HEAD_SIZE + d)
    k = tl.load(k_codes_ptr + (j[:, None] * NUM_KV_HEADS + g) * HEAD_SIZE + d[None, :],
                mask=mask[:, None], other=0)
    s = tl.load(k_scales_ptr + j * NUM_KV_HEADS + g, mask=mask, other=0.0)
    dots = tl.sum(q[None, :] * k.to(tl.float32), axis=1)
    tl.store(out_ptr + h * num_keys + j, dots * (sm_scale * s), mask=mask)


@triton.jit
def scores_without_key_scale(q_ptr, k_codes_ptr, k_scales_ptr, out_ptr, sm_scale, num_keys,
                             NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_SIZE: tl.constexpr,
                             BLOCK_KEYS: tl.constexpr):
    h = tl.program_id(0)
    g = h // GROUP
    d = tl.arange(0, HEAD_SIZE)
    j = tl.arange(0, BLOCK_KEYS)
    mask = j < num_keys
    q = tl.load(q_ptr + h * HEAD_SIZE + d)
    k = tl.load(k_codes_ptr + (j[:, None] * NUM_KV_HEADS + g) * HEAD_SIZE + d[None, :],
                mask=mask[:, None], other=0)
    tl.store(out_ptr + h * num_keys + j, tl.sum(q[None, :] * k.to(tl.float32), axis=1) * sm_scale, mask=mask)


@triton.jit
def scores_unmasked_store(q_ptr, k_codes_ptr, k_scales_ptr, out_ptr, sm_scale, num_keys,
                          NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_SIZE: tl.constexpr,
                          BLOCK_KEYS: tl.constexpr):
    h = tl.program_id(0)
    g = h // GROUP
    d = tl.arange(0, HEAD_SIZE)
    j = tl.arange(0, BLOCK_KEYS)
    q = tl.load(q_ptr + h * HEAD_SIZE + d)
    k = tl.load(k_codes_ptr + (j[:, None] * NUM_KV_HEADS + g) * HEAD_SIZE + d[None, :])
    s = tl.load(k_scales_ptr + j * NUM_KV_HEADS + g)
    tl.store(out_ptr + h * num_keys + j, tl.sum(q[None, :] * k.to(tl.float32), axis=1) * (sm_scale * s))


@triton.jit
def scores_without_softmax_scale(q_ptr, k_codes_ptr, k_scales_ptr, out_ptr, sm_scale, num_keys,
                                 NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_SIZE: tl.constexpr,
                                 BLOCK_KEYS: tl.constexpr):
    h = tl.program_id(0)
    g = h // GROUP
    d = tl.arange(0, HEAD_SIZE)
    j = tl.arange(0, BLOCK_KEYS)
    mask = j < num_keys
    q = tl.load(q_ptr + h * HEAD_SIZE + d)
    k = tl.load(k_codes_ptr + (j[:, None] * NUM_KV_HEADS + g) * HEAD_SIZE + d[None, :],
                mask=mask[:, None], other=0)
    s = tl.load(k_scales_ptr + j * NUM_KV_HEADS + g, mask=mask, other=0.0)
    tl.store(out_ptr + h * num_keys + j, tl.sum(q[None, :] * k.to(tl.float32), axis=1) * s, mask=mask)


WRONG_KERNELS = [
    ("query head h reads KV head h % num_kv_heads", scores_wrong_gqa, "GQA: 8 query heads share 2 KV heads"),
    ("key scale forgotten", scores_without_key_scale, "one key"),
    ("stores not masked", scores_unmasked_store, "one key"),
    ("softmax scale forgotten", scores_without_softmax_scale, "one key"),
]
