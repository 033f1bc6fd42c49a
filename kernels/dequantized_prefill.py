"""Prefill over an 8-bit cache by converting each K/V block once, then the 16-bit kernel.

The fused kernel (:mod:`kvlab.kernels.attention`) turns 8-bit codes into the query's dtype inside every
program that reads a tile. A decode reads each tile once, so that is the cheapest place for it. A prefill
chunk of 2,048 new tokens is served by 32 query blocks per KV head, each reading the whole context:
every tile is converted 32 times, and the converted tile takes a second trip through shared memory before
the tensor cores read it. On an H100 that made 8-bit prefill 1.26-1.69× bf16's time. Here a small kernel
converts each block the batch reads once, into the compact scratch cache of
:mod:`kvlab.kernels.dequantized_scratch`, and the plain 16-bit kernel runs over it: 0.99-1.09× bf16's
time on the same H100 (``benchmarks/kernel_notes.md``, round 9).

**What is stored in the scratch, per scheme** (``c`` a code, ``r`` rounding to the query dtype):

* per-tensor fp8: the code itself, ``c``, exact in bf16 and fp16. The two scales are numbers, so they
  stay out of the values exactly as in the fused kernel: ``k_scale`` joins the softmax scale and
  ``v_scale`` multiplies the output. Same arithmetic as the fused kernel, up to summation order.
* int8 / fp8 per-token-head: ``r(c · s)``, the value dequantized with its token's scale, rounded once.
  A per-token scale cannot be factored out of a dot over tokens, so it has to enter the values. This
  is one rounding more than the fused kernel, which multiplies scores and probabilities by the scales
  instead (vLLM's Triton backend rounds the same way). In bf16 that rounding (up to 2^-8 of a value)
  measurably raised int8's attention error, so for bf16 queries the scratch is **fp16**, whose
  rounding is 8× finer, whenever every value of the cache fits fp16 (:func:`scratch_dtype`); the
  16-bit kernel then runs its fp16-cache path (query scaled into fp16's range by a power of two,
  ``p`` rounded to fp16).

Never-written slots are converted too (they lie in the last block of a sequence); the attention kernel
masks them, as it masks them in the cache itself.

**When** (:func:`dequantize_first_rule`): when the tile conversions the copy saves outweigh the bytes it
adds. A chunk of ``q`` new tokens over ``s`` tokens is served by about ``q / 64`` query blocks per KV
head, so the fused kernel converts its context ``q / 64`` times and the copy saves ``s · (q / 64 − 1)``
token conversions. Every other sequence's context is copied too, though the fused kernel reads it once:
about five times its fused traffic (read 1 byte, write 2, read 2 per value). On an H100, beside a
2,048-token chunk over 8,192, per-tensor fp8 broke even between 2.6 and 3.1 saved conversions per
copied token, int8 per-token-head below 1.9 (``benchmarks/prefill_mixed_batch_ab.py``): the rule asks
for 3, which picked the faster path in 20 of 22 mixes; int8 lost 2% and 9% in the other two.
"""

from __future__ import annotations

import torch

from kvlab.cache.batch import AttentionBatch
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.kernels.dequantized_scratch import DequantizedPrefillCall, scratch_for
from kvlab.kernels.dtypes import fp8_constexprs, triton_dtype
from kvlab.kernels.launch_config import next_pow2
from kvlab.kernels.numerics import fp8_to_fp32, to_fp32, to_storage
from kvlab.kernels.runtime import INTERPRET, tl, triton
from kvlab.quantization.schemes import QuantMode

#: Query positions per program of the prefill tiling (256 rows of GQA 4:1 at head 128): a chunk of ``q``
#: new tokens reads each tile of its context in about ``q / 64`` programs per KV head.
PREFILL_QUERY_BLOCK = 64

#: Saved token conversions needed per copied token of the other sequences (fp8's measured break-even).
SAVED_PER_COPIED_TOKEN = 3.0

#: Largest finite fp16 number.
FP16_MAX = 65504.0


def scratch_dtype(query_dtype: torch.dtype, cache: PagedKVCache) -> torch.dtype:
    """The scratch's dtype (module docstring): fp16 for bf16 queries over a per-token-head cache whose
    largest value, ``max |code| × largest finite scale`` of K and V, fits fp16; otherwise the query's.

    Read from the cache when the call is prepared (one host synchronisation): a prepared call replayed
    after writes that raise a scale above ``FP16_MAX / 128`` would overflow, so prepare it again then.
    """
    sch = cache.scheme
    if query_dtype != torch.bfloat16 or not sch.has_token_head_scales:
        return query_dtype
    largest_scale = max(float(torch.nan_to_num(s, nan=0.0, posinf=0.0).max()) for s in
                        (cache.key_scale, cache.value_scale))
    largest_code = max(sch.qmax, abs(sch.qmin))
    return torch.float16 if largest_code * largest_scale <= FP16_MAX else query_dtype


def dequantize_first_rule(query_lens: list[int], seq_lens: list[int]) -> bool:
    """Whether a batch over an 8-bit cache should convert its blocks once before attention (module
    docstring): ``Σ s · (q // 64 − 1)`` over the chunks of at least 128 new tokens must be positive and at
    least :data:`SAVED_PER_COPIED_TOKEN` × the context tokens of the other sequences. ``q`` and ``s`` are
    new and total tokens per sequence. A batch of decodes alone keeps the fused kernel.
    """
    saved = copied = 0
    for q, s in zip(query_lens, seq_lens, strict=True):
        if q >= 2 * PREFILL_QUERY_BLOCK:
            saved += s * (q // PREFILL_QUERY_BLOCK - 1)
        else:
            copied += s
    return saved > 0 and saved >= SAVED_PER_COPIED_TOKEN * copied


@triton.jit
def _convert_rows(src, scale_ptr, dst, rows, dst_rows, D: tl.constexpr, D_PAD: tl.constexpr,
                  PER_TOKEN_HEAD: tl.constexpr, IS_FP8: tl.constexpr, FP8_MANT_BITS: tl.constexpr,
                  FP8_SPECIAL_MASK: tl.constexpr, FP8_HAS_INF: tl.constexpr, OUT_DTYPE: tl.constexpr,
                  INTERPRET_: tl.constexpr):
    """Codes of ``rows`` (``[R, 1]`` row ids of ``D`` elements; also the rows of their scales) → values
    in ``OUT_DTYPE`` at ``dst_rows`` of ``dst``."""
    d = tl.arange(0, D_PAD)[None, :]
    m = d < D
    c = tl.load(src + rows * D + d, mask=m, other=0.0)
    if IS_FP8:
        x = fp8_to_fp32(c, FP8_MANT_BITS, FP8_SPECIAL_MASK, FP8_HAS_INF, INTERPRET_)
    else:
        x = to_fp32(c, INTERPRET_)
    if PER_TOKEN_HEAD:
        # one fp32 product, one rounding below: r(c · s)
        x = x * tl.load(scale_ptr + rows)
    tl.store(dst + dst_rows * D + d, to_storage(x, OUT_DTYPE, INTERPRET_), mask=m)


@triton.jit
def _convert_blocks_kernel(blocks_ptr, k_ptr, v_ptr, ks_ptr, vs_ptr, k_out_ptr, v_out_ptr,
                           NUM_KV_HEADS: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                           D: tl.constexpr, D_PAD: tl.constexpr, DV: tl.constexpr, DV_PAD: tl.constexpr,
                           PER_TOKEN_HEAD: tl.constexpr, IS_FP8: tl.constexpr, FP8_MANT_BITS: tl.constexpr,
                           FP8_SPECIAL_MASK: tl.constexpr, FP8_HAS_INF: tl.constexpr,
                           OUT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr):
    # one program per (scratch block, KV head): the head's BLOCK_SIZE rows of K and of V. A row is
    # (block, token, head) in vLLM's NHD layout, and the per-token-head scales use the same row index.
    i = tl.program_id(0)
    head = tl.program_id(1)
    blk = tl.load(blocks_ptr + i).to(tl.int64)
    t = tl.arange(0, BLOCK_SIZE)[:, None]
    src_rows = (blk * BLOCK_SIZE + t) * NUM_KV_HEADS + head
    dst_rows = (i * BLOCK_SIZE + t) * NUM_KV_HEADS + head
    _convert_rows(k_ptr, ks_ptr, k_out_ptr, src_rows, dst_rows, D, D_PAD, PER_TOKEN_HEAD,
                  IS_FP8, FP8_MANT_BITS, FP8_SPECIAL_MASK, FP8_HAS_INF, OUT_DTYPE, INTERPRET_)
    _convert_rows(v_ptr, vs_ptr, v_out_ptr, src_rows, dst_rows, DV, DV_PAD, PER_TOKEN_HEAD,
                  IS_FP8, FP8_MANT_BITS, FP8_SPECIAL_MASK, FP8_HAS_INF, OUT_DTYPE, INTERPRET_)


def prepare_dequantized_8bit_prefill(query: torch.Tensor, cache: PagedKVCache, batch: AttentionBatch, *,
                                     scale: float, sliding_window: int | None = None,
                                     softcap: float | None = None, out: torch.Tensor | None = None,
                                     dtype: torch.dtype | None = None) -> DequantizedPrefillCall:
    """Prepare attention over an 8-bit ``cache`` that converts the batch's blocks once (module docstring).

    ``scale`` is the softmax scale σ, already resolved; ``query`` and ``out`` are checked by the caller
    (:func:`kvlab.kernels.attention.prepare_paged_attention`). The block tables are read on the host once.
    ``dtype`` sets the scratch's dtype (``None``: :func:`scratch_dtype`; benchmarks compare the two).
    """
    from kvlab.kernels.attention import prepare_paged_attention  # it dispatches here: import at call time

    sch = cache.scheme
    if not sch.is_quantized or sch.mode.is_low_bit:
        raise ValueError(f"the 8-bit dequantize-first path needs an 8-bit scheme, got {sch.name!r}")
    bs, nkv, d, dv = cache.block_size, cache.num_kv_heads, cache.head_size, cache.head_size_v
    dtype = scratch_dtype(query.dtype, cache) if dtype is None else dtype
    used, scratch, local = scratch_for(batch, bs, nkv, d, dv, dtype, query.device)
    per_token_head = sch.has_token_head_scales
    k_scale, v_scale = (1.0, 1.0) if per_token_head else (cache.k_scale, cache.v_scale)
    attention = prepare_paged_attention(query, scratch, local, scale=scale * k_scale,
                                        sliding_window=sliding_window, softcap=softcap, out=out,
                                        output_scale=v_scale, dequantize_first=False)
    scales = (cache.key_scale, cache.value_scale) if per_token_head else (cache.key, cache.value)
    fp8 = fp8_constexprs(sch.storage_dtype)
    args = (used, cache.key, cache.value, *scales, scratch.key, scratch.value)
    consts = dict(NUM_KV_HEADS=nkv, BLOCK_SIZE=bs, D=d, D_PAD=next_pow2(d), DV=dv, DV_PAD=next_pow2(dv),
                  PER_TOKEN_HEAD=per_token_head, IS_FP8=sch.mode != QuantMode.INT8_PER_TOKEN_HEAD,
                  FP8_MANT_BITS=fp8["MANT_BITS"], FP8_SPECIAL_MASK=fp8["SPECIAL_MASK"],
                  FP8_HAS_INF=fp8["HAS_INF"], OUT_DTYPE=triton_dtype(dtype), INTERPRET_=INTERPRET)
    return DequantizedPrefillCall(attention.out, scratch, local, attention,
                                  (_convert_blocks_kernel, (used.numel(), nkv), args, consts))
