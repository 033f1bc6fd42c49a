"""Prefill over a low-bit cache by dequantizing first: each K/V block once, then the 16-bit kernel.

The fused low-bit kernel (:mod:`kvlab.kernels.lowbit_attention`) dequantizes a K/V tile inside every
program that reads it. In decode that is once per tile; in prefill every query block of a head reads
every tile of its context again, so a 2,048-token chunk dequantizes each tile up to 128 times.
This path does it once: a small kernel writes the blocks the batch reads as 16-bit K/V into a
compact scratch cache (its own block ids, ``[used blocks, B, H, D]``), and the 16-bit paged-attention
kernel (:mod:`kvlab.kernels.attention`) runs over it. It is the default for batches with a prefill
chunk (:func:`kvlab.kernels.lowbit_attention_call.prepare_lowbit_call`): on an H100, 2,048 query tokens
over 8,192 took 1.04-1.07× bf16's time, against 3.0-3.3× for the fused kernel.

**What it costs: transient memory**, the scratch of :mod:`kvlab.kernels.dequantized_scratch`: 32 MiB for
8,192 tokens of 8 KV heads at head 128 in bf16, about 3.9× what the int4 codes and scales of that context
occupy. A batch that mixes decodes into a prefill chunk dequantizes their contexts too.

Values: KIVI ``code · s + z`` and int4 ``(code − 8) · s`` in fp32, rounded once to the query's dtype
(bf16/fp16, fp32 for fp32 queries); blocks still in the KIVI residual are copied from their bf16 pages.
A never-written slot reads NaN scales and comes out NaN, as in the fused kernel.
"""

from __future__ import annotations

import torch

from kvlab.cache.batch import AttentionBatch
from kvlab.cache.lowbit_cache import LowBitPagedCache
from kvlab.kernels.attention import prepare_paged_attention
from kvlab.kernels.attention_checks import check_attention_call
from kvlab.kernels.dequantized_scratch import DequantizedPrefillCall, scratch_for
from kvlab.kernels.dtypes import triton_dtype
from kvlab.kernels.launch_config import next_pow2
from kvlab.kernels.numerics import to_fp32, to_storage
from kvlab.kernels.runtime import INTERPRET, tl, triton
from kvlab.quantization.lowbit import INT4_OFFSET


@triton.jit
def _dequantize_rows(codes, s, z, r, from_res, BITS: tl.constexpr, KIVI: tl.constexpr, OFFSET: tl.constexpr,
                     INTERPRET_: tl.constexpr):
    """Real values (fp32) of codes ``[B, W/P, P]`` (low ``BITS`` bits) with their scales ``s`` and zero
    points ``z`` (KIVI; residual rows ``r`` where ``from_res``) or per-token scales ``s`` (int4)."""
    c = codes & ((1 << BITS) - 1)
    if KIVI:
        x = c.to(tl.float32) * to_fp32(s, INTERPRET_) + to_fp32(z, INTERPRET_)
        x = tl.where(from_res, to_fp32(r, INTERPRET_), x)
    else:
        x = (c.to(tl.int32) - OFFSET).to(tl.float32) * s
    return x


@triton.jit
def _store_rows(b, s_ptr, z_ptr, r_ptr, at, res_at, m, from_res, token_row, kk, out_ptr, BITS: tl.constexpr,
                KIVI: tl.constexpr, OFFSET: tl.constexpr, OUT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr):
    """Dequantize the code bytes ``b`` ``[B, W/P, 1]`` of one block's K or V rows (part ``kk``:
    ``[1, 1, P]``) and store them at ``out_ptr`` (masked by ``m``): KIVI scales and zero points at ``at``
    and residual rows at ``res_at``, or the int4 per-token scale of ``token_row``."""
    if KIVI:
        s = tl.load(s_ptr + at, mask=m, other=0.0)
        z = tl.load(z_ptr + at, mask=m, other=0.0)
        r = tl.load(r_ptr + res_at, mask=m & from_res, other=0.0)
    else:
        s = tl.load(s_ptr + token_row)
        z = s
        r = s
    x = _dequantize_rows(b >> (kk * BITS), s, z, r, from_res, BITS, KIVI, OFFSET, INTERPRET_)
    tl.store(out_ptr, to_storage(x, OUT_DTYPE, INTERPRET_), mask=m)


@triton.jit
def _dequantize_blocks_kernel(
    blocks_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, kz_ptr, vz_ptr, rk_ptr, rv_ptr, rpage_ptr,
    k_out_ptr, v_out_ptr,
    NUM_KV_HEADS: tl.constexpr, BLOCK_SIZE: tl.constexpr, D: tl.constexpr, DP_PAD: tl.constexpr,
    DV: tl.constexpr, DVP_PAD: tl.constexpr, BITS: tl.constexpr, P: tl.constexpr, G: tl.constexpr,
    KIVI: tl.constexpr, OFFSET: tl.constexpr, OUT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr,
):
    i = tl.program_id(0)
    head = tl.program_id(1)
    blk = tl.load(blocks_ptr + i).to(tl.int64)
    t = tl.arange(0, BLOCK_SIZE)[:, None, None]  # [B, 1, 1]
    kk = tl.arange(0, P)[None, None, :]
    row = (blk * BLOCK_SIZE + t) * NUM_KV_HEADS + head  # token-major rows of this head
    out_row = (i * BLOCK_SIZE + t) * NUM_KV_HEADS + head  # the scratch cache's rows
    page = tl.full([1, 1, 1], -1, tl.int64)
    if KIVI:
        page = tl.load(rpage_ptr + blk + t * 0).to(tl.int64)  # [B, 1, 1], one value
    from_res = page >= 0
    res_row = (page * BLOCK_SIZE + t) * NUM_KV_HEADS + head

    # keys, token-major codes [B, D/P]: channel j·P + k at bits k·BITS of byte j
    j = tl.arange(0, DP_PAD)[None, :, None]
    ch = j * P + kk  # [1, D/P, P]
    b = tl.load(kc_ptr + row * (D // P) + j, mask=j < D // P, other=0)
    per_channel = (blk * NUM_KV_HEADS + head) * D + ch
    _store_rows(b, ks_ptr, kz_ptr, rk_ptr, per_channel, res_row * D + ch, ch < D, from_res, row, kk,
                k_out_ptr + out_row * D + ch, BITS, KIVI, OFFSET, OUT_DTYPE, INTERPRET_)

    # values, token-minor codes [blocks, H, Dv/P, B]; KIVI scales [blocks, H, Dv/G, B]
    jv = tl.arange(0, DVP_PAD)[None, :, None]
    vch = jv * P + kk
    head_base = (blk * NUM_KV_HEADS + head) * BLOCK_SIZE
    b = tl.load(vc_ptr + head_base * (DV // P) + jv * BLOCK_SIZE + t, mask=jv < DV // P, other=0)
    grp = head_base * (DV // G) + (vch // G) * BLOCK_SIZE + t
    _store_rows(b, vs_ptr, vz_ptr, rv_ptr, grp, res_row * DV + vch, vch < DV, from_res, row, kk,
                v_out_ptr + out_row * DV + vch, BITS, KIVI, OFFSET, OUT_DTYPE, INTERPRET_)


def prepare_dequantized_prefill(query: torch.Tensor, cache: LowBitPagedCache, batch: AttentionBatch, *,
                                scale: float | None = None, sliding_window: int | None = None,
                                softcap: float | None = None, out: torch.Tensor | None = None
                                ) -> DequantizedPrefillCall:
    """Prepare attention over a low-bit cache that dequantizes the batch's blocks once (module docstring).

    Arguments as :func:`kvlab.kernels.lowbit_attention_call.lowbit_paged_attention`; the block tables
    are read on the host once, here.
    """
    # the fused path's checks first, so that both paths refuse bad input with the same message
    _, out, query = check_attention_call(query, cache, batch, stored=cache.key_codes, scale=scale,
                                         sliding_window=sliding_window, softcap=softcap, out=out,
                                         num_splits=None)
    bs, nkv, d, dv = cache.block_size, cache.num_kv_heads, cache.head_size, cache.head_size_v
    dtype = query.dtype
    used, scratch, local = scratch_for(batch, bs, nkv, d, dv, dtype, query.device)
    attention = prepare_paged_attention(query, scratch, local, scale=scale, sliding_window=sliding_window,
                                        softcap=softcap, out=out, dequantize_first=False)
    sch, kivi, dummy = cache.scheme, cache.is_kivi, cache.key_scale
    args = (used, cache.key_codes, cache.value_codes, cache.key_scale, cache.value_scale,
            cache.key_zero if kivi else dummy, cache.value_zero if kivi else dummy,
            cache.residual_key if kivi else dummy, cache.residual_value if kivi else dummy,
            cache.residual_page if kivi else dummy, scratch.key, scratch.value)
    p = sch.codes_per_byte
    consts = dict(NUM_KV_HEADS=nkv, BLOCK_SIZE=bs, D=d, DP_PAD=next_pow2(d // p), DV=dv,
                  DVP_PAD=next_pow2(dv // p), BITS=sch.bits, P=p, G=sch.group_size or 16, KIVI=kivi,
                  OFFSET=INT4_OFFSET, OUT_DTYPE=triton_dtype(dtype), INTERPRET_=INTERPRET)
    return DequantizedPrefillCall(attention.out, scratch, local, attention,
                                  (_dequantize_blocks_kernel, (used.numel(), nkv), args, consts))
