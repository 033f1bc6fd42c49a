"""Lesson kernel 5: paged attention over packed 4-bit and 2-bit codes (kvlab schemes, not vLLM's).

The loop is the one of :mod:`kvlab.kernels.attention` (online softmax in base 2, GQA rows, causal
and sliding-window tile range, optional split-K merged by :mod:`kvlab.kernels.split_reduce`); what
changes is how a K or V tile comes out of memory:

1. **Unpack.** A tile of ``TILE_N`` keys is loaded as bytes ``[TILE_N, D / P]`` (``P`` codes per
   byte) and widened to ``[TILE_N, D / P, P]`` by shifting each byte right by ``0, bits, 2·bits …``
   and masking; a reshape to ``[TILE_N, D]`` puts code ``k`` of byte ``j`` at channel ``j·P + k``,
   the order the writer packed them in. The bytes read are ``bits / 16`` of a bf16 tile.
2. **Dequantize in registers.**
   * ``int4_per_token_head``: ``q − 8`` is an integer in −7..7, exact in bf16/fp16, so the scales
     stay out of the tile as for int8: the K scale multiplies the score after the dot, the V scale is
     folded into ``p`` before the second dot (no extra rounding).
   * KIVI: the K scale and zero point belong to a (block, channel), the V ones to a (token, group);
     both vary inside the tile along an axis that a dot sums over, so they cannot be factored out:
     the tile is dequantized, ``q · s + z`` in fp32, and rounded to the dot dtype (one rounding of
     each K and V element, unit roundoff ``u`` of the query dtype; the tests allow for it). Scale and
     zero-point rows are gathered per key (``[TILE_N, D]`` fp16 loads of a few distinct rows that the
     cache serves).
3. **Residual.** KIVI blocks still being filled live in bf16 residual pages:
   ``residual_page[block] >= 0`` selects, per key, the bf16 row instead of the codes (both loads are
   masked, so only one of them touches memory for any key).

Reading a never-written slot reads NaN scales (the cache is poisoned at allocation), so it shows.
The host side (checks, launch shape, split-K workspace) is :mod:`kvlab.kernels.lowbit_attention_call`.
"""

from __future__ import annotations

import math

from kvlab.kernels.attention_tile import key_tile_range
from kvlab.kernels.numerics import round_to_dot_dtype, to_fp32, to_storage
from kvlab.kernels.runtime import tl, triton

LOG2E: tl.constexpr = tl.constexpr(math.log2(math.e))


@triton.jit
def _codes(byte_ptr, rows, mask, BITS: tl.constexpr, P: tl.constexpr, DP: tl.constexpr, D_PAD: tl.constexpr,
           TILE_N: tl.constexpr):
    """Load ``[TILE_N, D/P]`` bytes at ``byte_ptr + rows * DP`` and unpack them to ``[TILE_N, D_PAD]``
    fp32."""
    j = tl.arange(0, D_PAD // P)
    b = tl.load(byte_ptr + rows[:, None] * DP + j[None, :], mask=mask[:, None] & (j < DP)[None, :], other=0)
    shifts = tl.arange(0, P) * BITS
    c = (b.to(tl.int32)[:, :, None] >> shifts[None, None, :]) & ((1 << BITS) - 1)
    return tl.reshape(c, [TILE_N, D_PAD]).to(tl.float32)


@triton.jit
def lowbit_attention_kernel(
    out_ptr, part_acc_ptr, part_stat_ptr,
    q_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, kz_ptr, vz_ptr, rk_ptr, rv_ptr, rpage_ptr,
    block_table_ptr, query_start_ptr, seq_lens_ptr, prog_seq_ptr, prog_qblock_ptr,
    num_splits, qk_scale, softcap, window,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_bt,
    NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr,
    D: tl.constexpr, D_PAD: tl.constexpr, DV: tl.constexpr, DV_PAD: tl.constexpr,
    BITS: tl.constexpr, P: tl.constexpr, G: tl.constexpr, KIVI: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_Q: tl.constexpr,
    DOT_DTYPE: tl.constexpr, OUT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr,
    USE_WINDOW: tl.constexpr, USE_SOFTCAP: tl.constexpr, SPLIT_K: tl.constexpr, INTERPRET_: tl.constexpr,
):
    pid = tl.program_id(0)
    kv_head = pid % NUM_KV_HEADS
    seq = tl.load(prog_seq_ptr + pid // NUM_KV_HEADS)
    q_block = tl.load(prog_qblock_ptr + pid // NUM_KV_HEADS)
    split = tl.program_id(1)
    q_start = tl.load(query_start_ptr + seq)
    q_len = tl.load(query_start_ptr + seq + 1) - q_start
    context_len = tl.load(seq_lens_ptr + seq) - q_len

    rows = tl.arange(0, BLOCK_M)
    q_rel = q_block * BLOCK_Q + rows // GROUP
    row_valid = (rows < BLOCK_Q * GROUP) & (q_rel < q_len)
    q_pos = context_len + q_rel
    token = (q_start + q_rel).to(tl.int64)
    q_head = kv_head * GROUP + rows % GROUP
    d = tl.arange(0, D_PAD)
    dv = tl.arange(0, DV_PAD)
    q = tl.load(q_ptr + token[:, None] * stride_qt + q_head[:, None] * stride_qh + d[None, :],
                mask=row_valid[:, None] & (d < D)[None, :], other=0.0)
    q = round_to_dot_dtype(to_fp32(q, INTERPRET_), DOT_DTYPE, INTERPRET_)

    first_q, kv_start, kv_end, tile_lo, tile_hi = key_tile_range(
        context_len, q_block * BLOCK_Q, q_len, window, split, num_splits, BLOCK_Q, TILE_N, USE_WINDOW,
        SPLIT_K)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, DV_PAD], tl.float32)
    bt_row = block_table_ptr + seq.to(tl.int64) * stride_bt
    offs_n = tl.arange(0, TILE_N)
    BPT: tl.constexpr = TILE_N // BLOCK_SIZE  # whole cache blocks per tile
    NG: tl.constexpr = DV_PAD // G
    offs_b = tl.arange(0, BPT)
    for t in range(tile_lo, tile_hi):
        n = t * TILE_N + offs_n
        n_valid = (n >= kv_start) & (n < kv_end)
        blk = tl.load(bt_row + n // BLOCK_SIZE, mask=n_valid, other=0).to(tl.int64)
        slot_row = (blk * BLOCK_SIZE + n % BLOCK_SIZE) * NUM_KV_HEADS + kv_head  # [TILE_N]
        if KIVI:
            b_valid = (t * BPT + offs_b) * BLOCK_SIZE < kv_end
            blk_b = tl.load(bt_row + t * BPT + offs_b, mask=b_valid, other=0).to(tl.int64)  # [BPT]
            page = tl.load(rpage_ptr + blk, mask=n_valid, other=-1).to(tl.int64)
            from_res = n_valid & (page >= 0)
            packed = n_valid & (page < 0)
            res_row = (page * BLOCK_SIZE + n % BLOCK_SIZE) * NUM_KV_HEADS + kv_head
            # keys: one scale and zero point per (block, channel), applied to [BPT, BLOCK_SIZE, D]
            ch = (blk_b * NUM_KV_HEADS + kv_head)[:, None] * D + d[None, :]
            km = b_valid[:, None] & (d < D)[None, :]
            k = tl.reshape(_codes(kc_ptr, slot_row, packed, BITS, P, D // P, D_PAD, TILE_N),
                           [BPT, BLOCK_SIZE, D_PAD])
            k = k * tl.load(ks_ptr + ch, mask=km, other=0.0).to(tl.float32)[:, None, :] + \
                tl.load(kz_ptr + ch, mask=km, other=0.0).to(tl.float32)[:, None, :]
            k_res = tl.load(rk_ptr + res_row[:, None] * D + d[None, :],
                            mask=from_res[:, None] & (d < D)[None, :], other=0.0)
            k = tl.where(from_res[:, None], to_fp32(k_res, INTERPRET_), tl.reshape(k, [TILE_N, D_PAD]))
            s = tl.dot(q, tl.trans(round_to_dot_dtype(k, DOT_DTYPE, INTERPRET_)),
                       input_precision=DOT_PRECISION) * qk_scale
        else:
            k = _codes(kc_ptr, slot_row, n_valid, BITS, P, D // P, D_PAD, TILE_N) - 8.0
            s = tl.dot(q, tl.trans(round_to_dot_dtype(k, DOT_DTYPE, INTERPRET_)),
                       input_precision=DOT_PRECISION)
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

        if KIVI:
            # values: one scale and zero point per (token, group of G channels): [TILE_N, NG, G]
            g = tl.arange(0, NG)
            grp = slot_row[:, None] * (DV // G) + g[None, :]
            gm = packed[:, None] & (g < DV // G)[None, :]
            v = tl.reshape(_codes(vc_ptr, slot_row, packed, BITS, P, DV // P, DV_PAD, TILE_N),
                           [TILE_N, NG, G])
            v = v * tl.load(vs_ptr + grp, mask=gm, other=0.0).to(tl.float32)[:, :, None] + \
                tl.load(vz_ptr + grp, mask=gm, other=0.0).to(tl.float32)[:, :, None]
            v_res = tl.load(rv_ptr + res_row[:, None] * DV + dv[None, :],
                            mask=from_res[:, None] & (dv < DV)[None, :], other=0.0)
            v = tl.where(from_res[:, None], to_fp32(v_res, INTERPRET_), tl.reshape(v, [TILE_N, DV_PAD]))
        else:
            v = _codes(vc_ptr, slot_row, n_valid, BITS, P, DV // P, DV_PAD, TILE_N) - 8.0
            p = p * tl.load(vs_ptr + slot_row, mask=n_valid, other=0.0)[None, :]
        acc = acc * alpha[:, None]
        acc = tl.dot(round_to_dot_dtype(p, DOT_DTYPE, INTERPRET_),
                     round_to_dot_dtype(v, DOT_DTYPE, INTERPRET_),
                     acc, input_precision=DOT_PRECISION)
        m_i = m_new

    if not SPLIT_K:
        o = acc / tl.where(row_valid, l_i, 1.0)[:, None]
        tl.store(out_ptr + token[:, None] * stride_ot + q_head[:, None] * stride_oh + dv[None, :],
                 to_storage(o, OUT_DTYPE, INTERPRET_), mask=row_valid[:, None] & (dv < DV)[None, :])
    else:
        row = (token * (NUM_KV_HEADS * GROUP) + q_head) * num_splits + split
        tl.store(part_acc_ptr + row[:, None] * DV + dv[None, :], acc,
                 mask=row_valid[:, None] & (dv < DV)[None, :])
        tl.store(part_stat_ptr + row * 2, m_i, mask=row_valid)
        tl.store(part_stat_ptr + row * 2 + 1, l_i, mask=row_valid)
