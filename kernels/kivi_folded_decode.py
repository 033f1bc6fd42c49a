"""Lesson kernel 6: KIVI decode with the scales folded into the query and probability rows.

The low-bit kernel (:mod:`kvlab.kernels.lowbit_attention`) turns every code into ``code · s + z``
before its dots: a packed multiply-add and the scales' bookkeeping for each pair of codes, on a
loop that is bound by the instructions it issues (``benchmarks/lowbit_notes.md``). This kernel
multiplies the *other* operand instead (:mod:`kvlab.kernels.kivi_folded_tile` shows the algebra):
the codes enter the dots as exact small integers, and the scales cost ``BPT · GROUP · D`` products
per tile on the key side and ``NG · GROUP · TILE_N`` on the value side, against ``TILE_N · D`` each.

It serves decode batches (one new token per sequence) of a KIVI cache; prefill chunks keep the
low-bit kernel (or its dequantize-first path). Everything else is the low-bit kernel's: one program
per (sequence, KV head, split-K segment), tiles wholly inside the quantized blocks run without
residual loads, the last tiles of a sequence read its bf16 residual, split-K partials merge in
:mod:`kvlab.kernels.split_reduce`. Each program keeps ``R`` rows per stack (the ``GROUP`` query
heads of its KV head, padded so that every dot has at least 16 rows).

**Dot dtype.** With a 16-bit query the dots run in bf16: a scaled query ``q · s`` can be far
outside fp16's range where ``q`` and ``s`` are not, and bf16 has fp32's exponent. The codes are
exact in bf16; ``q · s`` and ``p · s`` are rounded once each. With an fp32 query they run in fp32.
"""

from __future__ import annotations

from kvlab.kernels.attention_tile import key_tile_range
from kvlab.kernels.dependent_launch import trigger_dependents
from kvlab.kernels.kivi_folded_tile import attend_folded_tile
from kvlab.kernels.numerics import to_fp32, to_storage
from kvlab.kernels.runtime import tl, triton


@triton.jit
def _query_part(q_row, q_head, row_valid, stride_qh, K: tl.constexpr, P: tl.constexpr, DP: tl.constexpr,
                DP_PAD: tl.constexpr, INTERPRET_: tl.constexpr):
    """Query channels ``j·P + K`` of the program's heads, ``[R, D / P]`` fp32."""
    j = tl.arange(0, DP_PAD)
    q = tl.load(q_row + q_head[:, None] * stride_qh + j[None, :] * P + K,
                mask=row_valid[:, None] & (j < DP)[None, :], other=0.0)
    return to_fp32(q, INTERPRET_)


@triton.jit
def _store_part(ptr, base, a, zacc, l_i, row_valid, K: tl.constexpr, P: tl.constexpr, G: tl.constexpr,
                R: tl.constexpr, DVP: tl.constexpr, DVP_PAD: tl.constexpr, NORMALISE: tl.constexpr,
                OUT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr):
    """Store accumulator part ``K``: each output channel ``j·P + K`` takes the rows of its value group
    plus that group's zero-point sum, normalised by ``l_i`` into the output or raw into the split-K
    workspace."""
    NG: tl.constexpr = DVP_PAD * P // G
    jv = tl.arange(0, DVP_PAD)
    own = (jv // (G // P))[None, None, :] == tl.arange(0, NG)[:, None, None]
    o = tl.sum(tl.where(own, tl.reshape(a, [NG, R, DVP_PAD]) + zacc[:, :, None], 0.0), axis=0)
    mask = row_valid[:, None] & (jv < DVP)[None, :]
    addr = ptr + base[:, None] + jv[None, :] * P + K
    if NORMALISE:
        o = o / tl.where(row_valid, l_i, 1.0)[:, None]
        tl.store(addr, to_storage(o, OUT_DTYPE, INTERPRET_), mask=mask)
    else:
        tl.store(addr, o, mask=mask)


@triton.jit
def _store_parts(ptr, base, a0, a1, a2, a3, zacc, l_i, row_valid, P: tl.constexpr, G: tl.constexpr,
                 R: tl.constexpr, DVP: tl.constexpr, DVP_PAD: tl.constexpr, NORMALISE: tl.constexpr,
                 OUT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr):
    _store_part(ptr, base, a0, zacc, l_i, row_valid, 0, P, G, R, DVP, DVP_PAD, NORMALISE, OUT_DTYPE,
                INTERPRET_)
    _store_part(ptr, base, a1, zacc, l_i, row_valid, 1, P, G, R, DVP, DVP_PAD, NORMALISE, OUT_DTYPE,
                INTERPRET_)
    if P == 4:
        _store_part(ptr, base, a2, zacc, l_i, row_valid, 2, P, G, R, DVP, DVP_PAD, NORMALISE, OUT_DTYPE,
                    INTERPRET_)
        _store_part(ptr, base, a3, zacc, l_i, row_valid, 3, P, G, R, DVP, DVP_PAD, NORMALISE, OUT_DTYPE,
                    INTERPRET_)


@triton.jit
def kivi_folded_decode_kernel(
    out_ptr, part_acc_ptr, part_stat_ptr,
    q_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, kz_ptr, vz_ptr, rk_ptr, rv_ptr, rpage_ptr,
    block_table_ptr, query_start_ptr, seq_lens_ptr,
    num_splits, qk_scale, softcap, window,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_bt,
    NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, R: tl.constexpr,
    D: tl.constexpr, DP_PAD: tl.constexpr, DV: tl.constexpr, DVP_PAD: tl.constexpr,
    BITS: tl.constexpr, P: tl.constexpr, G: tl.constexpr, RES_BLOCKS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
    DOT_DTYPE: tl.constexpr, OUT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr,
    USE_WINDOW: tl.constexpr, USE_SOFTCAP: tl.constexpr, SPLIT_K: tl.constexpr, INTERPRET_: tl.constexpr,
    STEP_TILES: tl.constexpr, ASM0: tl.constexpr, ASM1: tl.constexpr, ASM2: tl.constexpr, ASM3: tl.constexpr,
    LAUNCH_DEPENDENTS: tl.constexpr,
):
    if LAUNCH_DEPENDENTS:
        # the merge kernel may be launched now: it waits for this grid's partials by itself
        trigger_dependents()
    DP: tl.constexpr = D // P
    DVP: tl.constexpr = DV // P
    NG: tl.constexpr = DVP_PAD * P // G
    pid = tl.program_id(0)
    kv_head = pid % NUM_KV_HEADS
    seq = pid // NUM_KV_HEADS  # a decode batch: sequence i owns token i
    split = tl.program_id(1)
    token = tl.load(query_start_ptr + seq).to(tl.int64)
    seq_len = tl.load(seq_lens_ptr + seq)
    q_pos = seq_len - 1

    rows = tl.arange(0, R)
    row_valid = rows < GROUP
    q_head = kv_head * GROUP + rows
    q_row = q_ptr + token * stride_qt
    q0 = _query_part(q_row, q_head, row_valid, stride_qh, 0, P, DP, DP_PAD, INTERPRET_)
    q1 = _query_part(q_row, q_head, row_valid, stride_qh, 1, P, DP, DP_PAD, INTERPRET_)
    if P == 4:
        q2 = _query_part(q_row, q_head, row_valid, stride_qh, 2, P, DP, DP_PAD, INTERPRET_)
        q3 = _query_part(q_row, q_head, row_valid, stride_qh, 3, P, DP, DP_PAD, INTERPRET_)
    else:
        q2 = q0
        q3 = q1

    _, kv_start, kv_end, tile_lo, tile_hi = key_tile_range(
        q_pos, 0, 1, window, split, num_splits, 1, TILE_N, USE_WINDOW, SPLIT_K)
    m_i = tl.full([R], float("-inf"), tl.float32)
    l_i = tl.zeros([R], tl.float32)
    a0 = tl.zeros([NG * R, DVP_PAD], tl.float32)
    a1 = tl.zeros([NG * R, DVP_PAD], tl.float32)
    a2 = tl.zeros([NG * R, DVP_PAD], tl.float32)
    a3 = tl.zeros([NG * R, DVP_PAD], tl.float32)
    zacc = tl.zeros([NG, R], tl.float32)
    bt_row = block_table_ptr + seq.to(tl.int64) * stride_bt
    # tiles before t_mid lie in blocks that have left the residual (kvlab.kernels.lowbit_attention)
    t_mid = tl.maximum(seq_len // BLOCK_SIZE - (RES_BLOCKS - 1), 0) * BLOCK_SIZE // TILE_N
    packed_hi = tl.minimum(tile_hi, t_mid)
    packed_end = tl.minimum(kv_end, packed_hi * TILE_N)
    for t in range(tile_lo, packed_hi, STEP_TILES):
        for k in tl.static_range(STEP_TILES):
            m_i, l_i, a0, a1, a2, a3, zacc = attend_folded_tile(
                t + k, q0, q1, q2, q3, m_i, l_i, a0, a1, a2, a3, zacc, q_pos, row_valid, kv_start, packed_end,
                kv_head, bt_row, kc_ptr, vc_ptr, ks_ptr, vs_ptr, kz_ptr, vz_ptr, rk_ptr, rv_ptr, rpage_ptr,
                qk_scale, softcap, window, False, NUM_KV_HEADS, D, DP, DP_PAD, DV, DVP, DVP_PAD, BITS, P, G,
                R, BLOCK_SIZE, TILE_N, DOT_DTYPE, DOT_PRECISION, USE_WINDOW, USE_SOFTCAP, INTERPRET_,
                ASM0, ASM1, ASM2, ASM3)
    for t in range(tl.maximum(tile_lo, t_mid), tile_hi):
        m_i, l_i, a0, a1, a2, a3, zacc = attend_folded_tile(
            t, q0, q1, q2, q3, m_i, l_i, a0, a1, a2, a3, zacc, q_pos, row_valid, kv_start, kv_end, kv_head,
            bt_row, kc_ptr, vc_ptr, ks_ptr, vs_ptr, kz_ptr, vz_ptr, rk_ptr, rv_ptr, rpage_ptr, qk_scale,
            softcap, window, True, NUM_KV_HEADS, D, DP, DP_PAD, DV, DVP, DVP_PAD, BITS, P, G, R,
            BLOCK_SIZE, TILE_N, DOT_DTYPE, DOT_PRECISION, USE_WINDOW, USE_SOFTCAP, INTERPRET_,
            ASM0, ASM1, ASM2, ASM3)

    if not SPLIT_K:
        _store_parts(out_ptr, token * stride_ot + q_head * stride_oh, a0, a1, a2, a3, zacc, l_i, row_valid, P,
                     G, R, DVP, DVP_PAD, True, OUT_DTYPE, INTERPRET_)
    else:
        row = (token * (NUM_KV_HEADS * GROUP) + q_head) * num_splits + split
        _store_parts(part_acc_ptr, row * DV, a0, a1, a2, a3, zacc, l_i, row_valid, P, G, R, DVP, DVP_PAD,
                     False, OUT_DTYPE, INTERPRET_)
        tl.store(part_stat_ptr + row * 2, m_i, mask=row_valid)
        tl.store(part_stat_ptr + row * 2 + 1, l_i, mask=row_valid)
