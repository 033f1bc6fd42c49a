"""The inner step of the paged-attention kernel: one key tile folded into the online softmax.

Kept apart from :mod:`kvlab.kernels.attention` (the program's setup and the host side) because the
kernel calls it from two loops: the tiles every query row of a program sees whole run it with
``MASKED=False`` (no masks at all), the tiles on the causal diagonal, at a window's edge or of a
decode with ``MASKED=True``.

**What is fetched ahead.** K and V tiles are staged through shared memory by Triton's software
pipeliner (``cp.async`` copies issued ahead of their use, ``num_stages``), so their place in the
source matters little; V is loaded after the scores, where it is needed. Loading it next to K
instead kept both tiles live in registers: compiled offline for sm_90, the int8 decode step under
its 128-register cap spilled 400 bytes per thread instead of 8. The per-token-head scales are small
gathers (one fp32 per key) that the pipeliner does not stage, so a scale load in the same step
stalls it for one memory latency every tile; they are fetched a whole tile ahead instead, like the
block ids, at the end of the previous step, when those block ids have long arrived. (A prefill
chunk of 2,048 tokens over 8,192 took 1.87× bf16's time with its scales loaded in the step, for
two multiplications per score.)
"""

from __future__ import annotations

import math

from kvlab.kernels.int8_decode import int8_to_bf16_over_64
from kvlab.kernels.numerics import fp8_to_bf16, fp8_to_fp32, round_to_dot_dtype, to_fp32
from kvlab.kernels.runtime import tl, triton
from kvlab.quantization.schemes import QuantMode

MODE_INT8_PER_TOKEN_HEAD: tl.constexpr = tl.constexpr(int(QuantMode.INT8_PER_TOKEN_HEAD))
LOG2E: tl.constexpr = tl.constexpr(math.log2(math.e))


@triton.jit
def dot_operand(x, IS_FP8: tl.constexpr, FP8_MANT_BITS: tl.constexpr, FP8_SPECIAL_MASK: tl.constexpr,
                FP8_HAS_INF: tl.constexpr, FP8_DECODE_ASM: tl.constexpr, FP8_KEEP_SPECIALS: tl.constexpr,
                DOT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr, INT8_OVER_64: tl.constexpr = False):
    """Stored values (codes or plain values) → a ``tl.dot`` operand in ``DOT_DTYPE``.

    Compiled: one conversion, exact for int8/fp8 codes into bf16/fp16 (fp8 → bf16 by bit moves, see
    :func:`kvlab.kernels.numerics.fp8_to_bf16`). Interpreter: the exact fp32 value, rounded to
    ``DOT_DTYPE`` but kept in fp32 (see :mod:`kvlab.kernels.numerics`). ``INT8_OVER_64`` (int8
    codes, bf16 dots): the codes divided by 64, in fewer instructions
    (:mod:`kvlab.kernels.int8_decode`); the caller puts the 64 back into its scales.
    """
    if INT8_OVER_64:
        return int8_to_bf16_over_64(x, INTERPRET_)
    elif INTERPRET_:
        if IS_FP8:
            x32 = fp8_to_fp32(x, FP8_MANT_BITS, FP8_SPECIAL_MASK, FP8_HAS_INF, INTERPRET_)
        else:
            x32 = to_fp32(x, INTERPRET_)
        return round_to_dot_dtype(x32, DOT_DTYPE, INTERPRET_)
    else:
        if IS_FP8 and DOT_DTYPE.is_bf16() and FP8_DECODE_ASM != "":
            return fp8_to_bf16(x, FP8_DECODE_ASM, FP8_SPECIAL_MASK, FP8_HAS_INF, FP8_MANT_BITS,
                               FP8_KEEP_SPECIALS)
        else:
            return x.to(DOT_DTYPE)


@triton.jit
def key_tile_range(context_len, q_first, q_len, window, split, num_splits, BLOCK_Q: tl.constexpr,
                   TILE_N: tl.constexpr, USE_WINDOW: tl.constexpr, SPLIT_K: tl.constexpr):
    """The key tiles a program visits: causality bounds them above (its last query), a sliding window
    below (``0 <= p − j < W`` for its first query), then split-K keeps this program's segment.

    ``q_first`` is the program's first query row within its sequence's new tokens. Returns
    ``(first_q, kv_start, kv_end, tile_lo, tile_hi)``: absolute position of the first query, the key
    range ``[kv_start, kv_end)`` any row may see, and the tile range ``[tile_lo, tile_hi)``.
    """
    first_q = context_len + q_first
    kv_end = context_len + tl.minimum(q_first + BLOCK_Q, q_len)  # last query + 1
    if USE_WINDOW:
        kv_start = tl.maximum(first_q - window + 1, 0)
    else:
        kv_start = 0
    tile_lo = kv_start // TILE_N
    tile_hi = (kv_end + TILE_N - 1) // TILE_N
    if SPLIT_K:
        per_split = (tile_hi - tile_lo + num_splits - 1) // num_splits
        tile_lo = tile_lo + split * per_split
        tile_hi = tl.minimum(tile_lo + per_split, tile_hi)
    return first_q, kv_start, kv_end, tile_lo, tile_hi


@triton.jit
def tile_block_ids(bt_row, t, kv_start, kv_end, TILE_N: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """Cache block id of every key position of tile ``t`` (0 where the position is not read)."""
    n = t * TILE_N + tl.arange(0, TILE_N)
    return tl.load(bt_row + n // BLOCK_SIZE, mask=(n >= kv_start) & (n < kv_end), other=0)


@triton.jit
def tile_scales(k_scale_ptr, v_scale_ptr, blk, t, kv_start, kv_end, kv_head, QUANT_MODE: tl.constexpr,
                NUM_KV_HEADS: tl.constexpr, TILE_N: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                SCALES_BY_TOKEN: tl.constexpr):
    """Per-token-head K and V scales of tile ``t`` (K: 1 and V: 0 where a position is not read, so
    it drops out of the softmax sum and of the output); ones for the other schemes (not loaded).

    ``SCALES_BY_TOKEN`` (prefill, a power-of-two number of KV heads): each key's scales of *all* KV
    heads are loaded, one contiguous row of ``NUM_KV_HEADS`` fp32 (8 heads: one 32-byte sector, the
    least the memory system moves anyway), and this head's column is picked out by a sum over the
    row with the other heads zeroed (exact: one term). Loaded one scale per key instead, the
    compiler fetches them in the layout of the tensor-core accumulator they multiply, where each
    thread gathers 16 of a 64-key tile's scales one by one; the row load is vectorised and
    coalesced, and one small layout change (64 values through shared memory) replaces the gather.
    """
    if QUANT_MODE >= MODE_INT8_PER_TOKEN_HEAD:
        n = t * TILE_N + tl.arange(0, TILE_N)
        valid = (n >= kv_start) & (n < kv_end)
        # the scale tensors are [num_blocks, BLOCK_SIZE, NUM_KV_HEADS], contiguous
        token = blk.to(tl.int64) * BLOCK_SIZE + n % BLOCK_SIZE
        if SCALES_BY_TOKEN:
            h = tl.arange(0, NUM_KV_HEADS)
            off = token[:, None] * NUM_KV_HEADS + h[None, :]
            mine = (h == kv_head)[None, :]
            row_k = tl.load(k_scale_ptr + off, mask=valid[:, None], other=1.0)
            row_v = tl.load(v_scale_ptr + off, mask=valid[:, None], other=0.0)
            sk = tl.sum(tl.where(mine, row_k, 0.0), axis=1)
            sv = tl.sum(tl.where(mine, row_v, 0.0), axis=1)
        else:
            sk = tl.load(k_scale_ptr + token * NUM_KV_HEADS + kv_head, mask=valid, other=1.0)
            sv = tl.load(v_scale_ptr + token * NUM_KV_HEADS + kv_head, mask=valid, other=0.0)
    else:
        sk = tl.full([TILE_N], 1.0, tl.float32)
        sv = sk
    return sk, sv


@triton.jit
def attend_tile(
    t, blk, sk, sv, q, m_i, l_i, acc, q_pos, row_valid, kv_start, kv_end, kv_head, bt_row,
    k_ptr, v_ptr, k_scale_ptr, v_scale_ptr, qk_scale, softcap, window,
    stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
    MASKED: tl.constexpr, NUM_KV_HEADS: tl.constexpr, HEAD_SIZE: tl.constexpr, HEAD_SIZE_PAD: tl.constexpr,
    HEAD_SIZE_V: tl.constexpr, HEAD_SIZE_V_PAD: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
    DECODE_ONLY: tl.constexpr, QUANT_MODE: tl.constexpr,
    IS_FP8: tl.constexpr, FP8_MANT_BITS: tl.constexpr, FP8_SPECIAL_MASK: tl.constexpr,
    FP8_HAS_INF: tl.constexpr, FP8_DECODE_ASM: tl.constexpr, FP8_KEEP_SPECIALS: tl.constexpr,
    DOT_DTYPE: tl.constexpr, P_DTYPE: tl.constexpr, DOT_PRECISION: tl.constexpr,
    USE_WINDOW: tl.constexpr, USE_SOFTCAP: tl.constexpr, INTERPRET_: tl.constexpr,
    SCALES_BY_TOKEN: tl.constexpr, INT8_K_OVER_64: tl.constexpr, INT8_V_OVER_64: tl.constexpr,
):
    """Fold key tile ``t`` (block ids ``blk``, scales ``sk``/``sv``) into ``(m_i, l_i, acc)``.

    ``MASKED=False`` is only for tiles whose keys every row may see (all inside ``[kv_start,
    kv_end)``, causal for every row, no window). ``INT8_K_OVER_64`` / ``INT8_V_OVER_64``: K / V codes
    enter the dots divided by 64; the host multiplied ``qk_scale`` / the output scale by 64 (exact,
    powers of two; see :func:`kvlab.kernels.int8_decode.int8_parts_by_trick`). Returns the
    updated ``(m_i, l_i, acc)`` and the block
    ids and scales of tile ``t + 1``.
    """
    offs_n = tl.arange(0, TILE_N)
    d = tl.arange(0, HEAD_SIZE_PAD)
    dv = tl.arange(0, HEAD_SIZE_V_PAD)
    n = t * TILE_N + offs_n
    # keys left of the window are not even loaded: an engine may have freed those blocks
    n_valid = (n >= kv_start) & (n < kv_end)
    blk64 = blk.to(tl.int64)
    in_blk = n % BLOCK_SIZE
    k_addr = (k_ptr + blk64[:, None] * stride_kb + in_blk[:, None] * stride_ks + kv_head * stride_kh
              + d[None, :])
    v_addr = (v_ptr + blk64[:, None] * stride_vb + in_blk[:, None] * stride_vs + kv_head * stride_vh
              + dv[None, :])
    # -- K of this tile, then the next tile's block ids -----------------------------------------------
    if MASKED or HEAD_SIZE != HEAD_SIZE_PAD:
        k = tl.load(k_addr, mask=n_valid[:, None] & (d < HEAD_SIZE)[None, :], other=0.0)
    else:
        k = tl.load(k_addr)
    blk_next = tile_block_ids(bt_row, t + 1, kv_start, kv_end, TILE_N, BLOCK_SIZE)

    # -- scores ---------------------------------------------------------------------------------------
    k = dot_operand(k, IS_FP8, FP8_MANT_BITS, FP8_SPECIAL_MASK, FP8_HAS_INF, FP8_DECODE_ASM,
                    FP8_KEEP_SPECIALS, DOT_DTYPE, INTERPRET_, INT8_K_OVER_64)
    s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)
    if QUANT_MODE >= MODE_INT8_PER_TOKEN_HEAD:
        s = s * (qk_scale * sk)[None, :]  # per-token-head: the K scale multiplies the score
    else:
        s = s * qk_scale
    if USE_SOFTCAP:
        # c·tanh(S/c), with tanh(x) = 1 − 2/(exp(2x) + 1) (no libdevice in the interpreter). The
        # exponent is capped at 40, where tanh is already 1 in fp32, so exp never overflows.
        s = softcap * (1.0 - 2.0 / (tl.exp(tl.minimum(2.0 * s / softcap, 40.0)) + 1.0))
    s = s * LOG2E
    if MASKED:
        if DECODE_ONLY:
            # one query per sequence, at the last position: causality and the window are exactly
            # the tile-range bounds already in n_valid (padding rows compute harmless finite junk)
            s = tl.where(n_valid[None, :], s, float("-inf"))
        else:
            dist = q_pos[:, None] - n[None, :]
            allowed = row_valid[:, None] & n_valid[None, :] & (dist >= 0)
            if USE_WINDOW:
                allowed = allowed & (dist < window)
            s = tl.where(allowed, s, float("-inf"))

    # -- online softmax and the PV dot ----------------------------------------------------------------
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet stays at 0
    alpha = tl.exp2(m_i - m_safe)
    p = tl.exp2(s - m_safe[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if MASKED or HEAD_SIZE_V != HEAD_SIZE_V_PAD:
        v = tl.load(v_addr, mask=n_valid[:, None] & (dv < HEAD_SIZE_V)[None, :], other=0.0)
    else:
        v = tl.load(v_addr)
    if QUANT_MODE >= MODE_INT8_PER_TOKEN_HEAD:
        p = p * sv[None, :]  # the V scale folds into p, after the softmax sum took the unscaled p
    acc = acc * alpha[:, None]
    v = dot_operand(v, IS_FP8, FP8_MANT_BITS, FP8_SPECIAL_MASK, FP8_HAS_INF, FP8_DECODE_ASM,
                    FP8_KEEP_SPECIALS, DOT_DTYPE, INTERPRET_, INT8_V_OVER_64)
    p = round_to_dot_dtype(p, P_DTYPE, INTERPRET_)
    if P_DTYPE != DOT_DTYPE:
        p = p.to(DOT_DTYPE)  # bf16/fp16-valued p into an fp32 (tf32) dot: exact
    acc = tl.dot(p, v, acc, input_precision=DOT_PRECISION)

    # the next tile's scales, by now its block ids have arrived (see the module docstring)
    sk_next, sv_next = tile_scales(k_scale_ptr, v_scale_ptr, blk_next, t + 1, kv_start, kv_end, kv_head,
                                   QUANT_MODE, NUM_KV_HEADS, TILE_N, BLOCK_SIZE, SCALES_BY_TOKEN)
    return m_new, l_i, acc, blk_next, sk_next, sv_next
