"""Host side of the low-bit attention kernel (:mod:`kvlab.kernels.lowbit_attention`): checks, launch
shape, split-K workspace, and the one-call entry point :func:`lowbit_paged_attention`.

Each program owns ``BLOCK_Q`` query positions of one sequence × the ``GROUP`` query heads of one KV
head (decode: one position; prefill: the launch rule's rows compiled or ``prefill_rows``, 16 in the
interpreter). The (sequence, query
block) of every program is listed on the host from the batch's lengths, so the kernel needs no search.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kvlab.cache.batch import AttentionBatch
from kvlab.cache.lowbit_cache import LowBitPagedCache
from kvlab.kernels.attention import check_attention_call
from kvlab.kernels.devices import multiprocessor_count
from kvlab.kernels.dtypes import triton_dtype
from kvlab.kernels.launch_config import next_pow2
from kvlab.kernels.lowbit_attention import lowbit_attention_kernel
from kvlab.kernels.lowbit_launch import choose_lowbit_launch
from kvlab.kernels.lowbit_launch import prefill_rows as default_prefill_rows
from kvlab.kernels.lowbit_prefill import DequantizedPrefillCall, prepare_dequantized_prefill
from kvlab.kernels.lowbit_unpack_asm import MAGIC, times16_int8_asm, unpack_asm, unpack_fma_asm
from kvlab.kernels.runtime import INTERPRET
from kvlab.kernels.split_reduce import SplitKLaunch, split_workspace
from kvlab.validation import require_positive_int


def _programs(batch: AttentionBatch, block_q: int) -> tuple[list[int], list[int]]:
    """(sequence, query block) of every program, from the batch's host-side lengths."""
    seqs, blocks = [], []
    for i, q in enumerate(batch.query_lens):
        for b in range(-(-q // block_q)):
            seqs.append(i)
            blocks.append(b)
    return seqs, blocks


def _words(per_channel: torch.Tensor, scheme) -> torch.Tensor:
    """KIVI key scales/zero points ``[N, H, D]`` fp16 seen as ``[N, H, D / P]`` integers of ``P`` halves
    (no copy): word ``j`` holds the numbers of the ``P`` channels packed in code byte ``j``."""
    return per_channel.view(torch.int32 if scheme.codes_per_byte == 2 else torch.int64)


@dataclass(eq=False)
class LowBitAttentionCall:
    """A validated low-bit attention call: :meth:`run` only launches (no checks, no host copies), so
    it can be timed in a loop or captured in a CUDA graph.

    Attributes:
        out: ``[num_tokens, num_q_heads, head_size_v]`` output in the query dtype.
        num_splits: split-K segments; ``tile_n``: keys per tile; ``block_m``: rows per program;
        ``tiles_per_step``: tiles whose loads one loop step issues together.
    """

    out: torch.Tensor
    num_splits: int
    tile_n: int
    block_m: int
    num_warps: int
    tiles_per_step: int
    _launch: SplitKLaunch = field(repr=False)

    @property
    def options(self) -> dict:
        """Launch options (``num_warps``, ``num_stages`` and, when capped, ``maxnreg``)."""
        return self._launch.options

    def run(self) -> torch.Tensor:
        """Launch the kernel (and the split-K merge); returns :attr:`out`."""
        return self._launch()


def prepare_lowbit_attention(
    query: torch.Tensor,
    cache: LowBitPagedCache,
    batch: AttentionBatch,
    *,
    scale: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    out: torch.Tensor | None = None,
    num_splits: int | None = None,
    tile_n: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
    max_registers: int | None = None,
    fast_unpack: bool = True,
    packed_fma: bool = False,
    int8_dots: bool = False,
    tiles_per_step: int | None = None,
    prefill_rows: int | None = None,
) -> LowBitAttentionCall:
    """Validate a low-bit attention call and size its launch; arguments as :func:`lowbit_paged_attention`,
    plus launch overrides for sweeps (``num_warps``, ``num_stages``, ``max_registers``, ``fast_unpack``,
    ``packed_fma``: KIVI's ``c · s + z`` as packed ``fma.rn.f16x2`` in the unpack's PTX, else as
    Triton's scalar fp16 FMAs (the default: packed measured no faster, ``benchmarks/lowbit_notes.md`` v7),
    ``int8_dots``: an int4 cache's attention on int8 tensor-core dots, the query and ``p · v_scale``
    rounded to int8 per row (:mod:`kvlab.kernels.lowbit_int8_dot`; about 13% faster for a full B=64
    decode grid on an H100, adding that rounding's error; int4 caches only, key tiles of >= 32 keys),
    and ``prefill_rows``: query rows of one prefill program, 16 to 256, default the launch rule's)."""
    sigma, out, query = check_attention_call(query, cache, batch, stored=cache.key_codes, scale=scale,
                                             sliding_window=sliding_window, softcap=softcap, out=out,
                                             num_splits=num_splits)
    num_tokens, num_q_heads, head_size = query.shape
    nkv, hv = cache.num_kv_heads, cache.head_size_v
    bs = cache.block_size
    if tile_n is not None:
        tile_n = require_positive_int(tile_n, "tile_n", 16)
        if tile_n & (tile_n - 1) or tile_n % bs:
            raise ValueError(f"tile_n must be a power of two >= 16 holding whole blocks of {bs}, "
                             f"got {tile_n}")
    if tiles_per_step is not None and tiles_per_step not in (1, 2, 4):
        raise ValueError(f"tiles_per_step must be 1, 2 or 4, got {tiles_per_step!r}")
    if prefill_rows is not None and (prefill_rows not in (16, 32, 64, 128, 256)):
        raise ValueError(f"prefill_rows must be 16, 32, 64, 128 or 256, got {prefill_rows!r}")
    group = num_q_heads // nkv
    prefill = batch.max_query_len > 1
    rows = 16 if INTERPRET else (prefill_rows or default_prefill_rows(cache.scheme.bits))
    block_q = max(1, rows // group) if prefill else 1
    block_m = max(16, next_pow2(block_q * group))
    seqs, qblocks = _programs(batch, block_q)
    shape = choose_lowbit_launch(
        kivi=cache.is_kivi, prefill=prefill, num_programs=len(seqs) * nkv, max_seq_len=batch.max_seq_len,
        block_size=bs, num_sms=None if INTERPRET else multiprocessor_count(query.device.index or 0),
        tile_n=tile_n, tiles_per_step=tiles_per_step, num_splits=num_splits, max_registers=max_registers,
        num_warps=None if num_warps is None else require_positive_int(num_warps, "num_warps"),
        bits=cache.scheme.bits)
    tile, step, num_splits = shape.tile_n, shape.tiles_per_step, shape.num_splits
    if not isinstance(int8_dots, bool):
        raise ValueError(f"int8_dots must be True or False, got {int8_dots!r}")
    int8 = int8_dots
    if int8 and cache.is_kivi:
        raise ValueError(f"int8_dots applies to int4_per_token_head caches only, not {cache.scheme.name} "
                         f"(a KIVI code's scale and zero point belong to a channel or a group, not to a row)")
    if int8 and not INTERPRET and tile < 32:
        raise ValueError(f"int8_dots needs key tiles of at least 32 keys on the GPU (the depth of an int8 "
                         f"tensor-core product), got tile_n={tile}")
    part_acc, part_stat = split_workspace(out, num_splits)
    sch, kivi, dummy, dev = cache.scheme, cache.is_kivi, cache.key_scale, query.device
    args = (
        out, part_acc, part_stat,
        query, cache.key_codes, cache.value_codes, _words(cache.key_scale, sch) if kivi else cache.key_scale,
        cache.value_scale, _words(cache.key_zero, sch) if kivi else dummy,
        cache.value_zero if kivi else dummy,
        cache.residual_key if kivi else dummy, cache.residual_value if kivi else dummy,
        cache.residual_page if kivi else dummy,
        batch.block_table, batch.query_start_loc, batch.seq_lens,
        torch.tensor(seqs, dtype=torch.int32, device=dev),
        torch.tensor(qblocks, dtype=torch.int32, device=dev),
        num_splits, sigma, float(softcap or 1.0), int(sliding_window or 1),
        query.stride(0), query.stride(1), out.stride(0), out.stride(1), batch.block_table.stride(0),
    )
    half = kivi and query.dtype != torch.float32  # KIVI dots in fp16 (see the kernel's docstring)
    dot = torch.float16 if half else query.dtype
    fma2 = half and packed_fma  # KIVI's c·s + z two codes per instruction (kernels.lowbit_dequant)
    asm = [""] * 4
    if fast_unpack and not INTERPRET and int8:  # K parts in ASM0/1, V parts in ASM2/3 (free at 4 bits)
        asm = [times16_int8_asm(k) for k in (0, 1, 0, 1)]
    elif fast_unpack and not INTERPRET and dot in MAGIC:
        asm[:sch.codes_per_byte] = [unpack_fma_asm(sch.bits, k) if fma2 else
                                    unpack_asm(sch.bits, k, dot, 0 if kivi else 8)
                                    for k in range(sch.codes_per_byte)]
    consts = dict(
        NUM_KV_HEADS=nkv, GROUP=group, D=head_size,
        DP_PAD=max(16, next_pow2(head_size // sch.codes_per_byte)),
        DV=hv, DVP_PAD=max(16, next_pow2(hv // sch.codes_per_byte)), BITS=sch.bits, P=sch.codes_per_byte,
        G=sch.group_size or 16, KIVI=kivi, RES_BLOCKS=max(1, sch.residual_blocks),
        BLOCK_SIZE=bs, TILE_N=tile, BLOCK_M=block_m, BLOCK_Q=block_q,
        DOT_DTYPE=triton_dtype(dot), OUT_DTYPE=triton_dtype(query.dtype),
        DOT_PRECISION="ieee" if query.dtype == torch.float32 else "tf32",
        HALF_DEQ=(2 if fma2 else 1) if half else 0, Q_POW2_SCALE=half and query.dtype == torch.bfloat16,
        SEQ_BY_PROGRAM=all(q == 1 for q in batch.query_lens),
        USE_WINDOW=sliding_window is not None, USE_SOFTCAP=softcap is not None, SPLIT_K=num_splits > 1,
        INTERPRET_=INTERPRET, INT8_DOTS=int8, STEP_TILES=step,
        ASM0=asm[0], ASM1=asm[1], ASM2=asm[2], ASM3=asm[3],
    )
    num_warps = shape.num_warps
    num_stages = shape.num_stages if num_stages is None else num_stages
    options = dict(num_warps=num_warps, num_stages=require_positive_int(num_stages, "num_stages"))
    if shape.max_registers is not None and not INTERPRET:
        options["maxnreg"] = require_positive_int(shape.max_registers, "max_registers", 24)
    launch = SplitKLaunch(lowbit_attention_kernel, (len(seqs) * nkv if num_tokens else 0, num_splits),
                          args, consts, options, out, part_acc, part_stat)
    return LowBitAttentionCall(out, num_splits, tile, block_m, num_warps, step, launch)


def prepare_lowbit_call(
    query: torch.Tensor,
    cache: LowBitPagedCache,
    batch: AttentionBatch,
    *,
    scale: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    out: torch.Tensor | None = None,
    num_splits: int | None = None,
    tile_n: int | None = None,
    tiles_per_step: int | None = None,
    dequantize_first: bool | None = None,
) -> LowBitAttentionCall | DequantizedPrefillCall:
    """The prepared call :func:`lowbit_paged_attention` runs (arguments as there): dequantize-first
    (:mod:`kvlab.kernels.lowbit_prefill`) for a batch with a prefill chunk, the fused kernel otherwise."""
    fused_launch = num_splits is not None or tile_n is not None or tiles_per_step is not None
    if dequantize_first is None:
        dequantize_first = batch.max_query_len > 1 and not fused_launch
    if dequantize_first:
        if fused_launch:
            raise ValueError("num_splits, tile_n and tiles_per_step shape the fused kernel's launch; "
                             "leave them None with dequantize_first=True")
        return prepare_dequantized_prefill(query, cache, batch, scale=scale, sliding_window=sliding_window,
                                           softcap=softcap, out=out)
    return prepare_lowbit_attention(query, cache, batch, scale=scale, sliding_window=sliding_window,
                                    softcap=softcap, out=out, num_splits=num_splits, tile_n=tile_n,
                                    tiles_per_step=tiles_per_step)


def lowbit_paged_attention(
    query: torch.Tensor,
    cache: LowBitPagedCache,
    batch: AttentionBatch,
    *,
    scale: float | None = None,
    sliding_window: int | None = None,
    softcap: float | None = None,
    out: torch.Tensor | None = None,
    num_splits: int | None = None,
    tile_n: int | None = None,
    tiles_per_step: int | None = None,
    dequantize_first: bool | None = None,
) -> torch.Tensor:
    """Causal paged attention over a low-bit cache (Triton), prefill chunks and decodes in one call.

    Args:
        query: ``[num_tokens, num_q_heads, head_size]`` float16/bfloat16/float32, packed by sequence.
        cache: an ``int4_per_token_head`` or KIVI cache.
        batch: query offsets, sequence lengths (new tokens included) and block tables.
        scale: softmax scale, default ``1 / sqrt(head_size)``.
        sliding_window, softcap: as :func:`kvlab.attention`.
        out: optional ``[num_tokens, num_q_heads, head_size_v]`` output in the query dtype.
        num_splits: split-K segments (default: chosen from the grid and the GPU; 1 in the interpreter).
        tile_n: keys per tile, a power of two >= 16 and a multiple of the block size (default
            the larger of the block size and 16 in the interpreter, 64 compiled).
        tiles_per_step: key tiles whose loads one loop step issues together, 1, 2 or 4 (default:
            the launch rule's; see :mod:`kvlab.kernels.lowbit_attention`).
        dequantize_first: dequantize the blocks the batch reads once into a transient 16-bit scratch
            cache and run the 16-bit kernel (:mod:`kvlab.kernels.lowbit_prefill`; it costs
            ``used blocks × block_size × num_kv_heads × (head_size + head_size_v) × 2`` bytes for a
            16-bit query while it runs), or run the fused kernel (False). Default: dequantize first when
            some query has several tokens and no fused launch option (``num_splits``, ``tile_n``,
            ``tiles_per_step``) is given.

    Returns:
        ``[num_tokens, num_q_heads, head_size_v]`` in the query dtype.

    Raises:
        ValueError: bad shapes, dtypes or options, or tensors on the wrong device for the Triton mode.
    """
    return prepare_lowbit_call(query, cache, batch, scale=scale, sliding_window=sliding_window,
                               softcap=softcap, out=out, num_splits=num_splits, tile_n=tile_n,
                               tiles_per_step=tiles_per_step, dequantize_first=dequantize_first).run()
