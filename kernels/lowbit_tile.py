"""One key tile of the low-bit attention kernel: packed codes → dot operands → online softmax.

**Codes by position in the byte.** Byte ``j`` of a row holds channels ``j·P + k`` for
``k = 0 .. P − 1`` (``P = 8 / bits``). Instead of widening a byte tile to ``[TILE_N, D]`` (a
reshape that interleaves channels and costs a shuffle through shared memory), the tile is used as
``P`` *parts* ``(byte >> k·bits) & mask`` of shape ``[TILE_N, D / P]``, each a plain elementwise
function of the loaded bytes. The query is loaded once as the matching ``P`` strided parts, so
``q · kᵀ = Σ_k q_k · k_kᵀ`` (``P`` dots of depth ``D / P``), and the output is kept as ``P``
accumulators ``p · v_k`` that are stored to channels ``j·P + k`` at the end. Nothing is interleaved.

**Dequantization, cheap on the GPU.**

* ``int4_per_token_head``: ``code − 8`` is an int8 in −7..7, converted to the dot dtype (Triton lowers
  int8 → bf16/fp16 to byte permutes and one packed subtraction, no conversion instruction); the K
  scale multiplies the score, the V scale folds into ``p``, as for int8 per-token-head.
* KIVI with 16-bit queries: the dots run in **fp16**. KIVI's scales and zero points are fp16 and its
  values lie within fp16's range, so ``code · s + z`` is computed in fp16 (packed half-precision
  arithmetic, no fp32 round trip and no conversion instruction), one rounding to fp16 per element
  (finer than bf16's). A bf16 query is scaled into fp16's range by a power of two (exact, see
  :mod:`kvlab.kernels.lowbit_attention`). With fp32 queries everything is fp32.
* KIVI key scales belong to (block, channel): a tile of ``BPT`` whole blocks loads them as
  ``[BPT, D / P]`` and broadcasts each over its block's keys; value scales belong to (token, group of
  ``G`` channels) and are broadcast over the ``G / P`` bytes of their group: the code tiles are
  loaded in those 3-D shapes directly, and flattened only for the dot.

**Residual.** ``MIXED=False`` tiles hold only quantized blocks (the kernel knows which tiles are past
the residual of every sequence), so they load no residual at all. ``MIXED=True`` tiles (the last few
of a KIVI sequence) pick, per key, the bf16 residual row when ``residual_page[block] >= 0``.
"""

from __future__ import annotations

import math

from kvlab.kernels.numerics import round_to_dot_dtype, to_fp32
from kvlab.kernels.runtime import tl, triton

LOG2E: tl.constexpr = tl.constexpr(math.log2(math.e))


@triton.jit
def code_part(b, K: tl.constexpr, BITS: tl.constexpr):
    """Codes at position ``K`` of every byte of ``b`` (uint8 in, uint8 out)."""
    return (b >> (K * BITS)) & ((1 << BITS) - 1)


@triton.jit
def as_dot_operand(x, DOT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr):
    """An exact int8/fp16/bf16 tensor → dot operand: the dot dtype compiled, fp32 in the interpreter
    (whose bf16 dot multiplies bit patterns; see :mod:`kvlab.kernels.numerics`)."""
    if INTERPRET_:
        return round_to_dot_dtype(to_fp32(x, INTERPRET_), DOT_DTYPE, INTERPRET_)
    else:
        return x.to(DOT_DTYPE)


@triton.jit
def kivi_dequant(c, s, z, HALF_DEQ: tl.constexpr, DOT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr):
    """``c · s + z`` (codes uint8, fp16 scale and zero point broadcastable to ``c``) as dot operand."""
    if HALF_DEQ:
        # code → fp16 without a conversion instruction: 0x6400 | c is the fp16 number 1024 + c
        # (c < 1024), and subtracting 1024 is exact
        x = ((c.to(tl.int16) | 0x6400).to(tl.float16, bitcast=True) - 1024.0) * s + z
    else:
        x = c.to(tl.float32) * s.to(tl.float32) + z.to(tl.float32)
    return as_dot_operand(x, DOT_DTYPE, INTERPRET_)


@triton.jit
def key_part(kc_ptr, ks_ptr, kz_ptr, rk_ptr, slot_row, blk_b, b_valid, res_row, packed, from_res, kv_head,
             K: tl.constexpr, NUM_KV_HEADS: tl.constexpr, D: tl.constexpr, DP: tl.constexpr,
             DP_PAD: tl.constexpr, BITS: tl.constexpr, P: tl.constexpr, KIVI: tl.constexpr,
             MIXED: tl.constexpr, BPT: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
             HALF_DEQ: tl.constexpr, DOT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr):
    """Part ``K`` of the key tile, ``[TILE_N, D / P]`` (padded), ready for ``tl.dot``.

    ``slot_row``/``packed``/``from_res``/``res_row`` are per key (``[TILE_N]``); ``blk_b``/``b_valid``
    per whole block of the tile (``[BPT]``, KIVI only).
    """
    j = tl.arange(0, DP_PAD)
    jm = j < DP
    if KIVI and BPT > 1:
        slot3 = tl.reshape(slot_row, [BPT, BLOCK_SIZE])
        packed3 = tl.reshape(packed, [BPT, BLOCK_SIZE])
        b = tl.load(kc_ptr + slot3[:, :, None] * DP + j[None, None, :],
                    mask=packed3[:, :, None] & jm[None, None, :], other=0)
    else:
        b = tl.load(kc_ptr + slot_row[:, None] * DP + j[None, :], mask=packed[:, None] & jm[None, :], other=0)
    c = code_part(b, K, BITS)
    if KIVI:
        # one fp16 scale and zero point per (block, channel): [BPT, D / P], broadcast over the block
        ch = (blk_b * NUM_KV_HEADS + kv_head)[:, None] * D + j[None, :] * P + K
        sm = b_valid[:, None] & jm[None, :]
        s = tl.load(ks_ptr + ch, mask=sm, other=0.0)
        z = tl.load(kz_ptr + ch, mask=sm, other=0.0)
        if BPT > 1:
            x = tl.reshape(kivi_dequant(c, s[:, None, :], z[:, None, :], HALF_DEQ, DOT_DTYPE, INTERPRET_),
                           [TILE_N, DP_PAD])
        else:
            x = kivi_dequant(c, s, z, HALF_DEQ, DOT_DTYPE, INTERPRET_)
        if MIXED:
            r = tl.load(rk_ptr + res_row[:, None] * D + j[None, :] * P + K,
                        mask=from_res[:, None] & jm[None, :], other=0.0)
            x = tl.where(from_res[:, None], as_dot_operand(r, DOT_DTYPE, INTERPRET_), x)
    else:
        x = as_dot_operand(c.to(tl.int8) - 8, DOT_DTYPE, INTERPRET_)
    return x


@triton.jit
def value_part(vc_ptr, vs_ptr, vz_ptr, rv_ptr, slot_row, res_row, packed, from_res, K: tl.constexpr,
               DV: tl.constexpr, DVP: tl.constexpr, DVP_PAD: tl.constexpr, G: tl.constexpr,
               BITS: tl.constexpr, P: tl.constexpr, KIVI: tl.constexpr, MIXED: tl.constexpr,
               TILE_N: tl.constexpr, HALF_DEQ: tl.constexpr, DOT_DTYPE: tl.constexpr,
               INTERPRET_: tl.constexpr):
    """Part ``K`` of the value tile, ``[TILE_N, Dv / P]`` (padded), ready for ``tl.dot``."""
    if KIVI:
        NG: tl.constexpr = DVP_PAD * P // G  # value groups (padded)
        GB: tl.constexpr = G // P  # bytes of one group
        g = tl.arange(0, NG)
        i = tl.arange(0, GB)
        gm = (g < DV // G)[None, :]
        byte = g[:, None] * GB + i[None, :]
        b = tl.load(vc_ptr + slot_row[:, None, None] * DVP + byte[None, :, :],
                    mask=packed[:, None, None] & gm[:, :, None], other=0)
        grp = slot_row[:, None] * (DV // G) + g[None, :]
        s = tl.load(vs_ptr + grp, mask=packed[:, None] & gm, other=0.0)[:, :, None]
        z = tl.load(vz_ptr + grp, mask=packed[:, None] & gm, other=0.0)[:, :, None]
        x = tl.reshape(kivi_dequant(code_part(b, K, BITS), s, z, HALF_DEQ, DOT_DTYPE, INTERPRET_),
                       [TILE_N, DVP_PAD])
        if MIXED:
            jv = tl.arange(0, DVP_PAD)
            r = tl.load(rv_ptr + res_row[:, None] * DV + jv[None, :] * P + K,
                        mask=from_res[:, None] & (jv < DVP)[None, :], other=0.0)
            x = tl.where(from_res[:, None], as_dot_operand(r, DOT_DTYPE, INTERPRET_), x)
    else:
        jv = tl.arange(0, DVP_PAD)
        b = tl.load(vc_ptr + slot_row[:, None] * DVP + jv[None, :],
                    mask=packed[:, None] & (jv < DVP)[None, :], other=0)
        x = as_dot_operand(code_part(b, K, BITS).to(tl.int8) - 8, DOT_DTYPE, INTERPRET_)
    return x


@triton.jit
def attend_lowbit_tile(
    t, q0, q1, q2, q3, m_i, l_i, a0, a1, a2, a3, q_pos, row_valid, kv_start, kv_end, kv_head, bt_row,
    kc_ptr, vc_ptr, ks_ptr, vs_ptr, kz_ptr, vz_ptr, rk_ptr, rv_ptr, rpage_ptr, qk_scale, softcap, window,
    MIXED: tl.constexpr, NUM_KV_HEADS: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, DP_PAD: tl.constexpr,
    DV: tl.constexpr, DVP: tl.constexpr, DVP_PAD: tl.constexpr, BITS: tl.constexpr, P: tl.constexpr,
    G: tl.constexpr, KIVI: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
    HALF_DEQ: tl.constexpr, DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr,
    USE_WINDOW: tl.constexpr, USE_SOFTCAP: tl.constexpr, INTERPRET_: tl.constexpr,
):
    """Fold key tile ``t`` into the online softmax ``(m_i, l_i)`` and the ``P`` accumulator parts
    ``a0 .. a3`` (``a2``, ``a3`` pass through unused when ``P == 2``)."""
    BPT: tl.constexpr = TILE_N // BLOCK_SIZE  # whole cache blocks per tile
    n = t * TILE_N + tl.arange(0, TILE_N)
    n_valid = (n >= kv_start) & (n < kv_end)
    blk = tl.load(bt_row + n // BLOCK_SIZE, mask=n_valid, other=0).to(tl.int64)
    slot_row = (blk * BLOCK_SIZE + n % BLOCK_SIZE) * NUM_KV_HEADS + kv_head  # [TILE_N]
    if KIVI:
        offs_b = tl.arange(0, BPT)
        first = t * TILE_N + offs_b * BLOCK_SIZE
        b_valid = (first + BLOCK_SIZE > kv_start) & (first < kv_end)
        blk_b = tl.load(bt_row + t * BPT + offs_b, mask=b_valid, other=0).to(tl.int64)
    else:
        b_valid = n_valid
        blk_b = blk
    if MIXED:
        page = tl.load(rpage_ptr + blk, mask=n_valid, other=-1).to(tl.int64)
        from_res = n_valid & (page >= 0)
        packed = n_valid & (page < 0)
        res_row = (page * BLOCK_SIZE + n % BLOCK_SIZE) * NUM_KV_HEADS + kv_head
    else:
        from_res = n_valid
        packed = n_valid
        res_row = slot_row

    s = tl.dot(q0, tl.trans(key_part(kc_ptr, ks_ptr, kz_ptr, rk_ptr, slot_row, blk_b, b_valid, res_row, packed,
                                     from_res, kv_head, 0, NUM_KV_HEADS, D, DP, DP_PAD, BITS, P, KIVI, MIXED,
                                     BPT, BLOCK_SIZE, TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_)),
               input_precision=DOT_PRECISION)
    s = tl.dot(q1, tl.trans(key_part(kc_ptr, ks_ptr, kz_ptr, rk_ptr, slot_row, blk_b, b_valid, res_row, packed,
                                     from_res, kv_head, 1, NUM_KV_HEADS, D, DP, DP_PAD, BITS, P, KIVI, MIXED,
                                     BPT, BLOCK_SIZE, TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_)),
               s, input_precision=DOT_PRECISION)
    if P == 4:
        s = tl.dot(q2, tl.trans(key_part(kc_ptr, ks_ptr, kz_ptr, rk_ptr, slot_row, blk_b, b_valid, res_row,
                                         packed, from_res, kv_head, 2, NUM_KV_HEADS, D, DP, DP_PAD, BITS, P,
                                         KIVI, MIXED, BPT, BLOCK_SIZE, TILE_N, HALF_DEQ, DOT_DTYPE,
                                         INTERPRET_)),
                   s, input_precision=DOT_PRECISION)
        s = tl.dot(q3, tl.trans(key_part(kc_ptr, ks_ptr, kz_ptr, rk_ptr, slot_row, blk_b, b_valid, res_row,
                                         packed, from_res, kv_head, 3, NUM_KV_HEADS, D, DP, DP_PAD, BITS, P,
                                         KIVI, MIXED, BPT, BLOCK_SIZE, TILE_N, HALF_DEQ, DOT_DTYPE,
                                         INTERPRET_)),
                   s, input_precision=DOT_PRECISION)
    if KIVI:
        s = s * qk_scale
    else:  # int4 per-token-head: the K scale multiplies the score
        s = s * (qk_scale * tl.load(ks_ptr + slot_row, mask=n_valid, other=1.0))[None, :]
    if USE_SOFTCAP:
        s = softcap * (1.0 - 2.0 / (tl.exp(tl.minimum(2.0 * s / softcap, 40.0)) + 1.0))
    dist = q_pos[:, None] - n[None, :]
    allowed = row_valid[:, None] & n_valid[None, :] & (dist >= 0)
    if USE_WINDOW:
        allowed = allowed & (dist < window)
    s = tl.where(allowed, s * LOG2E, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if not KIVI:  # the V scale folds into p, after the softmax sum took the unscaled p
        p = p * tl.load(vs_ptr + slot_row, mask=n_valid, other=0.0)[None, :]
    p = round_to_dot_dtype(p, DOT_DTYPE, INTERPRET_)
    a0 = tl.dot(p, value_part(vc_ptr, vs_ptr, vz_ptr, rv_ptr, slot_row, res_row, packed, from_res, 0, DV, DVP,
                              DVP_PAD, G, BITS, P, KIVI, MIXED, TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_),
                a0 * alpha[:, None], input_precision=DOT_PRECISION)
    a1 = tl.dot(p, value_part(vc_ptr, vs_ptr, vz_ptr, rv_ptr, slot_row, res_row, packed, from_res, 1, DV, DVP,
                              DVP_PAD, G, BITS, P, KIVI, MIXED, TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_),
                a1 * alpha[:, None], input_precision=DOT_PRECISION)
    if P == 4:
        a2 = tl.dot(p, value_part(vc_ptr, vs_ptr, vz_ptr, rv_ptr, slot_row, res_row, packed, from_res, 2, DV,
                                  DVP, DVP_PAD, G, BITS, P, KIVI, MIXED, TILE_N, HALF_DEQ, DOT_DTYPE,
                                  INTERPRET_),
                    a2 * alpha[:, None], input_precision=DOT_PRECISION)
        a3 = tl.dot(p, value_part(vc_ptr, vs_ptr, vz_ptr, rv_ptr, slot_row, res_row, packed, from_res, 3, DV,
                                  DVP, DVP_PAD, G, BITS, P, KIVI, MIXED, TILE_N, HALF_DEQ, DOT_DTYPE,
                                  INTERPRET_),
                    a3 * alpha[:, None], input_precision=DOT_PRECISION)
    return m_new, l_i, a0, a1, a2, a3
