"""Host side of the low-bit attention kernel (:mod:`kvlab.kernels.lowbit_attention`): checks, launch
shape, split-K workspace, and the one-call entry point :func:`lowbit_paged_attention`.

Each program owns ``BLOCK_Q`` query positions of one sequence × the ``GROUP`` query heads of one KV
head (decode: one position; prefill: 64 rows compiled, 16 in the interpreter). The (sequence, query
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
from kvlab.kernels.launch_config import choose_num_splits, next_pow2
from kvlab.kernels.lowbit_attention import lowbit_attention_kernel
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


@dataclass(eq=False)
class LowBitAttentionCall:
    """A validated low-bit attention call: :meth:`run` only launches (no checks, no host copies), so
    it can be timed in a loop or captured in a CUDA graph.

    Attributes:
        out: ``[num_tokens, num_q_heads, head_size_v]`` output in the query dtype.
        num_splits: split-K segments; ``tile_n``: keys per loop step; ``block_m``: rows per program.
    """

    out: torch.Tensor
    num_splits: int
    tile_n: int
    block_m: int
    num_warps: int
    _launch: SplitKLaunch = field(repr=False)

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
) -> LowBitAttentionCall:
    """Validate a low-bit attention call and size its launch; arguments as :func:`lowbit_paged_attention`."""
    sigma, out, query = check_attention_call(query, cache, batch, stored=cache.key_codes, scale=scale,
                                             sliding_window=sliding_window, softcap=softcap, out=out,
                                             num_splits=num_splits)
    num_tokens, num_q_heads, head_size = query.shape
    nkv, hv = cache.num_kv_heads, cache.head_size_v
    bs = cache.block_size
    tile = max(bs, 16 if INTERPRET else 64) if tile_n is None else require_positive_int(tile_n, "tile_n", 16)
    if tile & (tile - 1) or tile % bs:
        raise ValueError(f"tile_n must be a power of two >= 16 holding whole blocks of {bs}, got {tile}")

    group = num_q_heads // nkv
    prefill = batch.max_query_len > 1
    block_q = max(1, (16 if INTERPRET else 64) // group) if prefill else 1
    block_m = max(16, next_pow2(block_q * group))
    seqs, qblocks = _programs(batch, block_q)
    if num_splits is None:
        num_sms = None if INTERPRET else multiprocessor_count(query.device.index or 0)
        num_splits = choose_num_splits(len(seqs) * nkv, -(-batch.max_seq_len // tile), num_sms)
    part_acc, part_stat = split_workspace(out, num_splits)
    sch, kivi, dummy, dev = cache.scheme, cache.is_kivi, cache.key_scale, query.device
    args = (
        out, part_acc, part_stat,
        query, cache.key_codes, cache.value_codes, cache.key_scale, cache.value_scale,
        cache.key_zero if kivi else dummy, cache.value_zero if kivi else dummy,
        cache.residual_key if kivi else dummy, cache.residual_value if kivi else dummy,
        cache.residual_page if kivi else dummy,
        batch.block_table, batch.query_start_loc, batch.seq_lens,
        torch.tensor(seqs, dtype=torch.int32, device=dev),
        torch.tensor(qblocks, dtype=torch.int32, device=dev),
        num_splits, sigma, float(softcap or 1.0), int(sliding_window or 1),
        query.stride(0), query.stride(1), out.stride(0), out.stride(1), batch.block_table.stride(0),
    )
    consts = dict(
        NUM_KV_HEADS=nkv, GROUP=group, D=head_size, D_PAD=max(16, next_pow2(head_size)), DV=hv,
        DV_PAD=max(16, next_pow2(hv)), BITS=sch.bits, P=sch.codes_per_byte, G=sch.group_size or 16, KIVI=kivi,
        BLOCK_SIZE=bs, TILE_N=tile, BLOCK_M=block_m, BLOCK_Q=block_q,
        DOT_DTYPE=triton_dtype(query.dtype), OUT_DTYPE=triton_dtype(query.dtype),
        DOT_PRECISION="ieee" if query.dtype == torch.float32 else "tf32",
        USE_WINDOW=sliding_window is not None, USE_SOFTCAP=softcap is not None, SPLIT_K=num_splits > 1,
        INTERPRET_=INTERPRET,
    )
    warps = 8 if block_m >= 64 else 4
    launch = SplitKLaunch(lowbit_attention_kernel, (len(seqs) * nkv if num_tokens else 0, num_splits),
                          args, consts, dict(num_warps=warps), out, part_acc, part_stat)
    return LowBitAttentionCall(out, num_splits, tile, block_m, warps, launch)


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
        tile_n: keys per loop step, a power of two >= 16 and a multiple of the block size (default
            the larger of the block size and 16 in the interpreter, 64 compiled).

    Returns:
        ``[num_tokens, num_q_heads, head_size_v]`` in the query dtype.

    Raises:
        ValueError: bad shapes, dtypes or options, or tensors on the wrong device for the Triton mode.
    """
    return prepare_lowbit_attention(query, cache, batch, scale=scale, sliding_window=sliding_window,
                                    softcap=softcap, out=out, num_splits=num_splits, tile_n=tile_n).run()
