"""Lesson kernel 1: writing new tokens into the paged cache, quantizing on the way in.

Every step of a serving engine ends with the new tokens' K and V being stored at the *slots* the
block allocator gave them (``slot = block_id * block_size + offset``). For a quantized cache this
store is where precision is lost, so it must do exactly what the reference writer
(:meth:`kvlab.cache.PagedKVCache.write`) does: the tests compare codes and scales bit for bit.

The head vector of one (token, KV head) pair (``head_size`` values) is the unit a per-token-head
scale belongs to, so its ``max |x|`` is one in-register reduction along a row, and no program ever
talks to another. A program takes several such rows at once
(:func:`kvlab.kernels.launch_config.write_rows_per_program`): whole tokens, all their KV heads, so
each token's heads are read and written as one contiguous run. One pair per program, as this
kernel once did, gave 131,072 programs of 256 bytes for 16,384 tokens and ran at about half the copy
bandwidth on an H100 (84.5 µs for bf16): per-program overhead, not bytes, set the time. K and V of
a row are done by the same program.

The arithmetic, per scheme (``y`` are fp32 values, every step correctly rounded fp32):

* ``bfloat16``/``float16``/``auto``: plain conversion to the storage dtype;
* per-tensor fp8: ``y = clamp(x / scale, -FMAX, FMAX)`` then fp8 round-to-nearest-even. The clamp
  makes out-of-range values saturate instead of becoming NaN (e4m3 has no infinity); saturated
  values are counted per program and summed on the host;
* per-token-head: ``s = max(max|x| / QMAX, 1e-6)``, ``inv = 1 / s``, ``y = clamp(x * inv, QMIN, QMAX)``,
  then int8 round-half-even (``nearest``) or truncation (``truncate``, what a float→int cast does),
  or fp8 round-to-nearest-even.

Why ``tl.math.div_rn``: Triton compiles a plain fp32 ``/`` to the GPU's fast approximate division
(about 2 ulp). The reference divides with IEEE rounding, and one ulp in ``s`` or ``1/s`` changes
codes, so the two divisions here ask for the correctly rounded ``div_rn``.

Padding tokens (slot < 0) are skipped with a masked store; nothing else in the cache is touched.

Expect about 10 to 30 ms per (token, KV head) program in Triton's interpreter, so a CPU lesson writes
tens of tokens, not thousands.
"""

from __future__ import annotations

import torch

from kvlab.cache.paged_cache import PagedKVCache, WriteReport
from kvlab.kernels.devices import require_kernel_device
from kvlab.kernels.dtypes import fp8_constexprs, triton_dtype
from kvlab.kernels.launch_config import next_pow2, write_rows_per_program
from kvlab.kernels.numerics import round_half_even, to_fp8, to_fp32, to_storage
from kvlab.kernels.runtime import INTERPRET, tl, triton
from kvlab.quantization.formats import SCALE_FLOOR
from kvlab.quantization.per_token_head import ROUNDINGS
from kvlab.quantization.schemes import QuantMode
from kvlab.validation import require_choice

# Quantization modes as constexprs, from the one enum that defines them.
MODE_NONE: tl.constexpr = tl.constexpr(int(QuantMode.NONE))
MODE_FP8_PER_TENSOR: tl.constexpr = tl.constexpr(int(QuantMode.FP8_PER_TENSOR))
MODE_INT8_PER_TOKEN_HEAD: tl.constexpr = tl.constexpr(int(QuantMode.INT8_PER_TOKEN_HEAD))


@triton.jit
def _quantize_rows(
    x, d_mask, scale, QUANT_MODE: tl.constexpr, QMIN: tl.constexpr, QMAX: tl.constexpr,
    SCALE_FLOOR_: tl.constexpr, ROUND_NEAREST: tl.constexpr, DST: tl.constexpr,
    MANT_BITS: tl.constexpr, EXP_BIAS: tl.constexpr, SUBNORMAL_SCALE: tl.constexpr,
    MIN_NORMAL: tl.constexpr, NAN_CODE: tl.constexpr, INTERPRET_: tl.constexpr,
):
    """Head vectors ``[ROWS, D]`` (fp32, padding lanes 0) → (codes in ``DST``, one scale per row,
    count of saturated elements where ``d_mask`` holds)."""
    saturated = 0
    if QUANT_MODE == MODE_NONE:
        codes = to_storage(x, DST, INTERPRET_)
        s = tl.full([x.shape[0]], 1.0, tl.float32)
    elif QUANT_MODE == MODE_FP8_PER_TENSOR:
        y = tl.math.div_rn(x, scale)
        saturated = tl.sum(tl.sum(((tl.abs(y) > QMAX) & d_mask).to(tl.int32), axis=1), axis=0)
        # NaN must survive the clamp as in torch.clamp (Triton's min/max would otherwise drop it)
        y = tl.minimum(tl.maximum(y, -QMAX, propagate_nan=tl.PropagateNan.ALL), QMAX,
                       propagate_nan=tl.PropagateNan.ALL)
        codes = to_fp8(y, DST, MANT_BITS, EXP_BIAS, SUBNORMAL_SCALE, MIN_NORMAL, NAN_CODE, INTERPRET_)
        s = tl.full([x.shape[0]], 1.0, tl.float32) * scale
    else:
        absmax = tl.max(tl.abs(x), axis=1)  # one scale per (token, head) row
        s = tl.maximum(tl.math.div_rn(absmax, QMAX), SCALE_FLOOR_)
        inv = tl.math.div_rn(1.0, s)
        y = tl.minimum(tl.maximum(x * inv[:, None], QMIN), QMAX)
        if QUANT_MODE == MODE_INT8_PER_TOKEN_HEAD:
            if ROUND_NEAREST:
                y = round_half_even(y)
            codes = y.to(tl.int8)  # float→int truncates toward zero: the "truncate" rounding
        else:
            codes = to_fp8(y, DST, MANT_BITS, EXP_BIAS, SUBNORMAL_SCALE, MIN_NORMAL, NAN_CODE, INTERPRET_)
    return codes, s, saturated


@triton.jit
def _cache_write_kernel(
    key_ptr, value_ptr, slot_ptr,
    key_cache_ptr, value_cache_ptr, key_scale_ptr, value_scale_ptr, saturated_ptr,
    k_scale, v_scale, num_rows,
    stride_kt, stride_kh, stride_vt, stride_vh,
    stride_kc_slot, stride_kc_head, stride_vc_slot, stride_vc_head,
    NUM_KV_HEADS: tl.constexpr, ROWS: tl.constexpr,
    HEAD_SIZE: tl.constexpr, HEAD_SIZE_PAD: tl.constexpr,
    HEAD_SIZE_V: tl.constexpr, HEAD_SIZE_V_PAD: tl.constexpr,
    CACHE_DTYPE: tl.constexpr,
    QUANT_MODE: tl.constexpr, QMIN: tl.constexpr, QMAX: tl.constexpr, SCALE_FLOOR_: tl.constexpr,
    ROUND_NEAREST: tl.constexpr,
    MANT_BITS: tl.constexpr, EXP_BIAS: tl.constexpr, SUBNORMAL_SCALE: tl.constexpr,
    MIN_NORMAL: tl.constexpr, NAN_CODE: tl.constexpr,
    INTERPRET_: tl.constexpr,
):
    # ROWS consecutive (token, KV head) rows, row = token * NUM_KV_HEADS + head: with ROWS a multiple
    # of NUM_KV_HEADS a program reads whole tokens and writes each token's heads as one contiguous
    # run of the slot's row in the cache.
    pid = tl.program_id(0)
    row = pid * ROWS + tl.arange(0, ROWS)
    live = row < num_rows
    token = (row // NUM_KV_HEADS).to(tl.int64)
    head = row % NUM_KV_HEADS
    # Slots are int64: num_blocks * block_size * num_kv_heads * head_size can pass 2**31 elements.
    slot = tl.load(slot_ptr + token, mask=live, other=-1).to(tl.int64)
    keep = live & (slot >= 0)

    d = tl.arange(0, HEAD_SIZE_PAD)
    dk = d < HEAD_SIZE
    # Padding lanes load 0: they never win the max|x| and are never stored.
    k = tl.load(key_ptr + token[:, None] * stride_kt + head[:, None] * stride_kh + d[None, :],
                mask=live[:, None] & dk[None, :], other=0.0)
    k = to_fp32(k, INTERPRET_)
    k_codes, k_s, k_sat = _quantize_rows(
        k, keep[:, None] & dk[None, :], k_scale, QUANT_MODE, QMIN, QMAX, SCALE_FLOOR_, ROUND_NEAREST,
        CACHE_DTYPE, MANT_BITS, EXP_BIAS, SUBNORMAL_SCALE, MIN_NORMAL, NAN_CODE, INTERPRET_)
    tl.store(key_cache_ptr + slot[:, None] * stride_kc_slot + head[:, None] * stride_kc_head + d[None, :],
             k_codes, mask=keep[:, None] & dk[None, :])

    dv = tl.arange(0, HEAD_SIZE_V_PAD)
    mv = dv < HEAD_SIZE_V
    v = tl.load(value_ptr + token[:, None] * stride_vt + head[:, None] * stride_vh + dv[None, :],
                mask=live[:, None] & mv[None, :], other=0.0)
    v = to_fp32(v, INTERPRET_)
    v_codes, v_s, v_sat = _quantize_rows(
        v, keep[:, None] & mv[None, :], v_scale, QUANT_MODE, QMIN, QMAX, SCALE_FLOOR_, ROUND_NEAREST,
        CACHE_DTYPE, MANT_BITS, EXP_BIAS, SUBNORMAL_SCALE, MIN_NORMAL, NAN_CODE, INTERPRET_)
    tl.store(value_cache_ptr + slot[:, None] * stride_vc_slot + head[:, None] * stride_vc_head + dv[None, :],
             v_codes, mask=keep[:, None] & mv[None, :])

    if QUANT_MODE >= MODE_INT8_PER_TOKEN_HEAD:
        # scale tensors are [num_blocks, block_size, num_kv_heads] contiguous: slot-major
        tl.store(key_scale_ptr + slot * NUM_KV_HEADS + head, k_s, mask=keep)
        tl.store(value_scale_ptr + slot * NUM_KV_HEADS + head, v_s, mask=keep)
    if QUANT_MODE == MODE_FP8_PER_TENSOR:
        # one count per program, no atomics: the host sums them (skipped tokens were not counted)
        tl.store(saturated_ptr + pid * 2, k_sat)
        tl.store(saturated_ptr + pid * 2 + 1, v_sat)


def launch_cache_write(
    cache: PagedKVCache,
    key: torch.Tensor,
    value: torch.Tensor,
    slot_mapping: torch.Tensor,
    *,
    rounding: str = "nearest",
    saturated: torch.Tensor | None = None,
    rows_per_program: int | None = None,
) -> None:
    """Launch the write kernel with no checks and no host synchronisation.

    For callers that validated their inputs once (benchmarks, CUDA-graph capture); everyone else
    uses :func:`write_kv_cache`. ``saturated`` is a zeroed int32 buffer of
    ``2 * num_tokens * num_kv_heads`` counts (each program writes two, the rest stay 0), needed for
    per-tensor fp8 only. ``rows_per_program`` (a power of two) overrides
    :func:`kvlab.kernels.launch_config.write_rows_per_program` (benchmark sweeps).
    """
    sch = cache.scheme
    num_tokens = key.shape[0]
    if num_tokens == 0:
        return
    if key.dtype == torch.float64 or value.dtype == torch.float64:
        # Triton computes in fp32 at most; the reference rounds float64 input the same two ways:
        # straight to the storage dtype when unquantized, to fp32 first when quantized.
        target = sch.storage_dtype if sch.mode == QuantMode.NONE else torch.float32
        key, value = key.to(target), value.to(target)
    if key.stride(-1) != 1:
        key = key.contiguous()
    if value.stride(-1) != 1:
        value = value.contiguous()
    if saturated is None:
        saturated = torch.empty(2 * num_tokens * cache.num_kv_heads, dtype=torch.int32, device=key.device)
    nkv, hs, hv = cache.num_kv_heads, cache.head_size, cache.head_size_v
    rows = rows_per_program or write_rows_per_program(nkv, max(hs, hv))
    num_rows = num_tokens * nkv
    dummy = slot_mapping  # stands in for scale pointers a scheme does not have (never dereferenced)
    qmax = sch.qmax if sch.qmax is not None else 1.0
    qmin = sch.qmin if sch.qmin is not None else -1.0
    fp8 = fp8_constexprs(sch.storage_dtype)
    _cache_write_kernel[(triton.cdiv(num_rows, rows),)](
        key, value, slot_mapping,
        cache.key, cache.value,
        cache.key_scale if cache.key_scale is not None else dummy,
        cache.value_scale if cache.value_scale is not None else dummy,
        saturated,
        cache.k_scale, cache.v_scale, num_rows,
        key.stride(0), key.stride(1), value.stride(0), value.stride(1),
        nkv * hs, hs, nkv * hv, hv,
        NUM_KV_HEADS=nkv, ROWS=rows,
        CACHE_DTYPE=triton_dtype(sch.storage_dtype),
        HEAD_SIZE=hs, HEAD_SIZE_PAD=next_pow2(hs),
        HEAD_SIZE_V=hv, HEAD_SIZE_V_PAD=next_pow2(hv),
        QUANT_MODE=int(sch.mode), QMIN=float(qmin), QMAX=float(qmax), SCALE_FLOOR_=SCALE_FLOOR,
        ROUND_NEAREST=rounding == "nearest",
        **{k: v for k, v in fp8.items() if k not in ("SPECIAL_MASK", "HAS_INF")},
        INTERPRET_=INTERPRET,
    )


def write_kv_cache(
    cache: PagedKVCache,
    key: torch.Tensor,
    value: torch.Tensor,
    slot_mapping: torch.Tensor,
    *,
    rounding: str = "nearest",
    check_finite: bool = True,
) -> WriteReport:
    """Quantize ``key``/``value`` with the cache's scheme and store them at their slots (Triton).

    Same contract as :meth:`kvlab.cache.PagedKVCache.write`, and the same bits: codes and scales
    equal the reference writer's exactly, for finite input.

    Args:
        cache: the paged cache to write into (its scheme decides the quantization).
        key: ``[num_tokens, num_kv_heads, head_size]`` float16/bfloat16/float32/float64.
        value: ``[num_tokens, num_kv_heads, head_size_v]``, same dtypes.
        slot_mapping: ``[num_tokens]`` int32/int64 slots (``block_id * block_size + offset``);
            negative slots are padding and are skipped.
        rounding: int8 per-token-head rounding, ``"nearest"`` (half to even) or ``"truncate"``
            (toward zero, as vLLM's Triton store); fp8 always rounds to nearest even.
        check_finite: refuse NaN/Inf input (one pass over the input on the device). With
            ``check_finite=False`` per-tensor fp8 saturates ±Inf and keeps NaN as NaN like the
            reference; a per-token-head row holding NaN/Inf gets a non-finite scale, and its codes are
            whatever the hardware's conversions make of it (not guaranteed to match the reference).

    Returns:
        A :class:`kvlab.cache.WriteReport` (tokens written and skipped, per-tensor saturations).

    Raises:
        ValueError: for inputs the reference writer refuses, or tensors on the wrong device for the
            Triton mode (the interpreter runs on CPU tensors; compiled Triton needs CUDA tensors).
    """
    require_kernel_device(cache=cache.key)
    cache.check_write_args(key, value, slot_mapping)
    require_choice(rounding, ROUNDINGS, "rounding")
    if cache.scheme.mode == QuantMode.FP8_PER_TOKEN_HEAD and rounding != "nearest":
        raise ValueError("rounding='truncate' applies to int8 only; fp8 codes always round to nearest even")
    if check_finite:  # as the reference writer: rows with a negative slot are not stored, not checked
        cache.check_finite_rows(key, value, slot_mapping)
    saturated = torch.zeros(2 * key.shape[0] * cache.num_kv_heads, dtype=torch.int32, device=key.device)
    launch_cache_write(cache, key, value, slot_mapping, rounding=rounding, saturated=saturated)
    num_written = int((slot_mapping >= 0).sum())
    k_sat = v_sat = 0
    if cache.scheme.mode == QuantMode.FP8_PER_TENSOR:
        pairs = saturated.view(-1, 2).sum(dim=0).tolist()
        k_sat, v_sat = int(pairs[0]), int(pairs[1])
    return WriteReport(num_written, key.shape[0] - num_written, k_sat, v_sat)
