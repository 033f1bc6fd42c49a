"""One key tile of the int4 decode on int8 dots, computed transposed: keys and channels are the rows.

:mod:`kvlab.kernels.lowbit_int8_dot` says why the dots are int8. This module says how a tile runs
on them. A decode program has ``BLOCK_M`` query rows (4 of them real at GQA 4:1), and a tensor-core
dot needs at least 16 rows. So the tile computes everything transposed:

* ``sᵀ = K · qᵀ`` is ``[TILE_N, BLOCK_M]``: the key codes are the left operand, row-major, exactly as
  the cache stores them, and the query, transposed once per program, is the right one.
* ``oᵀ = V · pᵀ`` is ``[Dv / 2, BLOCK_M]`` per part: the token-minor value codes (``[Dv / 2, TILE_N]``
  bytes) are the left operand as they are loaded, and the probabilities the right one.

The softmax runs down the columns (over keys). The probabilities reach the second dot as its
*right* operand, so they are never turned straight from one int8 product's accumulator layout into
the next product's left operand. On an H100, with the query rows as the left operand (the layout
:mod:`kvlab.kernels.lowbit_tile` uses), the int8 kernel gave wrong scores for most launch shapes, and
right ones only in the interpreter and in small test kernels (``benchmarks/lowbit_notes.md``,
round 15).
"""

from __future__ import annotations

import math

from kvlab.kernels.lowbit_dequant import code_times16_int8
from kvlab.kernels.lowbit_int8_dot import int8_codes, row_inverse_scale
from kvlab.kernels.lowbit_tile import key_bytes, tile_slots, value_bytes
from kvlab.kernels.runtime import tl, triton

LOG2E: tl.constexpr = tl.constexpr(math.log2(math.e))


@triton.jit
def _int8_dot(a, b):
    """``a · b`` of int8 operands, exact in int32."""
    return tl.dot(a, b, tl.zeros([a.shape[0], b.shape[1]], tl.int32), out_dtype=tl.int32)


@triton.jit
def attend_int8_tile(
    t, qt0, qt1, q_scale, m_i, l_i, at0, at1, q_pos, row_valid, kv_start, kv_end, kv_head, bt_row,
    kc_ptr, vc_ptr, ks_ptr, vs_ptr, softcap, window,
    NUM_KV_HEADS: tl.constexpr, DP: tl.constexpr, DP_PAD: tl.constexpr, DV: tl.constexpr, DVP: tl.constexpr,
    DVP_PAD: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
    USE_WINDOW: tl.constexpr, USE_SOFTCAP: tl.constexpr,
    ASM_K0: tl.constexpr, ASM_K1: tl.constexpr, ASM_V0: tl.constexpr, ASM_V1: tl.constexpr,
):
    """Fold key tile ``t`` of an int4 cache into the online softmax ``(m_i, l_i)`` (per query row) and
    the transposed accumulator parts ``at0``, ``at1`` (``[Dv / 2, BLOCK_M]``, channels ``2j`` and
    ``2j + 1``). ``qt0``, ``qt1``: the query's int8 parts, transposed (``[D / 2, BLOCK_M]``);
    ``q_scale``: each query row's int8 scale times the softmax scale, over 16."""
    BPT: tl.constexpr = TILE_N // BLOCK_SIZE
    n, n_valid, _, slot_row, blk_b, _ = tile_slots(t, kv_start, kv_end, kv_head, bt_row, NUM_KV_HEADS,
                                                   BLOCK_SIZE, TILE_N)

    kb = key_bytes(kc_ptr, slot_row, n_valid, DP, DP_PAD, False, BPT, BLOCK_SIZE)  # [TILE_N, D / 2]
    st = _int8_dot(code_times16_int8(kb, 0, ASM_K0), qt0)
    st += _int8_dot(code_times16_int8(kb, 1, ASM_K1), qt1)
    k_scale = tl.load(ks_ptr + slot_row, mask=n_valid, other=1.0)
    v_scale = tl.load(vs_ptr + slot_row, mask=n_valid, other=0.0)
    if USE_SOFTCAP:
        st = st.to(tl.float32) * k_scale[:, None] * q_scale[None, :]
        st = softcap * (1.0 - 2.0 / (tl.exp(tl.minimum(2.0 * st / softcap, 40.0)) + 1.0)) * LOG2E
    else:  # base 2 folded into the rows' scales: one multiply per score fewer
        st = st.to(tl.float32) * k_scale[:, None] * (q_scale * LOG2E)[None, :]
    dist = q_pos[None, :] - n[:, None]
    allowed = row_valid[None, :] & n_valid[:, None] & (dist >= 0)
    if USE_WINDOW:
        allowed = allowed & (dist < window)
    st = tl.where(allowed, st, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(st, axis=0))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
    alpha = tl.exp2(m_i - m_safe)
    pt = tl.exp2(st - m_safe[None, :])
    l_i = l_i * alpha + tl.sum(pt, axis=0)

    # the V scale folds into p (after the softmax sum took the unscaled p); then p to int8 per row
    pt = pt * v_scale[:, None]
    p_max = tl.max(pt, axis=0)
    pti = int8_codes(pt, row_inverse_scale(p_max)[None, :])
    p_scale = p_max / (127.0 * 16.0)  # 16: the value codes are 16 · (code − 8)
    vb, _, _ = value_bytes(vc_ptr, vs_ptr, vs_ptr, blk_b, n_valid, kv_head, NUM_KV_HEADS, DV, DVP, DVP_PAD,
                           16, 2, False, BPT, BLOCK_SIZE, TILE_N)  # [Dv / 2, TILE_N]
    ot0 = _int8_dot(code_times16_int8(vb, 0, ASM_V0), pti)
    at0 = at0 * alpha[None, :] + ot0.to(tl.float32) * p_scale[None, :]
    ot1 = _int8_dot(code_times16_int8(vb, 1, ASM_V1), pti)
    at1 = at1 * alpha[None, :] + ot1.to(tl.float32) * p_scale[None, :]
    return m_new, l_i, at0, at1


@triton.jit
def transposed_int8_query(q0, q1, qk_scale):
    """The query parts ``[BLOCK_M, D / 2]`` (fp32) as int8 operands ``qt0``, ``qt1`` (``[D / 2, BLOCK_M]``),
    each row rounded with its own scale ``max|row| / 127`` over all its channels, and ``q_scale``:
    that scale times ``qk_scale`` over 16 (per row)."""
    amax = tl.maximum(tl.max(tl.abs(q0), axis=1), tl.max(tl.abs(q1), axis=1))
    inv = row_inverse_scale(amax)[:, None]
    return tl.trans(int8_codes(q0, inv)), tl.trans(int8_codes(q1, inv)), qk_scale * amax / (127.0 * 16.0)
