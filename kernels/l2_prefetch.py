"""Warming the L2 cache a few key tiles ahead of a decode loop (one job: prefetch).

**Why.** Triton's software pipeliner stages a block-table-indexed K/V tile through shared memory one
tile ahead of its use (``num_stages = 2``). So a program has at most one tile of bytes in flight,
and while it waits for that tile nothing else of its own is on the way: the copies of tile ``t + 1``
can only be issued once tile ``t + 1``'s block ids have arrived. A 1-byte tile carries half the
bytes of a bf16 one in the same shared memory, so an 8-bit decode keeps half as many bytes in
flight per multiprocessor, and a short split-K segment (B = 1: about four tiles) waits for each of
its tiles in turn. More stages would cost the shared memory that lets four programs share a
multiprocessor (``benchmarks/kernel_notes.md`` swept them).

**How.** ``prefetch.global.L2`` asks the memory system to bring the bytes at an address into L2 and
returns at once: it writes no register and no shared memory, and nothing ever waits on it.
In step ``t`` a program asks for the K and V rows of tile ``t + AHEAD``; when the pipeliner's own
copies of that tile are issued, ``AHEAD − 1`` steps later, they find their bytes in L2. Before the
loop, tiles ``lo + 1 .. lo + AHEAD − 1`` are asked for, so a segment of at most ``AHEAD`` tiles has
all of its bytes requested before its first tile is used.

Prefetching changes no number: it only moves bytes earlier. In the interpreter (no PTX) the
functions here do nothing, so CPU tests exercise the same kernel code paths with the same results.
The host picks the distance and how many prefetches cover a row
(:func:`kvlab.kernels.launch_config.l2_prefetch_ahead`).
"""

from __future__ import annotations

from kvlab.kernels.runtime import tl, triton


@triton.jit
def prefetch_rows(row_ptr, wanted, ROW_BYTES: tl.constexpr, PER_ROW: tl.constexpr, INTERPRET_: tl.constexpr):
    """Ask for the ``ROW_BYTES`` bytes from each pointer of ``row_ptr`` where ``wanted`` is true, as
    ``PER_ROW`` evenly spaced ``prefetch.global.L2`` (no-op in the interpreter).

    The per-thread ``prefetch`` is used, not Hopper's bulk prefetch of a byte range: the bulk form
    takes a warp-uniform address, so ``ptxas`` loops over the 32 lanes' rows one at a time (seven
    instructions each, about 450 per warp and tile). How much one ``prefetch`` brings in (a 32-byte
    sector or a 128-byte line) is the hardware's; ``PER_ROW`` lets the benchmark find out. The asm's
    one output is a dummy: ``is_pure=False`` keeps the call alive."""
    if not INTERPRET_:
        part = tl.arange(0, PER_ROW) * (ROW_BYTES // PER_ROW)
        addr = row_ptr.to(tl.int64, bitcast=True)[:, None] + part[None, :]
        flag = tl.broadcast_to(wanted.to(tl.int32)[:, None], [addr.shape[0], PER_ROW])
        tl.inline_asm_elementwise(
            "{\n.reg .pred p;\nsetp.ne.b32 p, $2, 0;\n@p prefetch.global.L2 [$1];\nmov.b32 $0, 0;\n}",
            "=r,l,r", [addr, flag], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def ahead_block_ids(bt_row, t, tile_hi, kv_start, kv_end, TILE_N: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    """Block ids of tile ``t`` (0 where a position is not read) and which of its keys to prefetch:
    those inside ``[kv_start, kv_end)`` of a tile before ``tile_hi`` (the end of this program's
    segment: the next segment's program fetches its own)."""
    n = t * TILE_N + tl.arange(0, TILE_N)
    wanted = (n >= kv_start) & (n < kv_end) & (t < tile_hi)
    return tl.load(bt_row + n // BLOCK_SIZE, mask=wanted, other=0), wanted


@triton.jit
def prefetch_kv_tile(blk, wanted, t, kv_head, k_ptr, v_ptr,
                     stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh,
                     TILE_N: tl.constexpr, BLOCK_SIZE: tl.constexpr, K_ROW_BYTES: tl.constexpr,
                     V_ROW_BYTES: tl.constexpr, PER_ROW: tl.constexpr, INTERPRET_: tl.constexpr):
    """Ask for the K and V rows of tile ``t`` (block ids ``blk`` from :func:`ahead_block_ids`): one
    row of this KV head per key, in the ``[blocks, block_size, heads, head_size]`` cache layout."""
    n = t * TILE_N + tl.arange(0, TILE_N)
    blk64 = blk.to(tl.int64)
    in_blk = n % BLOCK_SIZE
    prefetch_rows(k_ptr + blk64 * stride_kb + in_blk * stride_ks + kv_head * stride_kh, wanted,
                  K_ROW_BYTES, PER_ROW, INTERPRET_)
    prefetch_rows(v_ptr + blk64 * stride_vb + in_blk * stride_vs + kv_head * stride_vh, wanted,
                  V_ROW_BYTES, PER_ROW, INTERPRET_)


@triton.jit
def prefetch_lowbit_tile(blk, wanted, t, kv_head, kc_ptr, vc_ptr, NUM_KV_HEADS: tl.constexpr,
                         DP: tl.constexpr, DVP: tl.constexpr, TILE_N: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                         PER_ROW: tl.constexpr, INTERPRET_: tl.constexpr):
    """Ask for the packed K and V codes of tile ``t`` of a low-bit cache (block ids ``blk`` from
    :func:`ahead_block_ids`): each key's ``DP``-byte key row, and a ``DVP``-byte share of its block's
    token-minor value run (the block's ``B`` keys together cover the run's ``DVP · B`` bytes).
    Scales and zero points are left to the kernel's own loads (a few percent of the bytes)."""
    n = t * TILE_N + tl.arange(0, TILE_N)
    blk64 = blk.to(tl.int64)
    in_blk = n % BLOCK_SIZE
    prefetch_rows(kc_ptr + ((blk64 * BLOCK_SIZE + in_blk) * NUM_KV_HEADS + kv_head) * DP, wanted, DP, PER_ROW,
                  INTERPRET_)
    prefetch_rows(vc_ptr + (blk64 * NUM_KV_HEADS + kv_head) * (DVP * BLOCK_SIZE) + in_blk * DVP, wanted, DVP,
                  PER_ROW, INTERPRET_)
