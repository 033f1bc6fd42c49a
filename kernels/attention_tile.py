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

from kvlab.kernels.numerics import fp8_to_bf16, fp8_to_fp32, round_to_dot_dtype, to_fp32
from kvlab.kernels.runtime import tl, triton
from kvlab.quantization.schemes import QuantMode

MODE_INT8_PER_TOKEN_HEAD: tl.constexpr = tl.constexpr(int(QuantMode.INT8_PER_TOKEN_HEAD))
LOG2E: tl.constexpr = tl.constexpr(math.log2(math.e))


@triton.jit
def dot_operand(x, IS_FP8: tl.constexpr, FP8_MANT_BITS: tl.constexpr, FP8_SPECIAL_MASK: tl.constexpr,
                FP8_HAS_INF: tl.constexpr, FP8_DECODE_ASM: tl.constexpr, FP8_KEEP_SPECIALS: tl.constexpr,
                DOT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr):
    """Stored values (codes or plain values) → a ``tl.dot`` operand in ``DOT_DTYPE``.

    Compiled: one conversion, exact for int8/fp8 codes into bf16/fp16 (fp8 → bf16 by bit moves, see
    :func:`kvlab.kernels.numerics.fp8_to_bf16`). Interpreter: the exact fp32 value, rounded to
    ``DOT_DTYPE`` but kept in fp32 (see :mod:`kvlab.kernels.numerics`).
    """
    if INTERPRET_:
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
def v_tile_from_words(v_rows, n_valid, MASKED: tl.constexpr, WORD_ASM: tl.constexpr, TILE_N: tl.constexpr,
                      HEAD_SIZE_V: tl.constexpr):
    """An 8-bit V tile ``[TILE_N, HEAD_SIZE_V]`` as bf16, decoded in registers straight from global memory.

    ``v_rows`` points at the first code of each key's row. Why: the PV dot reduces over keys, while
    the cache stores each key's channels contiguously, so the tensor cores want V transposed. For
    16-bit values ``ldmatrix.trans`` transposes on the way out of shared memory; it has no 8-bit
    form, so Triton (which moves the cast after the layout change, where the data is smallest)
    reads an 8-bit V tile back from shared memory one byte per load: 128 ``ld.shared.b8`` per thread
    per 128-key tile. Here the codes are loaded as 32-bit words (4 codes each), decoded by one
    inline-PTX call per word (:func:`kvlab.kernels.numerics.word_to_bf16x4_asm`), which the compiler
    cannot move, and only the bf16 tile goes through shared memory, where ``ldmatrix.trans`` applies.
    Compiled mode only (the interpreter takes the plain path).
    """
    w = tl.arange(0, HEAD_SIZE_V // 4)
    addr = v_rows.to(tl.pointer_type(tl.int32))[:, None] + w[None, :]
    if MASKED:
        words = tl.load(addr, mask=n_valid[:, None], other=0)
    else:
        words = tl.load(addr)
    e0, e1, e2, e3 = tl.inline_asm_elementwise(WORD_ASM, "=h,=h,=h,=h,r", [words], dtype=(tl.bfloat16,) * 4,
                                               is_pure=True, pack=1)
    # code i of word w is channel 4w + i: join pairs (0, 2), (1, 3), then those, so that the
    # row-major reshape puts (w, j, k) at 4w + 2j + k = 4w + i
    return tl.reshape(tl.join(tl.join(e0, e2), tl.join(e1, e3)), [TILE_N, HEAD_SIZE_V])


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
                NUM_KV_HEADS: tl.constexpr, TILE_N: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """Per-token-head K and V scales of tile ``t`` (K: 1 and V: 0 where a position is not read, so
    it drops out of the softmax sum and of the output); ones for the other schemes (not loaded)."""
    if QUANT_MODE >= MODE_INT8_PER_TOKEN_HEAD:
        n = t * TILE_N + tl.arange(0, TILE_N)
        valid = (n >= kv_start) & (n < kv_end)
        # the scale tensors are [num_blocks, BLOCK_SIZE, NUM_KV_HEADS], contiguous
        off = (blk.to(tl.int64) * BLOCK_SIZE + n % BLOCK_SIZE) * NUM_KV_HEADS + kv_head
        sk = tl.load(k_scale_ptr + off, mask=valid, other=1.0)
        sv = tl.load(v_scale_ptr + off, mask=valid, other=0.0)
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
    USE_WINDOW: tl.constexpr, USE_SOFTCAP: tl.constexpr, INTERPRET_: tl.constexpr, V_WORDS_ASM: tl.constexpr,
):
    """Fold key tile ``t`` (block ids ``blk``, scales ``sk``/``sv``) into ``(m_i, l_i, acc)``.

    ``MASKED=False`` is only for tiles whose keys every row may see (all inside ``[kv_start,
    kv_end)``, causal for every row, no window). Returns the updated ``(m_i, l_i, acc)`` and the block
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
                    FP8_KEEP_SPECIALS, DOT_DTYPE, INTERPRET_)
    s = tl.dot(q, tl.trans(k), input_precision=DOT_PRECISION)
    # Scores go to base-2 logits. Without softcap, log2(e) is folded into the scale (one multiply
    # per score, not two); with one scale for the whole tile (16-bit, per-tensor fp8) not even that:
    # the raw dot is kept, its row max is scaled instead, and ``s · c − m`` below is one fused
    # multiply-add per score. The softmax's non-matrix work per score is what bounds prefill next to
    # the tensor cores, so each operation per score counts.
    c = qk_scale * LOG2E
    if USE_SOFTCAP:
        if QUANT_MODE >= MODE_INT8_PER_TOKEN_HEAD:
            s = s * (qk_scale * sk)[None, :]  # per-token-head: the K scale multiplies the score
        else:
            s = s * qk_scale
        # c·tanh(S/c), with tanh(x) = 1 − 2/(exp(2x) + 1) (no libdevice in the interpreter). The
        # exponent is capped at 40, where tanh is already 1 in fp32, so exp never overflows.
        s = softcap * (1.0 - 2.0 / (tl.exp(tl.minimum(2.0 * s / softcap, 40.0)) + 1.0))
        s = s * LOG2E
    elif QUANT_MODE >= MODE_INT8_PER_TOKEN_HEAD:
        s = s * (c * sk)[None, :]
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
    if USE_SOFTCAP or QUANT_MODE >= MODE_INT8_PER_TOKEN_HEAD:
        m_new = tl.maximum(m_i, tl.max(s, axis=1))
    else:
        m_new = tl.maximum(m_i, tl.max(s, axis=1) * c)  # c > 0: the max of the scaled scores
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row with no key yet stays at 0
    alpha = tl.exp2(m_i - m_safe)
    if USE_SOFTCAP or QUANT_MODE >= MODE_INT8_PER_TOKEN_HEAD:
        p = tl.exp2(s - m_safe[:, None])
    else:
        p = tl.exp2(s * c - m_safe[:, None])  # one fused multiply-add per score
    l_i = l_i * alpha + tl.sum(p, axis=1)
    if V_WORDS_ASM != "":
        v = v_tile_from_words(v_ptr + blk64 * stride_vb + in_blk * stride_vs + kv_head * stride_vh, n_valid,
                              MASKED, V_WORDS_ASM, TILE_N, HEAD_SIZE_V_PAD)
    else:
        if MASKED or HEAD_SIZE_V != HEAD_SIZE_V_PAD:
            v = tl.load(v_addr, mask=n_valid[:, None] & (dv < HEAD_SIZE_V)[None, :], other=0.0)
        else:
            v = tl.load(v_addr)
        v = dot_operand(v, IS_FP8, FP8_MANT_BITS, FP8_SPECIAL_MASK, FP8_HAS_INF, FP8_DECODE_ASM,
                        FP8_KEEP_SPECIALS, DOT_DTYPE, INTERPRET_)
    if QUANT_MODE >= MODE_INT8_PER_TOKEN_HEAD:
        p = p * sv[None, :]  # the V scale folds into p, after the softmax sum took the unscaled p
    acc = acc * alpha[:, None]
    p = round_to_dot_dtype(p, P_DTYPE, INTERPRET_)
    if P_DTYPE != DOT_DTYPE:
        p = p.to(DOT_DTYPE)  # bf16/fp16-valued p into an fp32 (tf32) dot: exact
    acc = tl.dot(p, v, acc, input_precision=DOT_PRECISION)

    # the next tile's scales, by now its block ids have arrived (see the module docstring)
    sk_next, sv_next = tile_scales(k_scale_ptr, v_scale_ptr, blk_next, t + 1, kv_start, kv_end, kv_head,
                                   QUANT_MODE, NUM_KV_HEADS, TILE_N, BLOCK_SIZE)
    return m_new, l_i, acc, blk_next, sk_next, sv_next
