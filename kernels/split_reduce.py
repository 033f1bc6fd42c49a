"""Lesson kernel 3: merging split-K segments (the second half of flash-decoding).

With split-K, each segment ``s`` of a query row's key range leaves three things behind: its running
max ``m_s`` (log2 units), its sum of exponentials ``l_s = Σ exp2(S_j − m_s)`` and its unnormalised
output ``acc_s = Σ exp2(S_j − m_s) · v_j``. Softmax over the union is then exact:

    M   = max_s m_s
    w_s = exp2(m_s − M)                 rescales every segment to the common max
    out = Σ_s w_s · acc_s / Σ_s w_s · l_s

A segment that saw no key (a short sequence split into many segments, or a segment left of a sliding
window) reports ``m_s = −inf``, ``l_s = 0``, ``acc_s = 0``, so ``w_s = 0`` and it drops out. Every
query row has at least one key (itself), so ``M`` is finite for every row that is read.

One program merges one (token, query head) over a slice of ``BLOCK_D`` output channels: a
``[num_splits, BLOCK_D]`` tile. Slicing the channels matters for one long sequence: with a single
program per (token, head) a decode of 32 query heads is 32 programs for the whole GPU, each walking
32 KB of partials alone (5.4 µs on an H100 against 41 µs for the attention kernel itself); four
slices of 32 channels give four times the programs and a quarter of the chain each. The few
statistics (``m_s``, ``l_s``) are re-read by every slice; they are ``num_splits × 8`` bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from kvlab.kernels.dependent_launch import overlaps_dependent_launches, wait_for_primary
from kvlab.kernels.launch_config import next_pow2
from kvlab.kernels.numerics import to_storage
from kvlab.kernels.runtime import INTERPRET, tl, triton
from kvlab.kernels.split_decode_rules import dependent_split_merge

#: Output channels merged by one program (a power of two).
REDUCE_BLOCK_D: int = 32


@triton.jit
def merge_segments(
    out_row_ptr, part_acc_ptr, part_stat_ptr, row, num_splits, out_scale, d_block,
    SPLITS_PAD: tl.constexpr, HEAD_SIZE_V: tl.constexpr, BLOCK_D: tl.constexpr,
    OUT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr,
):
    """Merge the ``num_splits`` segments of partial row ``row`` (``token × num_q_heads + head``) over
    output channels ``d_block × BLOCK_D …`` and store them at ``out_row_ptr`` (the math above).

    The one copy of the merge: the merge kernel below runs it, and so does the attention kernel's
    last program of a split when it merges in place (``FUSED_MERGE``). The partials are loaded
    with ``.cg`` (from L2, not the multiprocessor's L1): the fused merge reads what other
    multiprocessors have just written, and L1 is not coherent between them.
    """
    sp = tl.arange(0, SPLITS_PAD)
    sp_mask = sp < num_splits
    stat = part_stat_ptr + (row * num_splits + sp) * 2
    m = tl.load(stat, mask=sp_mask, other=float("-inf"), cache_modifier=".cg")
    l = tl.load(stat + 1, mask=sp_mask, other=0.0, cache_modifier=".cg")
    m_max = tl.max(m, axis=0)
    w = tl.exp2(m - m_max)
    total = tl.sum(w * l, axis=0)

    dv = d_block * BLOCK_D + tl.arange(0, BLOCK_D)
    dv_mask = dv < HEAD_SIZE_V
    acc = tl.load(part_acc_ptr + (row * num_splits + sp[:, None]) * HEAD_SIZE_V + dv[None, :],
                  mask=sp_mask[:, None] & dv_mask[None, :], other=0.0, cache_modifier=".cg")
    o = tl.sum(acc * w[:, None], axis=0) / total * out_scale
    tl.store(out_row_ptr + dv, to_storage(o, OUT_DTYPE, INTERPRET_), mask=dv_mask)


@triton.jit
def _split_reduce_kernel(
    out_ptr, part_acc_ptr, part_stat_ptr,
    out_scale, num_splits,
    stride_ot, stride_oh,
    NUM_Q_HEADS: tl.constexpr, SPLITS_PAD: tl.constexpr,
    HEAD_SIZE_V: tl.constexpr,
    BLOCK_D: tl.constexpr, OUT_DTYPE: tl.constexpr, INTERPRET_: tl.constexpr,
    WAIT_FOR_PRIMARY: tl.constexpr,
):
    if WAIT_FOR_PRIMARY:
        # launched as a dependent: the attention kernel may still be running, and nothing it
        # writes may be read before this returns
        wait_for_primary()
    token = tl.program_id(0).to(tl.int64)
    head = tl.program_id(1)
    row = token * NUM_Q_HEADS + head  # partials are [num_tokens, num_q_heads, num_splits, ...]
    merge_segments(out_ptr + token * stride_ot + head * stride_oh, part_acc_ptr, part_stat_ptr, row,
                   num_splits, out_scale, tl.program_id(2), SPLITS_PAD, HEAD_SIZE_V, BLOCK_D, OUT_DTYPE,
                   INTERPRET_)


def splits_pad(num_splits: int) -> int:
    """Segments one merge tile holds: a power of two, at least 2."""
    return max(2, next_pow2(num_splits))


def fused_merge_consts(fused: bool, num_splits: int, head_size_v: int) -> dict:
    """The attention kernel's constexprs for a merge in place (``FUSED_MERGE``): segments per merge
    tile and output channels per slice, as the merge kernel would use them."""
    return dict(FUSED_MERGE=fused, SPLITS_PAD=splits_pad(num_splits) if fused else 2,
                MERGE_BLOCK_D=min(REDUCE_BLOCK_D, max(16, next_pow2(head_size_v))))


def launch_split_reduce(
    out: torch.Tensor,
    part_acc: torch.Tensor,
    part_stat: torch.Tensor,
    out_scale: float,
    out_dtype,
    dependent: bool = False,
) -> None:
    """Merge ``part_acc [T, Hq, S, Dv]`` and ``part_stat [T, Hq, S, 2]`` into ``out [T, Hq, Dv]``.

    ``dependent``: launch as a programmatic dependent of the kernel before it in the stream, the one
    that wrote the partials (:mod:`kvlab.kernels.dependent_launch`)."""
    num_tokens, num_q_heads, num_splits, head_size_v = part_acc.shape
    if num_tokens == 0:
        return
    head_size_v_pad = max(16, next_pow2(head_size_v))
    block_d = min(REDUCE_BLOCK_D, head_size_v_pad)
    pad = splits_pad(num_splits)
    grid = (num_tokens, num_q_heads, head_size_v_pad // block_d)
    _split_reduce_kernel[grid](
        out, part_acc, part_stat,
        out_scale, num_splits,
        out.stride(0), out.stride(1),
        NUM_Q_HEADS=num_q_heads, SPLITS_PAD=pad,
        HEAD_SIZE_V=head_size_v,
        BLOCK_D=block_d, OUT_DTYPE=out_dtype, INTERPRET_=INTERPRET, WAIT_FOR_PRIMARY=dependent,
        num_warps=1 if pad * block_d <= 2048 else 4, **({"launch_pdl": True} if dependent else {}),
    )


def split_workspace(out: torch.Tensor, num_splits: int) -> tuple[torch.Tensor, torch.Tensor]:
    """fp32 partials of split-K for ``out [T, Hq, Dv]``: ``part_acc [T, Hq, S, Dv]`` and
    ``part_stat [T, Hq, S, 2]`` (running max and sum of each segment). Without split-K the kernel never
    touches them, and ``out`` stands in for both (no allocation)."""
    if num_splits <= 1:
        return out, out
    num_tokens, num_q_heads, head_size_v = out.shape
    f32 = dict(dtype=torch.float32, device=out.device)
    return (torch.empty((num_tokens, num_q_heads, num_splits, head_size_v), **f32),
            torch.empty((num_tokens, num_q_heads, num_splits, 2), **f32))


def split_tickets(num_programs: int, device: torch.device) -> torch.Tensor:
    """One int32 ticket counter per program of the unsplit grid (a (sequence, KV head) in decode),
    for the fused merge: zero now, and the last program of each split puts it back to zero, so the
    same counters serve every later launch and CUDA-graph replay."""
    return torch.zeros(max(num_programs, 1), dtype=torch.int32, device=device)


@dataclass(eq=False)
class SplitKLaunch:
    """One attention-kernel launch and, with split-K, the merge of its segments into ``out``.

    Both paged-attention launchers (16/8-bit and low-bit) build one of these once per prepared call;
    calling it only launches (no checks, no host synchronisation), so it can be captured in a CUDA
    graph. ``grid`` is ``(programs, num_splits)``; an empty grid launches nothing. With
    ``fused_merge`` the attention kernel merges its own segments (the last program of each split,
    see :func:`split_tickets`) and no merge kernel is launched. ``dependent_merge`` (``None``: the
    rule :func:`~kvlab.kernels.split_decode_rules.dependent_split_merge`) launches the merge kernel as a
    programmatic dependent, which the attention programs let start as soon as they run
    (``LAUNCH_DEPENDENTS``; :mod:`kvlab.kernels.dependent_launch`).
    """

    kernel: Any
    grid: tuple[int, int]
    args: tuple = field(repr=False)
    consts: dict = field(repr=False)
    options: dict
    out: torch.Tensor = field(repr=False)
    part_acc: torch.Tensor = field(repr=False)
    part_stat: torch.Tensor = field(repr=False)
    out_scale: float = 1.0
    fused_merge: bool = False
    dependent_merge: bool | None = None

    def __post_init__(self) -> None:
        device = self.out.device
        can = device.type == "cuda" and overlaps_dependent_launches(device.index or 0)
        self.dependent_merge = dependent_split_merge(self.grid[1], self.fused_merge, can,
                                                     self.dependent_merge)

    def merges_as_dependent(self) -> bool:
        """Whether this launch's merge kernel runs as a programmatic dependent."""
        return self.grid[1] > 1 and not self.fused_merge and bool(self.dependent_merge)

    def kernel_consts(self) -> dict:
        """The attention kernel's constexprs for this launch."""
        return dict(self.consts, LAUNCH_DEPENDENTS=self.merges_as_dependent())

    def __call__(self) -> torch.Tensor:
        if self.grid[0] == 0:
            return self.out
        self.kernel[self.grid](*self.args, **self.kernel_consts(), **self.options)
        if self.grid[1] > 1 and not self.fused_merge:
            launch_split_reduce(self.out, self.part_acc, self.part_stat, self.out_scale,
                                self.consts["OUT_DTYPE"], dependent=self.merges_as_dependent())
        return self.out
