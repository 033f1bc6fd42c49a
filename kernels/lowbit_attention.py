"""Lesson kernel 5: paged attention over packed 4-bit and 2-bit codes (kvlab schemes, not vLLM's).

The loop is the one of :mod:`kvlab.kernels.attention` (online softmax in base 2, GQA rows, causal
and sliding-window tile range, optional split-K merged by :mod:`kvlab.kernels.split_reduce`); what
changes is how a K or V tile comes out of memory, which :mod:`kvlab.kernels.lowbit_tile` does:
codes are used by their position in the byte (``P`` parts per tile, no interleaving), dequantized in
registers in the cheapest exact way, and the KIVI residual is read only by the tiles that can hold it.

**Which tiles can hold residual keys.** A KIVI sequence of ``L`` tokens (new ones included) has its
first ``max(0, L // B − (R − 1))`` blocks quantized (:func:`kvlab.cache.lowbit_residual.
quantized_block_count`, the rule every write follows). Tiles wholly inside them run the step with
``MIXED=False`` (no residual loads, no per-key select); the tiles after them with ``MIXED=True``.

**fp16 dots for KIVI.** With bf16 queries the KIVI dots run in fp16 (values are ``code · s + z`` in
fp16, see the tile module). The query is scaled by ``2^-k`` into fp16's range: bf16 has 8
significant bits and fp16 11, so the scaled query is exact once its largest magnitude is below
``2^15``; ``2^k`` goes back in with the softmax scale, also exactly.

**Several tiles per loop step.** The loop's loads are issued one step ahead (Triton's software
pipeline), so what one program has in flight is one step's bytes: one 64-key KIVI tile is about
11 KB (kivi4). ``STEP_TILES`` tiles per step issue that many tiles' loads together while the tiles
are still dequantized one after another (the registers of one tile, the bytes of several). On the
H100 this helped less than the bytes suggest (B=64 kivi2: 2,692 µs at one tile a step, 2,452 µs at
four; ``benchmarks/lowbit_notes.md`` says what bounds the step instead).

**int8 dots (int4, opt-in).** ``INT8_DOTS`` runs the loop of :mod:`kvlab.kernels.lowbit_int8_tile`
instead: integer products on codes that are never converted to floats, the query and the
probabilities rounded to int8 per row (:mod:`kvlab.kernels.lowbit_int8_dot`).

Reading a never-written slot reads NaN scales (the cache is poisoned at allocation), so it shows.
The host side (checks, launch shape, split-K workspace) is :mod:`kvlab.kernels.lowbit_attention_call`.
"""

from __future__ import annotations

from kvlab.kernels.attention_tile import key_tile_range
from kvlab.kernels.dependent_launch import trigger_dependents
from kvlab.kernels.lowbit_int8_tile import attend_int8_tile, transposed_int8_query
from kvlab.kernels.lowbit_tile import attend_lowbit_tile
from kvlab.kernels.numerics import round_to_dot_dtype, to_fp32, to_storage
from kvlab.kernels.runtime import tl, triton


@triton.jit
def _query_part(q_ptr, token, q_head, row_valid, stride_qt, stride_qh, K: tl.constexpr, P: tl.constexpr,
                DP: tl.constexpr, DP_PAD: tl.constexpr, INTERPRET_: tl.constexpr):
    """Query channels ``j·P + K`` of the program's rows, ``[BLOCK_M, D / P]`` fp32."""
    j = tl.arange(0, DP_PAD)
    q = tl.load(q_ptr + token[:, None] * stride_qt + q_head[:, None] * stride_qh + j[None, :] * P + K,
                mask=row_valid[:, None] & (j < DP)[None, :], other=0.0)
    return to_fp32(q, INTERPRET_)


@triton.jit
def _store_part(ptr, base, a, l_i, row_valid, K: tl.constexpr, P: tl.constexpr, DVP: tl.constexpr,
                DVP_PAD: tl.constexpr, NORMALISE: tl.constexpr, OUT_DTYPE: tl.constexpr,
                INTERPRET_: tl.constexpr):
    """Store accumulator part ``K`` to channels ``j·P + K`` of the rows starting at ``ptr + base``."""
    jv = tl.arange(0, DVP_PAD)
    mask = row_valid[:, None] & (jv < DVP)[None, :]
    addr = ptr + base[:, None] + jv[None, :] * P + K
    if NORMALISE:
        o = a / tl.where(row_valid, l_i, 1.0)[:, None]
        tl.store(addr, to_storage(o, OUT_DTYPE, INTERPRET_), mask=mask)
    else:
        tl.store(addr, a, mask=mask)


@triton.jit
def _store_parts(ptr, base, a0, a1, a2, a3, l_i, row_valid, P: tl.constexpr, DVP: tl.constexpr,
                 DVP_PAD: tl.constexpr, NORMALISE: tl.constexpr, OUT_DTYPE: tl.constexpr,
                 INTERPRET_: tl.constexpr):
    """Store the ``P`` accumulator parts (normalised by ``l_i`` into the output, or raw into the
    split-K workspace)."""
    _store_part(ptr, base, a0, l_i, row_valid, 0, P, DVP, DVP_PAD, NORMALISE, OUT_DTYPE, INTERPRET_)
    _store_part(ptr, base, a1, l_i, row_valid, 1, P, DVP, DVP_PAD, NORMALISE, OUT_DTYPE, INTERPRET_)
    if P == 4:
        _store_part(ptr, base, a2, l_i, row_valid, 2, P, DVP, DVP_PAD, NORMALISE, OUT_DTYPE, INTERPRET_)
        _store_part(ptr, base, a3, l_i, row_valid, 3, P, DVP, DVP_PAD, NORMALISE, OUT_DTYPE, INTERPRET_)


@triton.jit
def lowbit_attention_kernel(
    out_ptr, part_acc_ptr, part_stat_ptr,
    q_ptr, kc_ptr, vc_ptr, ks_ptr, vs_ptr, kz_ptr, vz_ptr, rk_ptr, rv_ptr, rpage_ptr,
    block_table_ptr, query_start_ptr, seq_lens_ptr, prog_seq_ptr, prog_qblock_ptr,
    num_splits, qk_scale, softcap, window,
    stride_qt, stride_qh, stride_ot, stride_oh, stride_bt,
    NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr,
    D: tl.constexpr, DP_PAD: tl.constexpr, DV: tl.constexpr, DVP_PAD: tl.constexpr,
    BITS: tl.constexpr, P: tl.constexpr, G: tl.constexpr, KIVI: tl.constexpr, RES_BLOCKS: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_Q: tl.constexpr,
    DOT_DTYPE: tl.constexpr, OUT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr,
    HALF_DEQ: tl.constexpr, Q_POW2_SCALE: tl.constexpr,
    USE_WINDOW: tl.constexpr, USE_SOFTCAP: tl.constexpr, SPLIT_K: tl.constexpr, INTERPRET_: tl.constexpr,
    STEP_TILES: tl.constexpr, ASM0: tl.constexpr, ASM1: tl.constexpr, ASM2: tl.constexpr, ASM3: tl.constexpr,
    LAUNCH_DEPENDENTS: tl.constexpr, SEQ_BY_PROGRAM: tl.constexpr, INT8_DOTS: tl.constexpr = False,
):
    if LAUNCH_DEPENDENTS:
        # the merge kernel may be launched now: it waits for this grid's partials by itself
        trigger_dependents()
    DP: tl.constexpr = D // P
    DVP: tl.constexpr = DV // P
    pid = tl.program_id(0)
    kv_head = pid % NUM_KV_HEADS
    if SEQ_BY_PROGRAM:
        # every sequence has one new token (a decode batch): program i serves sequence i, and its
        # offsets and length load at once instead of after a lookup (one memory round trip fewer)
        seq = pid // NUM_KV_HEADS
        q_block = 0
    else:
        seq = tl.load(prog_seq_ptr + pid // NUM_KV_HEADS)
        q_block = tl.load(prog_qblock_ptr + pid // NUM_KV_HEADS)
    split = tl.program_id(1)
    q_start = tl.load(query_start_ptr + seq)
    q_len = tl.load(query_start_ptr + seq + 1) - q_start
    seq_len = tl.load(seq_lens_ptr + seq)
    context_len = seq_len - q_len

    rows = tl.arange(0, BLOCK_M)
    q_rel = q_block * BLOCK_Q + rows // GROUP
    row_valid = (rows < BLOCK_Q * GROUP) & (q_rel < q_len)
    q_pos = context_len + q_rel
    token = (q_start + q_rel).to(tl.int64)
    q_head = kv_head * GROUP + rows % GROUP
    q0 = _query_part(q_ptr, token, q_head, row_valid, stride_qt, stride_qh, 0, P, DP, DP_PAD, INTERPRET_)
    q1 = _query_part(q_ptr, token, q_head, row_valid, stride_qt, stride_qh, 1, P, DP, DP_PAD, INTERPRET_)
    if P == 4:
        q2 = _query_part(q_ptr, token, q_head, row_valid, stride_qt, stride_qh, 2, P, DP, DP_PAD, INTERPRET_)
        q3 = _query_part(q_ptr, token, q_head, row_valid, stride_qt, stride_qh, 3, P, DP, DP_PAD, INTERPRET_)
    else:
        q2 = q0
        q3 = q1
    f0, f1 = q0, q1  # fp32, for the int8 dots
    if Q_POW2_SCALE:  # bf16 query, fp16 dots: scale into fp16's range by a power of two (exact)
        amax = tl.maximum(tl.max(tl.max(tl.abs(q0), axis=1), axis=0),
                          tl.max(tl.max(tl.abs(q1), axis=1), axis=0))
        if P == 4:
            amax = tl.maximum(amax, tl.maximum(tl.max(tl.max(tl.abs(q2), axis=1), axis=0),
                                               tl.max(tl.max(tl.abs(q3), axis=1), axis=0)))
        shift = tl.maximum(((amax.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127 - 14, 0)
        down = ((127 - shift) << 23).to(tl.float32, bitcast=True)
        q0, q1, q2, q3 = q0 * down, q1 * down, q2 * down, q3 * down
        qk_scale = qk_scale * ((127 + shift) << 23).to(tl.float32, bitcast=True)
    q0 = round_to_dot_dtype(q0, DOT_DTYPE, INTERPRET_)
    q1 = round_to_dot_dtype(q1, DOT_DTYPE, INTERPRET_)
    q2 = round_to_dot_dtype(q2, DOT_DTYPE, INTERPRET_)
    q3 = round_to_dot_dtype(q3, DOT_DTYPE, INTERPRET_)

    first_q, kv_start, kv_end, tile_lo, tile_hi = key_tile_range(
        context_len, q_block * BLOCK_Q, q_len, window, split, num_splits, BLOCK_Q, TILE_N, USE_WINDOW,
        SPLIT_K)
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    a0 = tl.zeros([BLOCK_M, DVP_PAD], tl.float32)
    a1 = tl.zeros([BLOCK_M, DVP_PAD], tl.float32)
    a2 = tl.zeros([BLOCK_M, DVP_PAD], tl.float32)
    a3 = tl.zeros([BLOCK_M, DVP_PAD], tl.float32)
    bt_row = block_table_ptr + seq.to(tl.int64) * stride_bt
    if KIVI:  # tiles before t_mid lie in blocks that have left the residual (module docstring)
        t_mid = tl.maximum(seq_len // BLOCK_SIZE - (RES_BLOCKS - 1), 0) * BLOCK_SIZE // TILE_N
    else:
        t_mid = tile_hi
    packed_hi = tl.minimum(tile_hi, t_mid)
    # a step's later tiles past the loop's range see no keys (they belong to the residual or to the
    # next split-K segment): the key range is cut at the loop's last tile
    packed_end = tl.minimum(kv_end, packed_hi * TILE_N)
    if INT8_DOTS:  # int4 on int8 dots, keys and channels as the dots' rows (kernels.lowbit_int8_tile)
        qt0, qt1, q_scale = transposed_int8_query(f0, f1, qk_scale)
        at0 = tl.zeros([DVP_PAD, BLOCK_M], tl.float32)
        at1 = tl.zeros([DVP_PAD, BLOCK_M], tl.float32)
        for t in range(tile_lo, packed_hi, STEP_TILES):
            for k in tl.static_range(STEP_TILES):
                m_i, l_i, at0, at1 = attend_int8_tile(
                    t + k, qt0, qt1, q_scale, m_i, l_i, at0, at1, q_pos, row_valid, kv_start, packed_end,
                    kv_head, bt_row, kc_ptr, vc_ptr, ks_ptr, vs_ptr, softcap, window, NUM_KV_HEADS, DP,
                    DP_PAD, DV, DVP, DVP_PAD, BLOCK_SIZE, TILE_N, USE_WINDOW, USE_SOFTCAP,
                    ASM0, ASM1, ASM2, ASM3)
        a0 = tl.trans(at0)
        a1 = tl.trans(at1)
    else:
        for t in range(tile_lo, packed_hi, STEP_TILES):
            for k in tl.static_range(STEP_TILES):
                m_i, l_i, a0, a1, a2, a3 = attend_lowbit_tile(
                    t + k, q0, q1, q2, q3, m_i, l_i, a0, a1, a2, a3, q_pos, row_valid, kv_start,
                    packed_end, kv_head, bt_row, kc_ptr, vc_ptr, ks_ptr, vs_ptr, kz_ptr, vz_ptr, rk_ptr,
                    rv_ptr, rpage_ptr, qk_scale, softcap, window, False, NUM_KV_HEADS, D, DP, DP_PAD, DV,
                    DVP, DVP_PAD, BITS, P, G, KIVI, BLOCK_SIZE, TILE_N, HALF_DEQ, DOT_DTYPE,
                    DOT_PRECISION, USE_WINDOW, USE_SOFTCAP, INTERPRET_, ASM0, ASM1, ASM2, ASM3)
    if KIVI:
        for t in range(tl.maximum(tile_lo, t_mid), tile_hi):
            m_i, l_i, a0, a1, a2, a3 = attend_lowbit_tile(
                t, q0, q1, q2, q3, m_i, l_i, a0, a1, a2, a3, q_pos, row_valid, kv_start, kv_end, kv_head,
                bt_row, kc_ptr, vc_ptr, ks_ptr, vs_ptr, kz_ptr, vz_ptr, rk_ptr, rv_ptr, rpage_ptr, qk_scale,
                softcap, window, True, NUM_KV_HEADS, D, DP, DP_PAD, DV, DVP, DVP_PAD, BITS, P, G, KIVI,
                BLOCK_SIZE, TILE_N, HALF_DEQ, DOT_DTYPE, DOT_PRECISION, USE_WINDOW, USE_SOFTCAP, INTERPRET_,
                ASM0, ASM1, ASM2, ASM3)

    if not SPLIT_K:
        _store_parts(out_ptr, token * stride_ot + q_head * stride_oh, a0, a1, a2, a3, l_i, row_valid, P, DVP,
                     DVP_PAD, True, OUT_DTYPE, INTERPRET_)
    else:
        row = (token * (NUM_KV_HEADS * GROUP) + q_head) * num_splits + split
        _store_parts(part_acc_ptr, row * DV, a0, a1, a2, a3, l_i, row_valid, P, DVP, DVP_PAD, False,
                     OUT_DTYPE, INTERPRET_)
        tl.store(part_stat_ptr + row * 2, m_i, mask=row_valid)
        tl.store(part_stat_ptr + row * 2 + 1, l_i, mask=row_valid)
