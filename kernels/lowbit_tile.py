"""One key tile of the low-bit attention kernel: packed codes → dot operands → online softmax.

**Codes by position in the byte.** Byte ``j`` of a row holds channels ``j·P + k`` for
``k = 0 .. P − 1`` (``P = 8 / bits``). Instead of widening a byte tile to ``[TILE_N, D]`` (a
reshape that interleaves channels and costs a shuffle through shared memory), the tile is used as
``P`` *parts* ``(byte >> k·bits) & mask`` of shape ``[TILE_N, D / P]``, each a plain elementwise
function of the loaded bytes. The query is loaded once as the matching ``P`` strided parts, so
``q · kᵀ = Σ_k q_k · k_kᵀ`` (``P`` dots of depth ``D / P``), and the output is kept as ``P``
accumulators ``p · v_k`` that are stored to channels ``j·P + k`` at the end. Nothing is interleaved.

**Dequantization, cheap on the GPU** (:mod:`kvlab.kernels.lowbit_dequant`): int4 codes become
``code − 8`` in the dot dtype, its K scale multiplies the score and its V scale folds into ``p``, as
for int8 per-token-head; KIVI tiles become ``code · s + z`` in **fp16** (with 16-bit queries the
KIVI dots run in fp16; a bf16 query is scaled into fp16's range by a power of two, exact, see
:mod:`kvlab.kernels.lowbit_attention`). With fp32 queries everything is fp32.
KIVI key scales belong to (block, channel): a tile of ``BPT`` whole blocks loads them as
``[BPT, D / P]`` and broadcasts each over its block's keys; value scales belong to (token, group of
``G`` channels) and are broadcast over the ``G / P`` bytes of their group: the code tiles are
loaded in those 3-D shapes directly, and flattened only for the dot.

**Values token-minor.** ``P·V`` contracts over keys, so a tensor-core operand register of V holds
consecutive keys of one channel. The cache stores values token-minor (a block's ``B`` bytes at one
byte position lie side by side, :mod:`kvlab.cache.lowbit_cache`), so a value tile is loaded as
``[Dv / P, TILE_N]`` rows of whole 16-byte words, dequantized in that orientation and transposed for
the dot (a layout change the compiler makes with 16-bit ``ldmatrix``, not single-byte loads). Value
codes are loaded without a key mask (a key outside the range reads a finite code of block 0 or of a
block of the sequence); its scale, zero point (KIVI) or ``p`` (int4) is what is masked to zero.

**Residual.** ``MIXED=False`` tiles hold only quantized blocks (the kernel knows which tiles are past
the residual of every sequence), so they load no residual at all. ``MIXED=True`` tiles (the last few
of a KIVI sequence) pick, per key, the bf16 residual row when ``residual_page[block] >= 0``.
"""

from __future__ import annotations

import math

from kvlab.kernels.lowbit_dequant import as_dot_operand, code_part, code_values, half_of_word, kivi_dequant
from kvlab.kernels.numerics import round_to_dot_dtype
from kvlab.kernels.runtime import tl, triton

LOG2E: tl.constexpr = tl.constexpr(math.log2(math.e))


@triton.jit
def key_bytes(kc_ptr, slot_row, packed, DP: tl.constexpr, DP_PAD: tl.constexpr, KIVI: tl.constexpr,
              BPT: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """The tile's key code bytes, loaded once: ``[TILE_N, D / P]``, or ``[BPT, B, D / P]`` for KIVI
    tiles of several blocks (so that per-block scales broadcast without a reshape)."""
    j = tl.arange(0, DP_PAD)
    jm = j < DP
    if KIVI and BPT > 1:
        slot3 = tl.reshape(slot_row, [BPT, BLOCK_SIZE])
        packed3 = tl.reshape(packed, [BPT, BLOCK_SIZE])
        return tl.load(kc_ptr + slot3[:, :, None] * DP + j[None, None, :],
                       mask=packed3[:, :, None] & jm[None, None, :], other=0)
    else:
        return tl.load(kc_ptr + slot_row[:, None] * DP + j[None, :], mask=packed[:, None] & jm[None, :],
                       other=0)


@triton.jit
def key_scale_words(ks_ptr, kz_ptr, blk_b, b_valid, kv_head, NUM_KV_HEADS: tl.constexpr, DP: tl.constexpr,
                    DP_PAD: tl.constexpr):
    """KIVI key scales and zero points of the tile's blocks as *words* ``[BPT, D / P]``: the cache's
    fp16 rows read as ``P·16``-bit integers (the host passes int32/int64 views), so word ``j`` holds the
    ``P`` scales of byte ``j``'s ``P`` codes. One wide load replaces ``P`` scattered 2-byte loads."""
    j = tl.arange(0, DP_PAD)
    off = (blk_b * NUM_KV_HEADS + kv_head)[:, None] * DP + j[None, :]
    m = b_valid[:, None] & (j < DP)[None, :]
    return tl.load(ks_ptr + off, mask=m, other=0), tl.load(kz_ptr + off, mask=m, other=0)


@triton.jit
def operand_part(b, s, z, r_ptr, res_row, from_res, K: tl.constexpr, ASM: tl.constexpr, W: tl.constexpr,
                 WP: tl.constexpr, WP_PAD: tl.constexpr, BITS: tl.constexpr, P: tl.constexpr,
                 KIVI: tl.constexpr, MIXED: tl.constexpr, TILE_N: tl.constexpr, HALF_DEQ: tl.constexpr,
                 DOT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr, TOKEN_MINOR: tl.constexpr = False):
    """Part ``K`` of a K or V tile of rows ``W`` wide, ``[TILE_N, W / P]`` padded, as dot operand.

    ``b`` are the tile's code bytes (:func:`key_bytes`, or :func:`value_bytes` with ``TOKEN_MINOR``:
    ``[W / P, TILE_N]``, transposed here after dequantization) and, for KIVI, ``s``/``z`` the fp16
    scales and zero points broadcastable to them; in ``MIXED`` tiles the keys that are still in the
    residual come from its bf16 rows ``r_ptr`` instead.
    """
    if KIVI:
        x = kivi_dequant(b, K, BITS, s, z, ASM, HALF_DEQ, DOT_DTYPE, INTERPRET_)
        if TOKEN_MINOR:
            x = tl.trans(tl.reshape(x, [WP_PAD, TILE_N]))
        else:
            x = tl.reshape(x, [TILE_N, WP_PAD])
        if MIXED:
            j = tl.arange(0, WP_PAD)
            r = tl.load(r_ptr + res_row[:, None] * W + j[None, :] * P + K,
                        mask=from_res[:, None] & (j < WP)[None, :], other=0.0)
            x = tl.where(from_res[:, None], as_dot_operand(r, DOT_DTYPE, INTERPRET_), x)
    else:
        if ASM != "":
            x = code_values(b, K, BITS, ASM, 8, DOT_DTYPE)
        else:
            x = as_dot_operand(code_part(b, K, BITS).to(tl.int8) - 8, DOT_DTYPE, INTERPRET_)
        if TOKEN_MINOR:
            x = tl.trans(x)
    return x


@triton.jit
def key_part(b, ws, wz, rk_ptr, res_row, from_res, K: tl.constexpr, ASM: tl.constexpr, D: tl.constexpr,
             DP: tl.constexpr, DP_PAD: tl.constexpr, BITS: tl.constexpr, P: tl.constexpr, KIVI: tl.constexpr,
             MIXED: tl.constexpr,
             BPT: tl.constexpr, TILE_N: tl.constexpr, HALF_DEQ: tl.constexpr, DOT_DTYPE: tl.constexpr,
             INTERPRET_: tl.constexpr):
    """Part ``K`` of the key tile (bytes ``b`` from :func:`key_bytes`, KIVI scale words ``ws``/``wz`` from
    :func:`key_scale_words`), ``[TILE_N, D / P]`` padded, as dot operand."""
    s = ws
    z = wz
    if KIVI:
        s = half_of_word(ws, K)
        z = half_of_word(wz, K)
        if BPT > 1:  # one scale per (block, channel), broadcast over the block's keys
            s = s[:, None, :]
            z = z[:, None, :]
    return operand_part(b, s, z, rk_ptr, res_row, from_res, K, ASM, D, DP, DP_PAD, BITS, P, KIVI, MIXED,
                        TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_)


@triton.jit
def block_rows(ptr, row0, ROWS: tl.constexpr, ROWS_PAD: tl.constexpr, BPT: tl.constexpr,
               BLOCK_SIZE: tl.constexpr):
    """``[ROWS_PAD, BPT · B]``: rows ``0 .. ROWS − 1`` of ``B`` entries of each of the tile's ``BPT``
    blocks, block ``i``'s rows one contiguous run of ``ROWS × B`` entries from ``ptr + row0[i] · B``
    (the token-minor value layout). Loaded as those runs (so that a block's rows lie ``B`` entries
    apart in shared memory too, not ``BPT · B``: whole 128-byte lines per warp, no bank conflicts),
    then viewed row-major over the tile's keys (a register relabelling)."""
    r = tl.arange(0, ROWS_PAD * BLOCK_SIZE)
    x = tl.load(ptr + row0[:, None] * BLOCK_SIZE + r[None, :], mask=(r < ROWS * BLOCK_SIZE)[None, :], other=0)
    return tl.reshape(tl.permute(tl.reshape(x, [BPT, ROWS_PAD, BLOCK_SIZE]), (1, 0, 2)),
                      [ROWS_PAD, BPT * BLOCK_SIZE])


@triton.jit
def value_bytes(vc_ptr, vs_ptr, vz_ptr, blk_b, n_valid, kv_head, NUM_KV_HEADS: tl.constexpr, DV: tl.constexpr,
                DVP: tl.constexpr, DVP_PAD: tl.constexpr, G: tl.constexpr, P: tl.constexpr,
                KIVI: tl.constexpr,
                BPT: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr):
    """The tile's value code bytes, token-minor (module docstring), loaded once per block as
    :func:`block_rows`; for KIVI also the scales and zero points of their groups: ``[Dv/G, G/P, TILE_N]``
    bytes and ``[Dv/G, 1, TILE_N]`` fp16, zero for keys outside ``n_valid`` (one group's bytes hold the
    same channels' codes at every position ``K``, so all parts share them). int4: ``[Dv / P, TILE_N]``."""
    head = blk_b * NUM_KV_HEADS + kv_head  # [BPT]: the (block, head) of each block of the tile
    b = block_rows(vc_ptr, head * DVP, DVP, DVP_PAD, BPT, BLOCK_SIZE)
    if KIVI:
        NG: tl.constexpr = DVP_PAD * P // G  # value groups (padded)
        keep = n_valid[None, :]
        s = tl.where(keep, block_rows(vs_ptr, head * (DV // G), DV // G, NG, BPT, BLOCK_SIZE), 0.0)
        z = tl.where(keep, block_rows(vz_ptr, head * (DV // G), DV // G, NG, BPT, BLOCK_SIZE), 0.0)
        return tl.reshape(b, [NG, G // P, TILE_N]), s[:, None, :], z[:, None, :]
    else:
        return b, b, b


@triton.jit
def tile_slots(t, kv_start, kv_end, kv_head, bt_row, NUM_KV_HEADS: tl.constexpr, BLOCK_SIZE: tl.constexpr,
               TILE_N: tl.constexpr):
    """Where key tile ``t`` lives: its key positions ``n`` and which lie in ``[kv_start, kv_end)``,
    each key's cache block and row of the per-(slot, head) arrays (``[TILE_N]``), and the tile's
    ``TILE_N / B`` blocks with which of them hold a key of the range (``[TILE_N / B]``)."""
    BPT: tl.constexpr = TILE_N // BLOCK_SIZE
    n = t * TILE_N + tl.arange(0, TILE_N)
    n_valid = (n >= kv_start) & (n < kv_end)
    blk = tl.load(bt_row + n // BLOCK_SIZE, mask=n_valid, other=0).to(tl.int64)
    slot_row = (blk * BLOCK_SIZE + n % BLOCK_SIZE) * NUM_KV_HEADS + kv_head
    offs_b = tl.arange(0, BPT)
    first = t * TILE_N + offs_b * BLOCK_SIZE
    b_valid = (first + BLOCK_SIZE > kv_start) & (first < kv_end)
    blk_b = tl.load(bt_row + t * BPT + offs_b, mask=b_valid, other=0).to(tl.int64)
    return n, n_valid, blk, slot_row, blk_b, b_valid


@triton.jit
def attend_lowbit_tile(
    t, q0, q1, q2, q3, m_i, l_i, a0, a1, a2, a3, q_pos, row_valid, kv_start, kv_end, kv_head, bt_row,
    kc_ptr, vc_ptr, ks_ptr, vs_ptr, kz_ptr, vz_ptr, rk_ptr, rv_ptr, rpage_ptr, qk_scale, softcap, window,
    MIXED: tl.constexpr, NUM_KV_HEADS: tl.constexpr, D: tl.constexpr, DP: tl.constexpr, DP_PAD: tl.constexpr,
    DV: tl.constexpr, DVP: tl.constexpr, DVP_PAD: tl.constexpr, BITS: tl.constexpr, P: tl.constexpr,
    G: tl.constexpr, KIVI: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
    HALF_DEQ: tl.constexpr, DOT_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr,
    USE_WINDOW: tl.constexpr, USE_SOFTCAP: tl.constexpr, INTERPRET_: tl.constexpr,
    ASM0: tl.constexpr, ASM1: tl.constexpr, ASM2: tl.constexpr, ASM3: tl.constexpr,
):
    """Fold key tile ``t`` into the online softmax ``(m_i, l_i)`` and the ``P`` accumulator parts
    ``a0 .. a3`` (``a2``, ``a3`` pass through unused when ``P == 2``)."""
    BPT: tl.constexpr = TILE_N // BLOCK_SIZE  # whole cache blocks per tile
    n, n_valid, blk, slot_row, blk_b, b_valid = tile_slots(t, kv_start, kv_end, kv_head, bt_row, NUM_KV_HEADS,
                                                           BLOCK_SIZE, TILE_N)
    if MIXED:
        page = tl.load(rpage_ptr + blk, mask=n_valid, other=-1).to(tl.int64)
        from_res = n_valid & (page >= 0)
        packed = n_valid & (page < 0)
        res_row = (page * BLOCK_SIZE + n % BLOCK_SIZE) * NUM_KV_HEADS + kv_head
    else:
        from_res = n_valid
        packed = n_valid
        res_row = slot_row

    kb = key_bytes(kc_ptr, slot_row, packed, DP, DP_PAD, KIVI, BPT, BLOCK_SIZE)
    if KIVI:
        ws, wz = key_scale_words(ks_ptr, kz_ptr, blk_b, b_valid, kv_head, NUM_KV_HEADS, DP, DP_PAD)
    else:
        ws = kb
        wz = kb
    k0 = key_part(kb, ws, wz, rk_ptr, res_row, from_res, 0, ASM0, D, DP, DP_PAD, BITS, P, KIVI,
                  MIXED, BPT, TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_)
    s = tl.dot(q0, tl.trans(k0), input_precision=DOT_PRECISION)
    k1 = key_part(kb, ws, wz, rk_ptr, res_row, from_res, 1, ASM1, D, DP, DP_PAD, BITS, P, KIVI,
                  MIXED, BPT, TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_)
    s = tl.dot(q1, tl.trans(k1), s, input_precision=DOT_PRECISION)
    if P == 4:
        k2 = key_part(kb, ws, wz, rk_ptr, res_row, from_res, 2, ASM2, D, DP, DP_PAD, BITS, P,
                      KIVI, MIXED, BPT, TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_)
        s = tl.dot(q2, tl.trans(k2), s, input_precision=DOT_PRECISION)
        k3 = key_part(kb, ws, wz, rk_ptr, res_row, from_res, 3, ASM3, D, DP, DP_PAD, BITS, P,
                      KIVI, MIXED, BPT, TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_)
        s = tl.dot(q3, tl.trans(k3), s, input_precision=DOT_PRECISION)
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
    vb, vs, vz = value_bytes(vc_ptr, vs_ptr, vz_ptr, blk_b, n_valid, kv_head, NUM_KV_HEADS, DV, DVP, DVP_PAD,
                             G, P, KIVI, BPT, BLOCK_SIZE, TILE_N)
    v0 = operand_part(vb, vs, vz, rv_ptr, res_row, from_res, 0, ASM0, DV, DVP, DVP_PAD, BITS, P, KIVI, MIXED,
                      TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_, True)
    a0 = tl.dot(p, v0, a0 * alpha[:, None], input_precision=DOT_PRECISION)
    v1 = operand_part(vb, vs, vz, rv_ptr, res_row, from_res, 1, ASM1, DV, DVP, DVP_PAD, BITS, P, KIVI, MIXED,
                      TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_, True)
    a1 = tl.dot(p, v1, a1 * alpha[:, None], input_precision=DOT_PRECISION)
    if P == 4:
        v2 = operand_part(vb, vs, vz, rv_ptr, res_row, from_res, 2, ASM2, DV, DVP, DVP_PAD, BITS, P,
                          KIVI, MIXED, TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_, True)
        a2 = tl.dot(p, v2, a2 * alpha[:, None], input_precision=DOT_PRECISION)
        v3 = operand_part(vb, vs, vz, rv_ptr, res_row, from_res, 3, ASM3, DV, DVP, DVP_PAD, BITS, P,
                          KIVI, MIXED, TILE_N, HALF_DEQ, DOT_DTYPE, INTERPRET_, True)
        a3 = tl.dot(p, v3, a3 * alpha[:, None], input_precision=DOT_PRECISION)
    return m_new, l_i, a0, a1, a2, a3
