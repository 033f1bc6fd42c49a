"""One key tile of the KIVI decode kernel with the scales folded into the other operand.

A KIVI key is ``k[n, c] = s[b, c] · code[n, c] + z[b, c]`` (scale and zero point per block ``b``
and channel ``c``), a value ``v[n, c] = s[n, g] · code[n, c] + z[n, g]`` (per token ``n`` and group
``g`` of ``G`` channels). Dequantizing every code costs a multiply-add per element. Attention
only needs two sums, and both can take the scale from the *other* side of the product:

    q · k_n  = Σ_c (q_c · s[b, c]) · code[n, c]  +  Σ_c q_c · z[b, c]
    Σ_n p_n v[n, c] = Σ_n (p_n · s[n, g]) · code[n, c]  +  Σ_n p_n · z[n, g]

**Stacked rows.** ``q_c · s[b, c]`` differs per block, ``p_n · s[n, g]`` per group, so each needs
its own copy of the query (or probability) rows. A decode program has only ``GROUP`` query rows
(4 for Llama-3-8B), while a tensor-core dot computes at least 16: the rows the plain kernel pads
with zeros hold the copies here. The score dot runs ``[BPT · R, D]`` rows (block-major: row
``b · R + h`` is head ``h``'s query scaled by block ``b``'s key scales) against the raw codes; of
its ``[BPT · R, TILE_N]`` result each key keeps the rows of its own block. The value dot runs
``[NG · R, TILE_N]`` rows (row ``g · R + h``: head ``h``'s probabilities scaled by group ``g``'s
value scales) and keeps ``NG`` accumulators per head; the end of the kernel keeps, for each output
channel, the accumulator of its group. The codes enter the dots as exact small integers.

**Zero points** add one number per (block, head) to the scores and one per (group, head) to the
output, ``Σ_c q_c z[b, c]`` and ``Σ_n p_n z[n, g]``, summed in fp32 beside the dots.

**Residual keys** (``MIXED`` tiles, the last few of a sequence) are bf16 rows: their block takes
scale 1 and zero point 0, and their "codes" are the values themselves.

The ``P`` parts (codes by position in the byte) and the token-minor value tiles are those of
:mod:`kvlab.kernels.lowbit_tile`, whose loaders this module reuses.
"""

from __future__ import annotations

import math

from kvlab.kernels.lowbit_dequant import code_part, code_values, half_of_word
from kvlab.kernels.lowbit_tile import key_bytes, key_scale_words, value_bytes
from kvlab.kernels.numerics import round_to_dot_dtype, to_fp32
from kvlab.kernels.runtime import tl, triton

LOG2E: tl.constexpr = tl.constexpr(math.log2(math.e))


@triton.jit
def raw_codes(b, K: tl.constexpr, BITS: tl.constexpr, ASM: tl.constexpr, DOT_DTYPE: tl.constexpr,
              INTERPRET_: tl.constexpr):
    """The codes at position ``K`` of bytes ``b`` as exact numbers in the dot dtype (fp32 in the
    interpreter, whose 16-bit dots multiply bit patterns); compiled with the host's PTX, about two
    instructions per code (:func:`kvlab.kernels.lowbit_unpack_asm.unpack_asm`)."""
    if INTERPRET_:
        return code_part(b, K, BITS).to(tl.float32)
    elif ASM != "":
        return code_values(b, K, BITS, ASM, 0, DOT_DTYPE)
    else:
        return code_part(b, K, BITS).to(DOT_DTYPE)


@triton.jit
def residual_part(r_ptr, res_row, from_res, K: tl.constexpr, W: tl.constexpr, WP: tl.constexpr,
                  WP_PAD: tl.constexpr, P: tl.constexpr, DOT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr):
    """Channels ``j·P + K`` of the tile's residual rows (bf16), ``[TILE_N, W / P]``, as dot operand."""
    j = tl.arange(0, WP_PAD)
    r = tl.load(r_ptr + res_row[:, None] * W + j[None, :] * P + K,
                mask=from_res[:, None] & (j < WP)[None, :], other=0.0)
    if INTERPRET_:
        return to_fp32(r, INTERPRET_)
    else:
        return r.to(DOT_DTYPE)


@triton.jit
def scaled_key_part(s_acc, zq, q, kb, ws, wz, rk_ptr, res_row, from_res, block_res, K: tl.constexpr,
                    ASM: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, DP_PAD: tl.constexpr,
                    BITS: tl.constexpr, P: tl.constexpr, R: tl.constexpr, BPT: tl.constexpr,
                    TILE_N: tl.constexpr, MIXED: tl.constexpr, DOT_DTYPE: tl.constexpr,
                    DOT_PRECISION: tl.constexpr, INTERPRET_: tl.constexpr):
    """Add part ``K`` (query ``q``: ``[R, D / P]`` fp32) to the stacked scores ``s_acc``
    ``[BPT · R, TILE_N]`` and to the zero-point sums ``zq`` ``[BPT, R]``."""
    s = half_of_word(ws, K).to(tl.float32)  # [BPT, D / P]: this part's key scales of each block
    z = half_of_word(wz, K).to(tl.float32)
    if MIXED:  # a residual block: its keys are bf16 numbers, scale 1, zero point 0
        s = tl.where(block_res[:, None], 1.0, s)
        z = tl.where(block_res[:, None], 0.0, z)
    qs = tl.reshape(q[None, :, :] * s[:, None, :], [BPT * R, DP_PAD])
    zq += tl.sum(q[None, :, :] * z[:, None, :], axis=2)
    c = tl.reshape(raw_codes(kb, K, BITS, ASM, DOT_DTYPE, INTERPRET_), [TILE_N, DP_PAD])
    if MIXED:
        r = residual_part(rk_ptr, res_row, from_res, K, D, DP, DP_PAD, P, DOT_DTYPE, INTERPRET_)
        c = tl.where(from_res[:, None], r, c)
    qs = round_to_dot_dtype(qs, DOT_DTYPE, INTERPRET_)
    return tl.dot(qs, tl.trans(c), s_acc, input_precision=DOT_PRECISION), zq


@triton.jit
def value_part(a, ps, alpha_rows, vb, rv_ptr, res_row, from_res, K: tl.constexpr, ASM: tl.constexpr,
               DV: tl.constexpr, DVP: tl.constexpr, DVP_PAD: tl.constexpr, BITS: tl.constexpr,
               P: tl.constexpr, TILE_N: tl.constexpr, MIXED: tl.constexpr, DOT_DTYPE: tl.constexpr,
               DOT_PRECISION: tl.constexpr, INTERPRET_: tl.constexpr):
    """Accumulator part ``K`` ``[NG · R, Dv / P]``, rescaled by ``alpha_rows``, plus the scaled
    probabilities ``ps`` times this part's value codes (token-minor bytes ``vb``)."""
    c = tl.trans(tl.reshape(raw_codes(vb, K, BITS, ASM, DOT_DTYPE, INTERPRET_), [DVP_PAD, TILE_N]))
    if MIXED:
        c = tl.where(from_res[:, None], residual_part(rv_ptr, res_row, from_res, K, DV, DVP, DVP_PAD, P,
                                                      DOT_DTYPE, INTERPRET_), c)
    return tl.dot(ps, c, a * alpha_rows[:, None], input_precision=DOT_PRECISION)


@triton.jit
def attend_folded_tile(
    t, q0, q1, q2, q3, m_i, l_i, a0, a1, a2, a3, zacc, q_pos, row_valid, kv_start, kv_end, kv_head, bt_row,
    kc_ptr, vc_ptr, ks_ptr, vs_ptr, kz_ptr, vz_ptr, rk_ptr, rv_ptr, rpage_ptr, qk_scale, softcap, window,
    MIXED: tl.constexpr, NUM_KV_HEADS: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, DP_PAD: tl.constexpr,
    DV: tl.constexpr, DVP: tl.constexpr, DVP_PAD: tl.constexpr, BITS: tl.constexpr, P: tl.constexpr,
    G: tl.constexpr, R: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
    DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr, USE_WINDOW: tl.constexpr,
    USE_SOFTCAP: tl.constexpr, INTERPRET_: tl.constexpr,
    ASM0: tl.constexpr, ASM1: tl.constexpr, ASM2: tl.constexpr, ASM3: tl.constexpr,
):
    """Fold key tile ``t`` into the online softmax ``(m_i, l_i)`` (``[R]``: one row per query head),
    the stacked accumulator parts ``a0 .. a3`` and the value zero-point sums ``zacc`` ``[NG, R]``."""
    BPT: tl.constexpr = TILE_N // BLOCK_SIZE  # whole cache blocks per tile
    NG: tl.constexpr = DVP_PAD * P // G  # value groups (padded)
    n = t * TILE_N + tl.arange(0, TILE_N)
    n_valid = (n >= kv_start) & (n < kv_end)
    blk = tl.load(bt_row + n // BLOCK_SIZE, mask=n_valid, other=0).to(tl.int64)
    slot_row = (blk * BLOCK_SIZE + n % BLOCK_SIZE) * NUM_KV_HEADS + kv_head
    offs_b = tl.arange(0, BPT)
    first = t * TILE_N + offs_b * BLOCK_SIZE
    b_valid = (first + BLOCK_SIZE > kv_start) & (first < kv_end)
    blk_b = tl.load(bt_row + t * BPT + offs_b, mask=b_valid, other=0).to(tl.int64)
    if MIXED:
        page = tl.load(rpage_ptr + blk, mask=n_valid, other=-1).to(tl.int64)
        from_res = n_valid & (page >= 0)
        packed = n_valid & (page < 0)
        res_row = (page * BLOCK_SIZE + n % BLOCK_SIZE) * NUM_KV_HEADS + kv_head
        block_res = tl.load(rpage_ptr + blk_b, mask=b_valid, other=-1) >= 0
    else:
        from_res = n_valid
        packed = n_valid
        res_row = slot_row
        block_res = b_valid

    kb = key_bytes(kc_ptr, slot_row, packed, DP, DP_PAD, True, BPT, BLOCK_SIZE)
    ws, wz = key_scale_words(ks_ptr, kz_ptr, blk_b, b_valid, kv_head, NUM_KV_HEADS, DP, DP_PAD)
    s_acc = tl.zeros([BPT * R, TILE_N], tl.float32)
    zq = tl.zeros([BPT, R], tl.float32)
    s_acc, zq = scaled_key_part(s_acc, zq, q0, kb, ws, wz, rk_ptr, res_row, from_res, block_res, 0,
                                ASM0, D, DP, DP_PAD, BITS, P, R, BPT, TILE_N, MIXED, DOT_DTYPE,
                                DOT_PRECISION, INTERPRET_)
    s_acc, zq = scaled_key_part(s_acc, zq, q1, kb, ws, wz, rk_ptr, res_row, from_res, block_res, 1,
                                ASM1, D, DP, DP_PAD, BITS, P, R, BPT, TILE_N, MIXED, DOT_DTYPE,
                                DOT_PRECISION, INTERPRET_)
    if P == 4:
        s_acc, zq = scaled_key_part(s_acc, zq, q2, kb, ws, wz, rk_ptr, res_row, from_res, block_res, 2,
                                    ASM2, D, DP, DP_PAD, BITS, P, R, BPT, TILE_N, MIXED, DOT_DTYPE,
                                    DOT_PRECISION, INTERPRET_)
        s_acc, zq = scaled_key_part(s_acc, zq, q3, kb, ws, wz, rk_ptr, res_row, from_res, block_res, 3,
                                    ASM3, D, DP, DP_PAD, BITS, P, R, BPT, TILE_N, MIXED, DOT_DTYPE,
                                    DOT_PRECISION, INTERPRET_)
    # each key keeps the rows scaled by its own block's scales
    own = (tl.arange(0, TILE_N) // BLOCK_SIZE)[None, None, :] == offs_b[:, None, None]
    s = tl.sum(tl.where(own, tl.reshape(s_acc, [BPT, R, TILE_N]) + zq[:, :, None], 0.0), axis=0) * qk_scale
    if USE_SOFTCAP:
        s = softcap * (1.0 - 2.0 / (tl.exp(tl.minimum(2.0 * s / softcap, 40.0)) + 1.0))
    dist = q_pos - n
    allowed = n_valid & (dist >= 0)
    if USE_WINDOW:
        allowed = allowed & (dist < window)
    s = tl.where(row_valid[:, None] & allowed[None, :], s * LOG2E, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)

    vb, vs, vz = value_bytes(vc_ptr, vs_ptr, vz_ptr, blk_b, n_valid, kv_head, NUM_KV_HEADS, DV, DVP, DVP_PAD,
                             G, P, True, BPT, BLOCK_SIZE, TILE_N)
    sv = tl.reshape(vs, [NG, TILE_N]).to(tl.float32)  # zero for keys outside the range
    zv = tl.reshape(vz, [NG, TILE_N]).to(tl.float32)
    if MIXED:  # residual tokens: scale 1, zero point 0, and their bf16 values as "codes"
        sv = tl.where(from_res[None, :], 1.0, sv)
        zv = tl.where(from_res[None, :], 0.0, zv)
    zacc = zacc * alpha[None, :] + tl.sum(p[None, :, :] * zv[:, None, :], axis=2)
    ps = tl.reshape(p[None, :, :] * sv[:, None, :], [NG * R, TILE_N])
    ps = round_to_dot_dtype(ps, DOT_DTYPE, INTERPRET_)
    alpha_rows = tl.reshape(tl.broadcast_to(alpha[None, :], [NG, R]), [NG * R])
    vb = tl.reshape(vb, [DVP_PAD, TILE_N])
    a0 = value_part(a0, ps, alpha_rows, vb, rv_ptr, res_row, from_res, 0, ASM0, DV, DVP, DVP_PAD, BITS, P,
                    TILE_N, MIXED, DOT_DTYPE, DOT_PRECISION, INTERPRET_)
    a1 = value_part(a1, ps, alpha_rows, vb, rv_ptr, res_row, from_res, 1, ASM1, DV, DVP, DVP_PAD, BITS, P,
                    TILE_N, MIXED, DOT_DTYPE, DOT_PRECISION, INTERPRET_)
    if P == 4:
        a2 = value_part(a2, ps, alpha_rows, vb, rv_ptr, res_row, from_res, 2, ASM2, DV, DVP, DVP_PAD, BITS, P,
                        TILE_N, MIXED, DOT_DTYPE, DOT_PRECISION, INTERPRET_)
        a3 = value_part(a3, ps, alpha_rows, vb, rv_ptr, res_row, from_res, 3, ASM3, DV, DVP, DVP_PAD, BITS, P,
                        TILE_N, MIXED, DOT_DTYPE, DOT_PRECISION, INTERPRET_)
    return m_new, l_i, a0, a1, a2, a3, zacc
