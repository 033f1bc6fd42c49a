"""Lesson kernel 2: paged attention over a (quantized) KV cache, prefill chunks and decodes in one call.

The batch is packed vLLM style: the new tokens of all sequences one after another, each sequence
with its own context already in the cache (see :class:`kvlab.cache.AttentionBatch`). One launch
serves decodes (one new token) and prefill chunks (many) alike.

**Who does what.** A program owns ``BLOCK_M`` rows: ``BLOCK_Q`` consecutive query positions of one
sequence × the ``GROUP`` query heads that share one KV head. Row ``r`` is query position
``r // GROUP`` and head ``r % GROUP``. Because all heads of the group sit in one program, each K/V
tile is loaded once for all of them: grouped-query attention divides the bytes by ``GROUP``. The
grid's first axis runs over (query block, KV head) with the KV head varying fastest, so the
programs of the KV heads of one sequence run side by side and share cache sectors of the block
table and of the scales (8 heads' fp32 scales of a token are one 32-byte sector).

**Paging.** Keys are visited in tiles of ``TILE_N`` positions. Position ``n`` lives in cache block
``block_table[seq, n // BLOCK_SIZE]`` at offset ``n % BLOCK_SIZE``; a tile may cover several blocks,
so block ids are gathered per position (one small load per key). Every load is masked to positions the
rows may see, with ``other=0``: padding of the block table and never-written slots are not read
(the tests fill them with NaN to prove it).

**Which tiles.** Causality bounds the tile range above (the last query row of the block), a sliding
window bounds it below: a query at ``p`` sees keys ``j`` with ``0 <= p − j < W`` (vLLM's
convention), so tiles left of ``first_query − W + 1`` are never visited, not just masked. Within
the range, a per-element mask handles the ragged edges.

**Scales** (spec §4, per-token-head): the K scale multiplies the *score*, after the dot,
``S_j = (q · K̂_j) · σ · s^K_j``, and the V scale is folded into the probability before the second
dot, ``acc += r(p_j · s^V_j) · V̂_j`` with ``r`` the rounding to the dot dtype; the softmax sum uses the
unscaled ``p_j``. The dots read the codes converted to the query dtype, which is exact for int8 and
fp8 in bf16/fp16. Per-tensor fp8 has one number per tensor, so it factors out of both dots: ``k_scale``
joins ``σ`` and ``v_scale`` multiplies the result. (vLLM instead dequantizes each tile to the query
dtype, ``r(K̂ · k_scale)``, which adds one rounding that the factoring avoids.)

**Masks only where needed.** Tiles that lie wholly at or before a program's first query position
(no window) are visible to every row: they run without any mask (see
:mod:`kvlab.kernels.attention_tile`); only the diagonal tiles, window edges and decodes are masked.

**Query and cache in different 16-bit types.** An fp16 cache read by bf16 queries runs fp16 dots: the
query is scaled by a power of two into fp16's range, exactly, and the power goes back into the
softmax scale (see ``_dot_types``).

**Online softmax** in fp32, base 2 (``exp2`` with ``log2 e`` folded into the scale), with the
usual guard for rows that have seen no key yet (their max is −inf; subtracting it would give NaN).

**Split-K** (:mod:`kvlab.kernels.launch_config` decides): the tile range of a program is cut into
``num_splits`` segments on the grid's second axis; each writes fp32 partials and
:mod:`kvlab.kernels.split_reduce` merges them (``fused_merge=True``: the last segment to finish
merges inside this kernel instead; measured slower, off by default). On Hopper the merge kernel is
launched as a programmatic dependent that every attention program lets start at once, so its launch
overlaps this kernel (:mod:`kvlab.kernels.dependent_launch`).

**fp8 on the GPU** is decoded by bit moves (:func:`kvlab.kernels.numerics.fp8_to_bf16`), which read
the NaN/Inf codes as large finite numbers. The writer never stores those codes for finite input
(it saturates), and the kernel never loads a slot it may not read (every load is masked). Keeping
the special codes costs two more operations per element: with them, per-tensor e4m3 decode at
B=64, L=32768 took 3742 µs, while fp8 per-token-head without them took 2671 µs. The interpreter
decodes special codes exactly, so its tests still see NaN poison.

**Interpreter.** The same source runs in Triton's interpreter on CPU tensors. Its ``tl.dot`` on bf16
is broken, so there every dot operand is rounded to the dot dtype exactly as the GPU would, and held
in fp32 (:func:`kvlab.kernels.numerics.round_to_dot_dtype`); fp8 decode and bf16 casts go through
the exact helpers of :mod:`kvlab.kernels.numerics`. Expect about 1 s for four decodes over ~100
keys with 32 query heads and 8 KV heads (head 128), and 2–6 s for a 100-token prefill (measured on
a shared two-core machine): lessons use short sequences.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kvlab.cache.batch import AttentionBatch
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.kernels.attention_checks import check_attention_call
from kvlab.kernels.attention_kernel import paged_attention_kernel
from kvlab.kernels.dequantized_prefill import dequantize_first_rule, prepare_dequantized_8bit_prefill
from kvlab.kernels.dequantized_scratch import DequantizedPrefillCall
from kvlab.kernels.devices import multiprocessor_count
from kvlab.kernels.dtypes import fp8_constexprs, triton_dtype
from kvlab.kernels.int8_decode import CODE_DIVISOR, int8_parts_by_trick
from kvlab.kernels.launch_config import (
    AttentionTiling,
    choose_tiling,
    next_pow2,
    query_block_count,
)
from kvlab.kernels.numerics import fp8_to_bf16_asm
from kvlab.kernels.runtime import INTERPRET
from kvlab.kernels.split_decode_rules import (
    fixed_decode_segments,
    fused_split_merge,
    segment_tiles,
    tiles_nonnegative_hint,
    unmasked_decode_tiles,
)
from kvlab.kernels.split_reduce import SplitKLaunch, fused_merge_consts, split_tickets, split_workspace
from kvlab.quantization.schemes import QuantMode

# -- host side --------------------------------------------------------------------------------------

def _dot_types(query_dtype: torch.dtype, cache: PagedKVCache, fp8_half_dots: bool
               ) -> tuple[torch.dtype, torch.dtype, str]:
    """``(dot operand dtype, dtype p is rounded to, tl.dot input precision)``.

    * int8/fp8 codes are exact in bf16 and fp16, and a 16-bit cache in the query's own dtype is
      the query dtype: both dots run in the query dtype (tensor cores, fp32 accumulation).
    * An fp16 cache read by bf16 queries: both dots run in fp16, like the plain 16-bit path. The
      query is scaled by a power of two into fp16's range, which is exact (bf16's 8 significant bits
      fit fp16's 11), and ``p`` is rounded to fp16. Reading the fp16 cache in tf32 instead, as this
      kernel once did, made prefill 4.6× slower than bf16 for no gain in accuracy.
    * A bf16 cache read by fp16 queries: fp16 values do not fit bf16 exactly, so the dots run as
      tf32 on fp32 operands (every bf16 and fp16 value is exact in tf32), with ``p`` rounded to the
      query dtype first. Slower; models keep their cache in their own dtype.
    * A per-tensor fp8 cache read by bf16 queries with ``fp8_half_dots`` (a benchmark variant, off by
      default): both dots run in fp16, as for an fp16 cache. The hardware turns two fp8 codes into
      fp16 in one instruction (``cvt.rn.f16x2.e4m3x2``); there is none to bf16, where the kernel
      moves bits (:func:`kvlab.kernels.numerics.fp8_to_bf16`). Every code is exact in fp16 and ``p``
      (in [0, 1]; the scale is applied to the output) is rounded more finely. Measured slower on an
      H100 (benchmarks/kernel_notes.md, v19): prefill chunk 878 against 805 µs with bf16 dots;
      offline, 230 registers per thread against 186 (the query's scaling into fp16's range).
    * An fp32 query or fp32 cache: fp32 dots with IEEE products (slow, for checking only).
    """
    storage = cache.scheme.storage_dtype
    if query_dtype == torch.float32 or storage == torch.float32:
        return torch.float32, torch.float32, "ieee"
    if fp8_half_dots and cache.scheme.mode == QuantMode.FP8_PER_TENSOR and query_dtype == torch.bfloat16:
        return torch.float16, torch.float16, "tf32"
    if cache.scheme.is_quantized or storage == query_dtype:
        return query_dtype, query_dtype, "tf32"  # precision is ignored for 16-bit operands
    if storage == torch.float16:
        return torch.float16, torch.float16, "tf32"
    return torch.float32, query_dtype, "tf32"


@dataclass(eq=False)
class PagedAttentionCall:
    """A validated, ready-to-launch paged-attention call.

    :func:`prepare_paged_attention` builds it (checks, launch shape, output and split-K workspace);
    :meth:`run` launches the kernels and nothing else: no checks and no host synchronisation, so it
    can be timed in a loop or captured in a CUDA graph. Its launch shape is chosen for the batch's
    lengths when it was prepared; in a decode the sequences may still grow on the device between
    launches (``seq_lens`` and ``block_table`` updated in place), and every key is read.

    Attributes:
        out: ``[num_tokens, num_q_heads, head_size_v]`` output in the query dtype.
        tiling: the launch shape.
    """

    out: torch.Tensor
    tiling: AttentionTiling
    _launch: SplitKLaunch = field(repr=False)

    def run(self) -> torch.Tensor:
        """Launch the attention kernel (and the split-K merge); returns :attr:`out`."""
        return self._launch()


def prepare_paged_attention(
    query: torch.Tensor,
    cache: PagedKVCache,
    batch: AttentionBatch,
    *,
    scale: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    out: torch.Tensor | None = None,
    num_splits: int | None = None,
    tiling: AttentionTiling | None = None,
    fp8_fast_decode: bool = True,
    fp8_half_dots: bool = False,
    decode_full_tiles: bool | None = None,
    int8_fast_decode: bool = True,
    int8_fast_values: bool | None = None,
    fused_merge: bool | None = None,
    output_scale: float = 1.0,
    dequantize_first: bool | None = None,
) -> PagedAttentionCall | DequantizedPrefillCall:
    """Validate a paged-attention call and size its launch; see :func:`paged_attention`.

    ``tiling`` overrides the launch shape (benchmark sweeps); its ``num_splits`` wins over
    ``num_splits``. ``fp8_fast_decode=False`` makes compiled fp8 → bf16 decoding use Triton's own
    conversion instead of :func:`kvlab.kernels.numerics.fp8_to_bf16` (for comparing the two).
    ``fp8_half_dots=True`` runs the dots of a per-tensor fp8 cache read by bf16 queries in fp16 (see
    ``_dot_types``; measured slower, kept for comparing the two). ``decode_full_tiles`` (``None``: the
    rule :func:`~kvlab.kernels.split_decode_rules.unmasked_decode_tiles`) runs a decode's tiles that lie
    wholly inside the sequence without masks (only its last tile masked). ``int8_fast_decode=False``
    makes int8 → bf16 use Triton's own cast instead of :mod:`kvlab.kernels.int8_decode` (same
    values; for comparing the two); ``int8_fast_values`` overrides the rule for the values (``None``:
    :func:`~kvlab.kernels.int8_decode.int8_parts_by_trick`). ``fused_merge`` merges a split decode's
    segments in the attention kernel instead of a second kernel (``None``: the rule
    :func:`~kvlab.kernels.split_decode_rules.fused_split_merge`; no effect on unsplit or prefill launches).
    ``output_scale`` multiplies the output in fp32 before its rounding (how a per-tensor V scale stays out of
    the values). ``dequantize_first`` converts the blocks of an 8-bit cache the batch reads once into a
    16-bit scratch and runs the 16-bit kernel over it (:mod:`kvlab.kernels.dequantized_prefill`; ``None``:
    its rule for prefill batches, never when ``tiling`` or ``num_splits`` is given); the call returned is
    then a :class:`~kvlab.kernels.dequantized_scratch.DequantizedPrefillCall`.
    """
    sigma, out, query = check_attention_call(query, cache, batch, stored=cache.key, scale=scale,
                                             sliding_window=sliding_window, softcap=softcap, out=out,
                                             num_splits=num_splits)
    if not (isinstance(output_scale, (int, float)) and 0 < output_scale < float("inf")):
        raise ValueError(f"output_scale must be a finite number > 0, got {output_scale!r}")
    sch = cache.scheme
    if dequantize_first is None:
        dequantize_first = (sch.is_quantized and tiling is None and num_splits is None
                            and dequantize_first_rule(batch.query_lens, batch.seq_lens_list))
    if dequantize_first:
        if output_scale != 1.0:
            raise ValueError("output_scale applies to the fused kernel only; "
                             "leave it 1.0 with dequantize_first")
        return prepare_dequantized_8bit_prefill(query, cache, batch, scale=sigma,
                                                sliding_window=sliding_window, softcap=softcap, out=out)
    num_tokens, num_q_heads, head_size = query.shape
    nkv, hv = cache.num_kv_heads, cache.head_size_v

    group = num_q_heads // nkv
    decode_only = batch.max_query_len <= 1
    num_sms = None if INTERPRET else multiprocessor_count(query.device.index or 0)
    dot_dtype, p_dtype, precision = _dot_types(query.dtype, cache, fp8_half_dots)
    q_pow2_scale = dot_dtype == torch.float16 and query.dtype == torch.bfloat16
    if tiling is None:
        tiling = choose_tiling(
            group=group, head_size=head_size, head_size_v=hv, kv_element_bytes=sch.element_bytes,
            max_query_len=batch.max_query_len, max_seq_len=batch.max_seq_len, num_tokens=num_tokens,
            num_seqs=batch.num_seqs, num_kv_heads=nkv, num_sms=num_sms, num_splits=num_splits,
            scaled_query=q_pow2_scale,
        )
    if tiling.block_m < group:
        raise ValueError(f"tiling.block_m ({tiling.block_m}) must hold the {group} query heads of a KV head")
    if decode_only and tiling.block_q != 1:
        raise ValueError("a decode-only batch needs tiling.block_q == 1")
    if tiling.block_q * group > tiling.block_m:
        raise ValueError(
            f"tiling.block_q × group ({tiling.block_q} × {group}) exceeds block_m ({tiling.block_m})"
        )

    mode = sch.mode
    qk_scale, out_scale = sigma, float(output_scale)
    if mode == QuantMode.FP8_PER_TENSOR:
        qk_scale, out_scale = sigma * cache.k_scale, out_scale * cache.v_scale
    # int8 codes enter the bf16 dots divided by 64 (kernels/int8_decode.py): the scales take the 64
    int8_k, int8_v = False, False
    if int8_fast_decode and sch.storage_dtype == torch.int8 and dot_dtype == torch.bfloat16:
        int8_k, int8_v = int8_parts_by_trick(decode_only, tiling.num_splits, tiling.tile_n, int8_fast_values)
        qk_scale *= CODE_DIVISOR
        out_scale *= CODE_DIVISOR if int8_v else 1
    q_blocks = query_block_count(num_tokens, batch.num_seqs, tiling.block_q, decode_only)
    splits = tiling.num_splits

    part_acc, part_stat = split_workspace(out, splits)
    fused = fused_split_merge(decode_only, splits, fused_merge)
    tickets = split_tickets(q_blocks * nkv, out.device) if fused else out

    k_scale_t = cache.key_scale if cache.key_scale is not None else cache.key
    v_scale_t = cache.value_scale if cache.value_scale is not None else cache.value
    fp8 = fp8_constexprs(sch.storage_dtype)
    is_fp8 = sch.storage_dtype in (torch.float8_e4m3fn, torch.float8_e5m2)
    bit_moves = is_fp8 and fp8_fast_decode and dot_dtype == torch.bfloat16 and not INTERPRET
    fp8_asm = fp8_to_bf16_asm(fp8["MANT_BITS"], fp8["EXP_BIAS"]) if bit_moves else ""
    args = (
        out, part_acc, part_stat, tickets,
        query, cache.key, cache.value, k_scale_t, v_scale_t,
        batch.block_table, batch.query_start_loc, batch.seq_lens,
        batch.num_seqs, splits,
        qk_scale, out_scale, float(softcap or 1.0), int(sliding_window or 1),
        query.stride(0), query.stride(1), out.stride(0), out.stride(1),
        cache.key.stride(0), cache.key.stride(1), cache.key.stride(2),
        cache.value.stride(0), cache.value.stride(1), cache.value.stride(2),
        batch.block_table.stride(0), batch.block_table.shape[1],
        segment_tiles(splits, batch.max_seq_len, tiling.tile_n),
    )
    consts = dict(
        NUM_KV_HEADS=nkv, GROUP=group,
        HEAD_SIZE=head_size, HEAD_SIZE_PAD=max(16, next_pow2(head_size)),
        HEAD_SIZE_V=hv, HEAD_SIZE_V_PAD=max(16, next_pow2(hv)),
        BLOCK_SIZE=cache.block_size, TILE_N=tiling.tile_n, BLOCK_M=tiling.block_m, BLOCK_Q=tiling.block_q,
        DECODE_ONLY=decode_only, QUANT_MODE=int(mode),
        IS_FP8=is_fp8,
        FP8_MANT_BITS=fp8["MANT_BITS"], FP8_SPECIAL_MASK=fp8["SPECIAL_MASK"], FP8_HAS_INF=fp8["HAS_INF"],
        FP8_DECODE_ASM=fp8_asm, FP8_KEEP_SPECIALS=False,
        DOT_DTYPE=triton_dtype(dot_dtype), P_DTYPE=triton_dtype(p_dtype), DOT_PRECISION=precision,
        OUT_DTYPE=triton_dtype(query.dtype),
        USE_WINDOW=sliding_window is not None, USE_SOFTCAP=softcap is not None, SPLIT_K=splits > 1,
        Q_POW2_SCALE=q_pow2_scale,
        INTERPRET_=INTERPRET,
        # prefill loads each key's scales of all KV heads as one row (see attention_tile.tile_scales)
        SCALES_BY_TOKEN=not decode_only and nkv & (nkv - 1) == 0 and nkv <= 16,
        LONGEST_FIRST=tiling.longest_first and not decode_only,
        DECODE_FULL_TILES=decode_only and (
            unmasked_decode_tiles(sch.element_bytes, splits, batch.max_seq_len, tiling.tile_n)
            if decode_full_tiles is None else decode_full_tiles),
        INT8_K_OVER_64=int8_k, INT8_V_OVER_64=int8_v,
        FIXED_SEGMENTS=fixed_decode_segments(decode_only, splits, sliding_window is not None),
        TILES_NONNEGATIVE=tiles_nonnegative_hint(splits),
        **fused_merge_consts(fused, splits, hv),
    )
    options = dict(num_warps=tiling.num_warps, num_stages=tiling.num_stages)
    if tiling.max_registers is not None and not INTERPRET:
        options["maxnreg"] = tiling.max_registers
    launch = SplitKLaunch(paged_attention_kernel, (q_blocks * nkv, splits), args, consts, options,
                          out, part_acc, part_stat, out_scale, fused_merge=fused)
    return PagedAttentionCall(out=out, tiling=tiling, _launch=launch)


def paged_attention(
    query: torch.Tensor,
    cache: PagedKVCache,
    batch: AttentionBatch,
    *,
    scale: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    out: torch.Tensor | None = None,
    num_splits: int | None = None,
) -> torch.Tensor:
    """Causal paged attention of a packed batch over a (quantized) paged KV cache, with Triton.

    Args:
        query: ``[num_tokens, num_q_heads, head_size]`` float16/bfloat16/float32, the new tokens of
            all sequences packed in batch order.
        cache: the layer's paged cache, any kvlab scheme.
        batch: query offsets, sequence lengths (tokens, new ones included) and block tables.
        scale: softmax scale σ, default ``1 / sqrt(head_size)``.
        sliding_window: ``W`` tokens; a query at position ``p`` sees keys ``j`` with ``0 <= p − j < W``.
        softcap: logit softcap ``c`` (scores become ``c · tanh(S / c)``).
        out: optional output tensor ``[num_tokens, num_q_heads, head_size_v]`` in the query dtype.
        num_splits: split-K segments (``None`` = chosen from the grid size and the GPU's
            multiprocessor count; 1 in the interpreter).

    Returns:
        ``[num_tokens, num_q_heads, head_size_v]`` in the query dtype.

    Raises:
        ValueError: bad shapes, dtypes or options (the same checks as the reference), or tensors on
            the wrong device for the Triton mode (interpreter: CPU tensors; compiled: CUDA tensors).
    """
    return prepare_paged_attention(
        query, cache, batch, scale=scale, sliding_window=sliding_window, softcap=softcap,
        out=out, num_splits=num_splits,
    ).run()
