"""Lesson kernel 4: storing low-bit codes, two or four to a byte (kvlab schemes, not vLLM dtypes).

Three small kernels, each doing bit for bit what the reference writer
(:meth:`kvlab.cache.LowBitPagedCache.write`) does:

* ``_int4_write_kernel`` — ``int4_per_token_head``: one program per (token, KV head), like the 8-bit
  per-token-head store, but the head vector is loaded as a ``[D / P, P]`` tile (``P = 2`` codes per
  byte) so that packing is a sum of shifted codes along the second axis: ``byte_j = Σ_k q_jk << 4k``.
* ``_residual_store_kernel`` — KIVI: the new tokens go to their block's bf16 residual page unchanged
  (rounded to bf16). Nothing is quantized yet: a key group is a whole block.
* ``_block_quantize_kernel`` — KIVI: one program per (block leaving the residual, KV head) loads the
  block's ``B × D`` residual keys, takes min and max *down the token axis* (one scale and zero point per
  channel), and the values *along groups of G channels* of each token (a ``[B, D/G, G/P, P]`` tile,
  reduced over its last two axes). Codes are packed the same way as above.

Which blocks leave the residual, and which page a block writes to, is host bookkeeping
(:mod:`kvlab.cache.lowbit_residual`): the host reads the slots once per write.

Divisions use ``tl.math.div_rn`` (correctly rounded, as the reference's tensor divisions); scale and
zero point are rounded to fp16 before the codes are computed from them.
"""

from __future__ import annotations

import torch

from kvlab.cache.batch import AttentionBatch
from kvlab.cache.lowbit_cache import LowBitPagedCache
from kvlab.cache.paged_cache import WriteReport
from kvlab.kernels.devices import require_kernel_device
from kvlab.kernels.launch_config import next_pow2
from kvlab.kernels.numerics import round_half_even, to_bf16, to_fp32
from kvlab.kernels.runtime import INTERPRET, tl, triton
from kvlab.quantization.formats import INT4_QMAX, LOW_BIT_SCALE_FLOOR, SCALE_FLOOR
from kvlab.quantization.lowbit import INT4_OFFSET


@triton.jit
def _pack(q, SHIFTS, AXIS: tl.constexpr):
    """Codes (int32) → bytes: ``Σ_k q_k << shift_k`` along ``AXIS`` (disjoint bits: a sum is an OR)."""
    return tl.sum(q << SHIFTS, axis=AXIS).to(tl.uint8)


@triton.jit
def _int4_head(x_ptr, out_ptr, scale_ptr, keep, D: tl.constexpr, DP_PAD: tl.constexpr, QMAX: tl.constexpr,
               FLOOR: tl.constexpr, OFFSET: tl.constexpr, INTERPRET_: tl.constexpr,
               BYTE_STRIDE: tl.constexpr):
    """Quantize one head vector at ``x_ptr`` to packed int4 at ``out_ptr`` (bytes ``BYTE_STRIDE`` apart)
    and its fp32 scale."""
    j = tl.arange(0, DP_PAD)
    k = tl.arange(0, 2)
    d = j[:, None] * 2 + k[None, :]
    x = to_fp32(tl.load(x_ptr + d, mask=d < D, other=0.0), INTERPRET_)
    s = tl.maximum(tl.math.div_rn(tl.max(tl.max(tl.abs(x), axis=1), axis=0), QMAX), FLOOR)
    inv = tl.math.div_rn(1.0, s)
    q = round_half_even(tl.minimum(tl.maximum(x * inv, -QMAX), QMAX)).to(tl.int32) + OFFSET
    tl.store(out_ptr + j * BYTE_STRIDE, _pack(q, k[None, :] * 4, 1), mask=(j < D // 2) & keep)
    tl.store(scale_ptr, s, mask=keep)


@triton.jit
def _int4_write_kernel(key_ptr, value_ptr, slot_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr,
                       stride_kt, stride_kh, stride_vt, stride_vh,
                       NUM_KV_HEADS: tl.constexpr, BLOCK_SIZE: tl.constexpr, D: tl.constexpr,
                       DV: tl.constexpr,
                       DP_PAD: tl.constexpr, DVP_PAD: tl.constexpr, QMAX: tl.constexpr, FLOOR: tl.constexpr,
                       OFFSET: tl.constexpr, INTERPRET_: tl.constexpr):
    token = tl.program_id(0)
    head = tl.program_id(1)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    keep = slot >= 0
    row = slot * NUM_KV_HEADS + head  # [blocks, B, H] flattened: slot-major
    # values token-minor, [blocks, H, Dv / 2, B]: byte j of this token at
    # ((block·H + head)·Dv/2 + j)·B + offset
    vrow = ((slot // BLOCK_SIZE) * NUM_KV_HEADS + head) * (DV // 2) * BLOCK_SIZE + slot % BLOCK_SIZE
    _int4_head(key_ptr + token * stride_kt + head * stride_kh, kc_ptr + row * (D // 2), ks_ptr + row, keep,
               D, DP_PAD, QMAX, FLOOR, OFFSET, INTERPRET_, 1)
    _int4_head(value_ptr + token * stride_vt + head * stride_vh, vc_ptr + vrow, vs_ptr + row,
               keep, DV, DVP_PAD, QMAX, FLOOR, OFFSET, INTERPRET_, BLOCK_SIZE)


@triton.jit
def _residual_store_kernel(key_ptr, value_ptr, slot_ptr, page_ptr, rk_ptr, rv_ptr,
                           stride_kt, stride_kh, stride_vt, stride_vh,
                           NUM_KV_HEADS: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                           D: tl.constexpr, DV: tl.constexpr, D_PAD: tl.constexpr, DV_PAD: tl.constexpr,
                           INTERPRET_: tl.constexpr):
    token = tl.program_id(0)
    head = tl.program_id(1)
    slot = tl.load(slot_ptr + token).to(tl.int64)
    page = tl.load(page_ptr + token).to(tl.int64)
    keep = slot >= 0
    row = (page * BLOCK_SIZE + slot % BLOCK_SIZE) * NUM_KV_HEADS + head
    d = tl.arange(0, D_PAD)
    k = to_fp32(tl.load(key_ptr + token * stride_kt + head * stride_kh + d, mask=d < D, other=0.0),
                INTERPRET_)
    tl.store(rk_ptr + row * D + d, to_bf16(k, INTERPRET_), mask=(d < D) & keep)
    dv = tl.arange(0, DV_PAD)
    v = to_fp32(tl.load(value_ptr + token * stride_vt + head * stride_vh + dv, mask=dv < DV, other=0.0),
                INTERPRET_)
    tl.store(rv_ptr + row * DV + dv, to_bf16(v, INTERPRET_), mask=(dv < DV) & keep)


@triton.jit
def _min_max_codes(x, lo, hi, Q: tl.constexpr, FLOOR: tl.constexpr):
    """KIVI's quantizer given the group min/max (broadcastable to ``x``): codes, fp16 scale, fp16 zero."""
    zero = lo.to(tl.float16)
    z32 = zero.to(tl.float32)
    scale = tl.maximum(tl.math.div_rn(hi - z32, Q), FLOOR).to(tl.float16)
    inv = tl.math.div_rn(1.0, scale.to(tl.float32))
    q = round_half_even(tl.minimum(tl.maximum((x - z32) * inv, 0.0), Q)).to(tl.int32)
    return q, scale, zero


@triton.jit
def _block_quantize_kernel(block_ptr, page_ptr, rk_ptr, rv_ptr, kc_ptr, vc_ptr, ks_ptr, kz_ptr,
                           vs_ptr, vz_ptr,
                           NUM_KV_HEADS: tl.constexpr, BLOCK_SIZE: tl.constexpr, BITS: tl.constexpr,
                           P: tl.constexpr, D: tl.constexpr, DP_PAD: tl.constexpr, DV: tl.constexpr,
                           G: tl.constexpr, NG_PAD: tl.constexpr, Q: tl.constexpr, FLOOR: tl.constexpr,
                           INTERPRET_: tl.constexpr):
    blk = tl.load(block_ptr + tl.program_id(0)).to(tl.int64)
    page = tl.load(page_ptr + tl.program_id(0)).to(tl.int64)
    head = tl.program_id(1)
    t = tl.arange(0, BLOCK_SIZE)
    kk = tl.arange(0, P)
    rows2 = (t * NUM_KV_HEADS + head)[:, None]  # [B, 1] rows of the block, this head
    rows = rows2[:, :, None]  # [B, 1, 1]

    # keys: [B, D/P, P] tile, min/max down the token axis: one scale and zero point per channel
    j = tl.arange(0, DP_PAD)
    ch = j[:, None] * P + kk[None, :]  # [D/P, P] channel of each code
    cm = (ch < D)[None, :, :]
    x = to_fp32(tl.load(rk_ptr + (page * BLOCK_SIZE * NUM_KV_HEADS + rows) * D + ch[None, :, :], mask=cm,
                        other=0.0), INTERPRET_)
    q, s, z = _min_max_codes(x, tl.min(x, axis=0)[None, :, :], tl.max(x, axis=0)[None, :, :], Q, FLOOR)
    out_rows = blk * BLOCK_SIZE * NUM_KV_HEADS + rows2
    tl.store(kc_ptr + out_rows * (D // P) + j[None, :], _pack(q, kk[None, None, :] * BITS, 2),
             mask=(j < D // P)[None, :])
    per_channel = (blk * NUM_KV_HEADS + head) * D + ch
    tl.store(ks_ptr + per_channel, tl.reshape(s, [DP_PAD, P]), mask=ch < D)
    tl.store(kz_ptr + per_channel, tl.reshape(z, [DP_PAD, P]), mask=ch < D)

    # values: [B, D/G, G/P, P] tile, min/max over each group of G channels of one token
    GP: tl.constexpr = G // P
    g = tl.arange(0, NG_PAD)
    gp = tl.arange(0, GP)
    vch = g[:, None, None] * G + gp[None, :, None] * P + kk[None, None, :]  # [D/G, G/P, P]
    vm = (vch < DV)[None, :, :, :]
    vrows = rows[:, :, :, None]
    v = to_fp32(tl.load(rv_ptr + (page * BLOCK_SIZE * NUM_KV_HEADS + vrows) * DV + vch[None, :, :, :],
                        mask=vm, other=0.0), INTERPRET_)
    lo = tl.min(tl.min(v, axis=3), axis=2)[:, :, None, None]
    hi = tl.max(tl.max(v, axis=3), axis=2)[:, :, None, None]
    q, s, z = _min_max_codes(v, lo, hi, Q, FLOOR)
    # values are stored token-minor ([blocks, H, Dv/P, B] codes, [blocks, H, Dv/G, B] scales)
    byte = g[:, None] * GP + gp[None, :]  # [D/G, G/P]
    head_base = (blk * NUM_KV_HEADS + head) * BLOCK_SIZE
    tl.store(vc_ptr + head_base * (DV // P) + byte[None, :, :] * BLOCK_SIZE + t[:, None, None],
             _pack(q, kk[None, None, None, :] * BITS, 3), mask=(g < DV // G)[None, :, None])
    per_group = head_base * (DV // G) + g[None, :] * BLOCK_SIZE + t[:, None]
    tl.store(vs_ptr + per_group, tl.reshape(s, [BLOCK_SIZE, NG_PAD]), mask=(g < DV // G)[None, :])
    tl.store(vz_ptr + per_group, tl.reshape(z, [BLOCK_SIZE, NG_PAD]), mask=(g < DV // G)[None, :])


def _inputs_fp32_or_16(key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float64 input becomes fp32 (the reference computes in fp32 too); rows need unit stride."""
    key = key.float() if key.dtype == torch.float64 else key
    value = value.float() if value.dtype == torch.float64 else value
    return (key if key.stride(-1) == 1 else key.contiguous(),
            value if value.stride(-1) == 1 else value.contiguous())


def quantize_leaving_blocks(cache: LowBitPagedCache, blocks: list[int]) -> None:
    """Quantize KIVI blocks from their residual pages (Triton) and give the pages back."""
    if not blocks:
        return
    sch, nkv, d, dv = cache.scheme, cache.num_kv_heads, cache.head_size, cache.head_size_v
    ids = torch.tensor(blocks, dtype=torch.int32)
    pages = cache.pool.page_of[ids].to(cache.device)
    p = sch.codes_per_byte
    _block_quantize_kernel[(len(blocks), nkv)](
        ids.to(cache.device), pages, cache.residual_key, cache.residual_value, cache.key_codes,
        cache.value_codes, cache.key_scale, cache.key_zero, cache.value_scale, cache.value_zero,
        NUM_KV_HEADS=nkv, BLOCK_SIZE=cache.block_size, BITS=sch.bits, P=p, D=d,
        DP_PAD=next_pow2(d // p), DV=dv, G=sch.group_size, NG_PAD=next_pow2(dv // sch.group_size),
        Q=float(sch.levels), FLOOR=LOW_BIT_SCALE_FLOOR, INTERPRET_=INTERPRET,
    )
    for b in blocks:
        cache.pool.release(b)


def write_lowbit_cache(cache: LowBitPagedCache, key: torch.Tensor, value: torch.Tensor,
                       slot_mapping: torch.Tensor, *, batch: AttentionBatch | None = None,
                       check_finite: bool = True) -> WriteReport:
    """Store new tokens in a low-bit cache with Triton; same contract and bits as the reference write.

    Args:
        cache: an ``int4_per_token_head`` or KIVI cache.
        key, value: ``[num_tokens, num_kv_heads, head_size(_v)]`` float16/bfloat16/float32/float64.
        slot_mapping: ``[num_tokens]`` slots; negative slots are padding and skipped.
        batch: the step's batch; needed by KIVI schemes whose residual is longer than one block.
        check_finite: refuse NaN/Inf (KIVI always refuses them, and values beyond fp16).

    Raises:
        ValueError: what the reference writer refuses, or tensors on the wrong device.
    """
    require_kernel_device(cache=cache.key_codes)
    keep = cache.check_write(key, value, slot_mapping, check_finite)
    num_written = int(keep.sum())
    report = WriteReport(num_written, key.shape[0] - num_written)
    if key.shape[0] == 0:
        return report
    key, value = _inputs_fp32_or_16(key, value)
    nkv, d, dv = cache.num_kv_heads, cache.head_size, cache.head_size_v
    strides = (key.stride(0), key.stride(1), value.stride(0), value.stride(1))
    if not cache.is_kivi:
        _int4_write_kernel[(key.shape[0], nkv)](
            key, value, slot_mapping, cache.key_codes, cache.value_codes, cache.key_scale, cache.value_scale,
            *strides, NUM_KV_HEADS=nkv, BLOCK_SIZE=cache.block_size, D=d, DV=dv, DP_PAD=next_pow2(d // 2),
            DVP_PAD=next_pow2(dv // 2),
            QMAX=INT4_QMAX, FLOOR=SCALE_FLOOR, OFFSET=INT4_OFFSET, INTERPRET_=INTERPRET)
        return report
    slots = slot_mapping.cpu().long()
    pages = torch.full_like(slots, -1)
    blocks = slots[slots >= 0] // cache.block_size
    pages[slots >= 0] = cache.pool.pages_for(blocks).long()
    _residual_store_kernel[(key.shape[0], nkv)](
        key, value, slot_mapping, pages.to(torch.int32).to(cache.device), cache.residual_key,
        cache.residual_value, *strides, NUM_KV_HEADS=nkv, BLOCK_SIZE=cache.block_size, D=d, DV=dv,
        D_PAD=next_pow2(d), DV_PAD=next_pow2(dv), INTERPRET_=INTERPRET)
    cache.pool.add_tokens(blocks)
    quantize_leaving_blocks(cache, cache.pool.leaving(cache.block_size, cache.scheme.residual_blocks, batch))
    cache.residual_page.copy_(cache.pool.page_of)
    return report
