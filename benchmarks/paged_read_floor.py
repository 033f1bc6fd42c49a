"""How fast can a decode grid only *read* its paged K/V? The floor under the attention kernel.

A decode's time is its bytes at some streaming rate plus a fixed cost. This script takes the
attention math away and keeps everything else: a Triton kernel on the same grid as the library's
decode (one program per sequence, KV head and split-K segment, the same key tile, warps and
pipeline depth) walks the same block table, loads the same K and V rows through the same
software pipeline (block ids fetched a tile ahead) and folds them into one integer per program, so
nothing is converted, multiplied or merged. What the attention call takes beyond this kernel is
the cost of its math (and of its merge); what this kernel takes beyond the bytes at the copy
bandwidth is the cost of the grid and the paging themselves, which no inner loop can remove.

Per case and scheme (one H100 call): the library's call; the read kernel on the library's grid;
the read kernel on a few other grids (programs per multiprocessor 2, 4 or 8, key tiles of 64 or 128
rows); the read kernel over blocks laid out in order (block ids 0, 1, 2, ...), to see what the
random page order costs; and the same number of bytes read from contiguous ranges of the cache by
a plain kernel (no pages, no grid shape to keep). Writes ``paged_read_floor.csv`` into the folder
given as the first argument (default ``.``).

    PYTHONPATH=.:benchmarks python3 benchmarks/paged_read_floor.py "$OUT"
"""

import torch
import triton
import triton.language as tl
from decode_ab_cases import decode_bytes, prepare_calls, run_grid

from kvlab.bench.measure import time_graph_us
from kvlab.cache.batch import cdiv

CASES = ((1, 32768), (1, 8192), (16, 8192), (64, 1024), (16, 32768), (64, 32768))
SCHEMES = ("int8_per_token_head", "bfloat16")


@triton.jit
def _paged_read_kernel(k_ptr, v_ptr, bt_ptr, seq_lens_ptr, out_ptr, split_tiles,
                       stride_kb, stride_ks, stride_kh, stride_vb, stride_vs, stride_vh, stride_bt,
                       NUM_KV_HEADS: tl.constexpr, BLOCK_SIZE: tl.constexpr, TILE_N: tl.constexpr,
                       ROW_WORDS: tl.constexpr):
    pid = tl.program_id(0)
    kv_head = pid % NUM_KV_HEADS
    seq = pid // NUM_KV_HEADS
    split = tl.program_id(1)
    seq_len = tl.load(seq_lens_ptr + seq)
    bt_row = bt_ptr + seq.to(tl.int64) * stride_bt
    lo = split * split_tiles
    hi = tl.minimum(lo + split_tiles, tl.cdiv(seq_len, TILE_N))
    keys = tl.arange(0, TILE_N)
    words = tl.arange(0, ROW_WORDS)
    n = lo * TILE_N + keys
    blk = tl.load(bt_row + n // BLOCK_SIZE, mask=n < seq_len, other=0)
    acc = tl.zeros([TILE_N, ROW_WORDS], tl.int32)
    for t in range(lo, hi):
        tl.assume(t >= 0)
        n = t * TILE_N + keys
        valid = (n < seq_len)[:, None]
        row = blk.to(tl.int64)[:, None]
        slot = (n % BLOCK_SIZE)[:, None]
        k = tl.load(k_ptr + row * stride_kb + slot * stride_ks + kv_head * stride_kh + words[None, :],
                    mask=valid, other=0)
        # the next tile's block ids, one tile ahead, as the attention kernel fetches them
        n_next = n + TILE_N
        blk = tl.load(bt_row + n_next // BLOCK_SIZE, mask=n_next < seq_len, other=0)
        v = tl.load(v_ptr + row * stride_vb + slot * stride_vs + kv_head * stride_vh + words[None, :],
                    mask=valid, other=0)
        acc ^= k ^ v
    tl.store(out_ptr + pid * tl.num_programs(1) + split, tl.xor_sum(tl.xor_sum(acc, axis=1), axis=0))


@triton.jit
def _flat_read_kernel(x_ptr, out_ptr, n_words, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n_words, other=0)
    tl.store(out_ptr + tl.program_id(0), tl.xor_sum(x, axis=0))


def flat_read_launch(tensors, nbytes: int, block_words: int, num_warps: int, part: int):
    """A callable that reads ``nbytes`` from each of ``tensors`` (contiguous caches, split evenly):
    the ``part``-th range of that size in each, ``block_words`` int32 words a program: no paging,
    no grid shape to respect. Distinct parts read distinct bytes (the rotation past the L2)."""
    n_words = nbytes // 4 // len(tensors)
    views = [t.view(-1).view(torch.int32)[part * n_words:(part + 1) * n_words] for t in tensors]
    programs = cdiv(n_words, block_words)
    out = torch.empty(programs, dtype=torch.int32, device=views[0].device)

    def launch():
        for x in views:
            _flat_read_kernel[(programs,)](x, out, n_words, BLOCK=block_words, num_warps=num_warps)
    return launch


def read_launch(cache, batch, tile_n: int, num_splits: int, num_warps: int, num_stages: int,
                block_table=None):
    """A callable that launches the read kernel once over ``batch``'s blocks of ``cache``."""
    key, value = cache.key.view(torch.int32), cache.value.view(torch.int32)
    table = batch.block_table if block_table is None else block_table
    num_kv_heads, row_words = key.shape[2], key.shape[3]
    programs = batch.num_seqs * num_kv_heads
    split_tiles = cdiv(cdiv(batch.max_seq_len, tile_n), num_splits)
    out = torch.empty(programs * num_splits, dtype=torch.int32, device=key.device)

    def launch():
        _paged_read_kernel[(programs, num_splits)](
            key, value, table, batch.seq_lens, out, split_tiles,
            key.stride(0), key.stride(1), key.stride(2), value.stride(0), value.stride(1), value.stride(2),
            table.stride(0),
            NUM_KV_HEADS=num_kv_heads, BLOCK_SIZE=cache.block_size, TILE_N=tile_n, ROW_WORDS=row_words,
            num_warps=num_warps, num_stages=num_stages)
    return launch


def grids(case, tiling, sms: int):
    """(name, tile, splits, warps, stages): the library's grid (also deeper and wider), then 2, 4
    and 8 programs per SM."""
    yield "library_grid", tiling.tile_n, tiling.num_splits, tiling.num_warps, tiling.num_stages
    for stages in (3, 4):
        for warps in (4, 8):
            yield f"library_grid_n{stages}_w{warps}", tiling.tile_n, tiling.num_splits, warps, stages
    programs = case.kv.batch * 8
    for per_sm in (2, 4, 8):
        for tile in (64, 128):
            tiles = -(-case.kv.context // tile)
            splits = max(1, min(tiles, (per_sm * sms) // programs))
            yield f"{per_sm}_per_sm_t{tile}", tile, splits, 4, 2


def measure(ctx, config, case, scheme, cache, batches):
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    nbytes = decode_bytes(config, scheme, case.kv.batch, case.kv.context)
    code_bytes = 2 * case.kv.batch * case.kv.context * 8 * config.head_size * cache.key.element_size()
    calls = prepare_calls(case, scheme, cache, batches)
    tiling = calls[0].tiling
    rows = []

    def row(variant, us, grid=None, moved=nbytes):
        r = dict(device=ctx.device, batch=case.kv.batch, context=case.kv.context, scheme=scheme,
                 variant=variant, us=round(us, 2), bytes=moved,
                 pct_copy_bw=round(100 * moved / us / 1e3 / ctx.copy_bw_gbps, 1),
                 tile_n=grid[1] if grid else tiling.tile_n, num_splits=grid[2] if grid else tiling.num_splits)
        rows.append(r)

    for rnd in range(2):
        row(f"attention_r{rnd}", time_graph_us([c.run for c in calls], config.repeats))
        for grid in grids(case, tiling, sms):
            launches = [read_launch(cache, batches[s], *grid[1:]) for s in range(case.sets)]
            row(f"read_{grid[0]}_r{rnd}", time_graph_us(launches, config.repeats), grid, code_bytes)
        # blocks in order: sequence b of copy s reads blocks (s·B + b)·P, ... consecutive ids
        in_order = []
        for s in range(case.sets):
            seqs, cols = batches[s].block_table.shape
            first = (s * seqs + torch.arange(seqs, device="cuda")) * (cols - 1)
            table = (first[:, None] + torch.arange(cols, device="cuda")[None, :]).to(torch.int32)
            in_order.append(read_launch(cache, batches[s], tiling.tile_n, tiling.num_splits, tiling.num_warps,
                                        tiling.num_stages, block_table=table))
        row(f"read_library_grid_sorted_blocks_r{rnd}", time_graph_us(in_order, config.repeats),
            ("", tiling.tile_n, tiling.num_splits), code_bytes)
        # the same number of bytes read contiguously (K then V of the cache), no paging at all
        for block_words, warps in ((4096, 4), (16384, 8)):
            flat = [flat_read_launch((cache.key, cache.value), code_bytes, block_words, warps, s)
                    for s in range(case.sets)]
            row(f"read_contiguous_{block_words * 4 // 1024}KB_w{warps}_r{rnd}",
                time_graph_us(flat, config.repeats), ("", 0, 0), code_bytes)
    return rows


def main() -> None:
    run_grid("paged_read_floor.csv", CASES, SCHEMES, measure)


if __name__ == "__main__":
    main()
