"""The paged-attention kernel itself: one program's setup, its key loop, its output or partials.

The lesson (who does what, paging, which tiles, scales, online softmax, split-K, fp8 decoding,
the interpreter) is told in :mod:`kvlab.kernels.attention`, which also launches this kernel; the
inner step over one key tile is :func:`kvlab.kernels.attention_tile.attend_tile`.
"""

from __future__ import annotations

from kvlab.kernels.attention_tile import attend_tile, dot_operand, key_tile_range, tile_block_ids, tile_scales
from kvlab.kernels.dependent_launch import trigger_dependents
from kvlab.kernels.numerics import to_fp32, to_storage
from kvlab.kernels.runtime import tl, triton
from kvlab.kernels.split_reduce import merge_segments


@triton.jit
def _find_sequence(query_start_ptr, q_block, num_seqs, BLOCK_Q: tl.constexpr):
    """The sequence that owns query block ``q_block`` (binary search over query offsets).

    Sequence ``s`` owns the blocks ``query_start[s] // BLOCK_Q + s`` onward; that number grows
    strictly with ``s``, so the owner is the last ``s`` whose first block is <= ``q_block``.
    """
    lo = 0
    hi = num_seqs
    while lo + 1 < hi:
        mid = (lo + hi) // 2
        first = tl.load(query_start_ptr + mid) // BLOCK_Q + mid
        if first <= q_block:
            lo = mid
        else:
            hi = mid
    return lo


@triton.jit
def _merge_if_last(pid, ticket_ptr, out_ptr, part_acc_ptr, part_stat_ptr, token, kv_head,
                   num_splits, out_scale, stride_ot, stride_oh,
                   NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr, HEAD_SIZE_V: tl.constexpr,
                   HEAD_SIZE_V_PAD: tl.constexpr, SPLITS_PAD: tl.constexpr, MERGE_BLOCK_D: tl.constexpr,
                   OUT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr):
    """Fused split-K merge (decode only: one query token ``token``, ``GROUP`` query heads per program).

    Every segment of a (sequence, KV head) has just stored its partials; each then draws a ticket
    from the pair's counter. The program that draws ``num_splits − 1`` is the last one: every other
    segment's partials are written, so it merges them (:func:`kvlab.kernels.split_reduce.merge_segments`,
    the same code as the merge kernel) and stores the output. No program waits on another, so the
    order in which the GPU schedules segments does not matter and nothing can deadlock.

    Memory ordering: the barrier makes every thread's partial stores happen before the one thread
    that takes the ticket; its atomic add is *release* (those stores become visible at GPU scope
    before the new count does) and *acquire* (the last program, seeing the count of all others,
    also sees their partials). The ticket's value reaches the other threads through shared memory
    behind a barrier, and the partials are read from L2 (``.cg``), never a stale L1 line.

    Reset: the last program writes the counter back to 0. No other program of this launch touches
    it again (all have drawn), and the next launch, or a CUDA-graph replay of this one, is ordered
    after this kernel on its stream, so it starts from 0 without a host-side memset.
    """
    tl.debug_barrier()
    ticket = tl.atomic_add(ticket_ptr + pid, 1, sem="acq_rel", scope="gpu")
    if ticket == num_splits - 1:
        tl.store(ticket_ptr + pid, 0)
        for g in tl.static_range(GROUP):
            q_head = kv_head * GROUP + g
            row = token * (NUM_KV_HEADS * GROUP) + q_head
            for d_block in tl.static_range(HEAD_SIZE_V_PAD // MERGE_BLOCK_D):
                merge_segments(out_ptr + token * stride_ot + q_head * stride_oh,
                               part_acc_ptr, part_stat_ptr, row, num_splits, out_scale, d_block,
                               SPLITS_PAD, HEAD_SIZE_V, MERGE_BLOCK_D, OUT_DTYPE, INTERPRET_)


@triton.jit
def paged_attention_kernel(
    out_ptr, part_acc_ptr, part_stat_ptr, ticket_ptr,
    q_ptr, k_ptr, v_ptr, k_scale_ptr, v_scale_ptr,
    block_table_ptr, query_start_ptr, seq_lens_ptr,
    num_seqs, num_splits,
    qk_scale, out_scale, softcap, window,
    stride_qt, stride_qh, stride_ot, stride_oh,
    stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
    stride_bt, table_cols, split_tiles,
    NUM_KV_HEADS: tl.constexpr, GROUP: tl.constexpr,
    HEAD_SIZE: tl.constexpr, HEAD_SIZE_PAD: tl.constexpr,
    HEAD_SIZE_V: tl.constexpr, HEAD_SIZE_V_PAD: tl.constexpr,
    BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_Q: tl.constexpr,
    DECODE_ONLY: tl.constexpr, QUANT_MODE: tl.constexpr,
    IS_FP8: tl.constexpr, FP8_MANT_BITS: tl.constexpr, FP8_SPECIAL_MASK: tl.constexpr,
    FP8_HAS_INF: tl.constexpr, FP8_DECODE_ASM: tl.constexpr, FP8_KEEP_SPECIALS: tl.constexpr,
    DOT_DTYPE: tl.constexpr, P_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr, OUT_DTYPE: tl.constexpr,
    USE_WINDOW: tl.constexpr, USE_SOFTCAP: tl.constexpr, SPLIT_K: tl.constexpr, Q_POW2_SCALE: tl.constexpr,
    INTERPRET_: tl.constexpr, SCALES_BY_TOKEN: tl.constexpr, LONGEST_FIRST: tl.constexpr,
    DECODE_FULL_TILES: tl.constexpr, INT8_K_OVER_64: tl.constexpr, INT8_V_OVER_64: tl.constexpr,
    FUSED_MERGE: tl.constexpr, SPLITS_PAD: tl.constexpr, MERGE_BLOCK_D: tl.constexpr,
    LAUNCH_DEPENDENTS: tl.constexpr, FIXED_SEGMENTS: tl.constexpr, TILES_NONNEGATIVE: tl.constexpr,
):
    if LAUNCH_DEPENDENTS:
        # the merge kernel may be launched now: it waits for this grid's partials by itself
        trigger_dependents()
    pid = tl.program_id(0)
    kv_head = pid % NUM_KV_HEADS
    q_block = pid // NUM_KV_HEADS
    if LONGEST_FIRST:
        # the last query blocks see the most keys: hand them out first (see AttentionTiling)
        q_block = tl.num_programs(0) // NUM_KV_HEADS - 1 - q_block
    split = tl.program_id(1)

    # -- which sequence, which query rows --------------------------------------------------------
    if DECODE_ONLY:
        seq = q_block
        q_block_local = 0
    else:
        seq = _find_sequence(query_start_ptr, q_block, num_seqs, BLOCK_Q)
        q_block_local = q_block - (tl.load(query_start_ptr + seq) // BLOCK_Q + seq)
    q_start = tl.load(query_start_ptr + seq)
    q_len = tl.load(query_start_ptr + seq + 1) - q_start
    # Every global load before the first K/V tile is a round trip to L2 or DRAM (~1 µs at B=1, where
    # nothing else hides it), so the ones that do not depend on each other are issued together:
    # the sequence's length goes out beside its query offsets, not after the test that reads them.
    seq_len = tl.load(seq_lens_ptr + seq)
    bt_row = block_table_ptr + seq.to(tl.int64) * stride_bt
    if FIXED_SEGMENTS:
        # Split decode without a window: segment `split` is tiles [split·P, split·P + P) of every
        # sequence (P = split_tiles, from the batch's longest one), so its first block ids are known
        # before seq_len arrives and load beside it; positions past the sequence are zeroed below.
        n_first = split * split_tiles * TILE_N + tl.arange(0, TILE_N)
        blk_first = tl.load(bt_row + n_first // BLOCK_SIZE, mask=n_first // BLOCK_SIZE < table_cols, other=0)
    if q_block_local * BLOCK_Q >= q_len:
        return  # past this sequence's new tokens (or a sequence with none)
    context_len = seq_len - q_len

    rows = tl.arange(0, BLOCK_M)
    q_rel = q_block_local * BLOCK_Q + rows // GROUP
    row_valid = (rows < BLOCK_Q * GROUP) & (q_rel < q_len)
    q_pos = context_len + q_rel  # absolute position of each row's query token
    token = (q_start + q_rel).to(tl.int64)
    q_head = kv_head * GROUP + rows % GROUP

    d = tl.arange(0, HEAD_SIZE_PAD)
    d_mask = d < HEAD_SIZE
    dv = tl.arange(0, HEAD_SIZE_V_PAD)
    dv_mask = dv < HEAD_SIZE_V
    q = tl.load(q_ptr + token[:, None] * stride_qt + q_head[:, None] * stride_qh + d[None, :],
                mask=row_valid[:, None] & d_mask[None, :], other=0.0)
    if Q_POW2_SCALE:
        # A bf16 query over an fp16 cache: the dots run in fp16, so q must fit fp16's range. bf16
        # has 8 significant bits and fp16 11, so q · 2^-k is exact in fp16 once its largest
        # magnitude is below 2^15; 2^k goes back in with the softmax scale (exact: a power of two).
        q = to_fp32(q, INTERPRET_)
        amax = tl.max(tl.max(tl.abs(q), axis=1), axis=0)
        shift = tl.maximum(((amax.to(tl.int32, bitcast=True) >> 23) & 0xFF) - 127 - 14, 0)
        q = q * ((127 - shift) << 23).to(tl.float32, bitcast=True)
        qk_scale = qk_scale * ((127 + shift) << 23).to(tl.float32, bitcast=True)
    q = dot_operand(q, False, FP8_MANT_BITS, FP8_SPECIAL_MASK, FP8_HAS_INF, FP8_DECODE_ASM,
                     FP8_KEEP_SPECIALS, DOT_DTYPE, INTERPRET_)

    # -- the tile range: causal bound above, sliding window below, then this program's segment ---
    first_q, kv_start, kv_end, tile_lo, tile_hi = key_tile_range(
        context_len, q_block_local * BLOCK_Q, q_len, window, split, num_splits, BLOCK_Q, TILE_N, USE_WINDOW,
        SPLIT_K and not FIXED_SEGMENTS)
    if FIXED_SEGMENTS:
        # the last segment also takes any tiles past num_splits · P: a sequence that has grown since
        # the launch was sized (a replayed graph) is still read whole
        tile_lo = split * split_tiles
        tile_hi = tl.where(split == num_splits - 1, tile_hi, tl.minimum(tile_lo + split_tiles, tile_hi))

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_SIZE_V_PAD], tl.float32)

    # Tiles every row of the block sees whole (keys at or before the first query, no window) need no
    # mask at all: a prefill chunk over a long context spends most of its tiles there, and the
    # per-element causal test would cost as much integer work as the dots' bookkeeping. Only the
    # tiles on the diagonal (and decode, and windows) take the masked path.
    if USE_WINDOW or (DECODE_ONLY and not DECODE_FULL_TILES):
        full_hi = tile_lo
    elif DECODE_ONLY:
        # the one query sees every key before it: only the tile holding the sequence's end needs a mask
        full_hi = tl.maximum(tl.minimum(kv_end // TILE_N, tile_hi), tile_lo)
    else:
        full_hi = tl.maximum(tl.minimum((first_q + 1) // TILE_N, tile_hi), tile_lo)

    # The block ids (and per-token-head scales) of a tile are fetched one tile ahead: K/V addresses
    # then depend on a value carried over from the previous step instead of on a load in the same
    # one; otherwise that load chain used up pipeline stages, and Triton gave K/V a single
    # shared-memory buffer at any num_stages from 2 to 4 (see kernels/attention_tile.py).
    if FIXED_SEGMENTS:
        blk = tl.where(n_first < kv_end, blk_first, 0)
    else:
        blk = tile_block_ids(bt_row, tile_lo, kv_start, kv_end, TILE_N, BLOCK_SIZE)
    sk, sv = tile_scales(k_scale_ptr, v_scale_ptr, blk, tile_lo, kv_start, kv_end, kv_head, QUANT_MODE,
                         NUM_KV_HEADS, TILE_N, BLOCK_SIZE, SCALES_BY_TOKEN)
    for t in range(tile_lo, full_hi):
        if TILES_NONNEGATIVE:
            tl.assume(t >= 0)  # see the masked loop below
        m_i, l_i, acc, blk, sk, sv = attend_tile(
            t, blk, sk, sv, q, m_i, l_i, acc, q_pos, row_valid, kv_start, kv_end, kv_head, bt_row,
            k_ptr, v_ptr, k_scale_ptr, v_scale_ptr, qk_scale, softcap, window,
            stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
            False, NUM_KV_HEADS, HEAD_SIZE, HEAD_SIZE_PAD, HEAD_SIZE_V, HEAD_SIZE_V_PAD, BLOCK_SIZE, TILE_N,
            DECODE_ONLY, QUANT_MODE, IS_FP8, FP8_MANT_BITS, FP8_SPECIAL_MASK, FP8_HAS_INF, FP8_DECODE_ASM,
            FP8_KEEP_SPECIALS, DOT_DTYPE, P_DTYPE, DOT_PRECISION, USE_WINDOW, USE_SOFTCAP, INTERPRET_,
            SCALES_BY_TOKEN, INT8_K_OVER_64, INT8_V_OVER_64)
    for t in range(full_hi, tile_hi):
        if TILES_NONNEGATIVE:
            # Key positions are never negative, but a split segment's first tile is known only at
            # run time: told so, the compiler computes each key's block and offset in it
            # (n // BLOCK_SIZE, n % BLOCK_SIZE) with a shift and a mask instead of a signed
            # division's shift, add and select (offline, sm_90: an int8 decode step 1,884 → 1,572
            # instructions). Unsplit loops start at tile 0, which the compiler sees by itself; there
            # the hint made the int8 step longer offline (1,407 → 1,441, with spills).
            tl.assume(t >= 0)
        m_i, l_i, acc, blk, sk, sv = attend_tile(
            t, blk, sk, sv, q, m_i, l_i, acc, q_pos, row_valid, kv_start, kv_end, kv_head, bt_row,
            k_ptr, v_ptr, k_scale_ptr, v_scale_ptr, qk_scale, softcap, window,
            stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
            True, NUM_KV_HEADS, HEAD_SIZE, HEAD_SIZE_PAD, HEAD_SIZE_V, HEAD_SIZE_V_PAD, BLOCK_SIZE, TILE_N,
            DECODE_ONLY, QUANT_MODE, IS_FP8, FP8_MANT_BITS, FP8_SPECIAL_MASK, FP8_HAS_INF, FP8_DECODE_ASM,
            FP8_KEEP_SPECIALS, DOT_DTYPE, P_DTYPE, DOT_PRECISION, USE_WINDOW, USE_SOFTCAP, INTERPRET_,
            SCALES_BY_TOKEN, INT8_K_OVER_64, INT8_V_OVER_64)

    if not SPLIT_K:
        # padding rows saw no key (l = 0); divide them by 1 instead, they are not stored anyway
        o = acc / tl.where(row_valid, l_i, 1.0)[:, None] * out_scale
        tl.store(out_ptr + token[:, None] * stride_ot + q_head[:, None] * stride_oh + dv[None, :],
                 to_storage(o, OUT_DTYPE, INTERPRET_), mask=row_valid[:, None] & dv_mask[None, :])
    else:
        # partials [num_tokens, num_q_heads, num_splits, ...]; empty segments write m=-inf, l=0
        row = (token * (NUM_KV_HEADS * GROUP) + q_head) * num_splits + split
        tl.store(part_acc_ptr + row[:, None] * HEAD_SIZE_V + dv[None, :], acc,
                 mask=row_valid[:, None] & dv_mask[None, :])
        tl.store(part_stat_ptr + row * 2, m_i, mask=row_valid)
        tl.store(part_stat_ptr + row * 2 + 1, l_i, mask=row_valid)
        if FUSED_MERGE:
            _merge_if_last(pid, ticket_ptr, out_ptr, part_acc_ptr, part_stat_ptr, q_start.to(tl.int64),
                           kv_head, num_splits, out_scale, stride_ot, stride_oh, NUM_KV_HEADS, GROUP,
                           HEAD_SIZE_V, HEAD_SIZE_V_PAD, SPLITS_PAD, MERGE_BLOCK_D, OUT_DTYPE, INTERPRET_)
