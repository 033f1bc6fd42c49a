"""How a split decode runs, once :mod:`kvlab.kernels.launch_config` has chosen its split count.

Five rules, each a constant that says whether it is on and a function that applies it to a launch:

* **Segment sizes.** Every sequence's key tiles are cut into segments of one size per launch, the
  longest sequence's tiles over the split count (:func:`segment_tiles`): a program then knows its
  first tile from its segment number alone and can ask for that tile's block ids before it knows
  its sequence's length.
* **Short segments, short tiles.** A 1-byte decode whose segments hold only a few 128-key tiles
  takes 64-key tiles (:func:`short_segment_tile_n`): every program of a one-wave grid ends on its
  last tile's math with nothing left to load, and a tile of half the keys halves that tail.
* **Unmasked tiles.** Long segments of 1-byte caches run the tiles wholly inside their sequence
  without masks (:func:`unmasked_decode_tiles`).
* **Where the merge runs.** In a second kernel (the rule), or in the attention kernel's last program
  of each (sequence, KV head) (:func:`fused_split_merge`, measured slower, off).
* **When the merge starts.** As a programmatic dependent that every attention program lets start at
  once (:func:`dependent_split_merge`, :mod:`kvlab.kernels.dependent_launch`).

Pure Python, no Triton; every number quoted was measured on an H100 (``benchmarks/kernel_notes.md``).
"""

from __future__ import annotations

from kvlab.cache.batch import cdiv

#: Key tiles per split-K segment from which a 1-byte decode runs its whole tiles without masks.
UNMASKED_DECODE_MIN_TILES: int = 16


def unmasked_decode_tiles(kv_element_bytes: int, num_splits: int, max_seq_len: int, tile_n: int) -> bool:
    """Whether a decode runs the tiles wholly inside its sequences without masks (only the last one
    masked): for 1-byte caches in split grids whose segments hold at least
    :data:`UNMASKED_DECODE_MIN_TILES` tiles. Measured on an H100 (B=16 at 8K and 32K tokens, 4
    segments of 16–64 tiles): 6–13% faster; unsplit (B=64) 3–6% slower and with 4 tiles a segment
    (B=1) within ±4%, so those keep every tile masked (``benchmarks/kernel_notes.md``, round 6).
    """
    segment_tiles = -(-max_seq_len // tile_n) // max(num_splits, 1)
    return kv_element_bytes == 1 and num_splits > 1 and segment_tiles >= UNMASKED_DECODE_MIN_TILES


def segment_tiles(num_splits: int, max_seq_len: int, tile_n: int) -> int:
    """Key tiles of one split-K segment in a decode launch: the longest sequence's tiles over
    ``num_splits``, rounded up (every sequence's segment ``s`` starts at tile ``s`` × this)."""
    return max(1, cdiv(cdiv(max_seq_len, tile_n), max(num_splits, 1)))


#: Largest segment, in key tiles of 128 keys, that a split 1-byte decode runs in 64-key tiles
#: instead (0: never). Measured on an H100 (benchmarks/kernel_notes.md, round 13), 64- against
#: 128-key tiles at the same split count: segments of 2 and 4 tiles (B=1 at 16K and 32K tokens, B=2 at
#: 8K, B=4 at 8K) int8 and fp8 per-token-head 2.8-4.2% faster, per-tensor fp8 between 0.3% slower and
#: 2.3% faster; segments of 8 tiles between 5.6% faster and 5.5% slower; 16 and 32 tiles 6-12% slower.
#: 32-key tiles were slower than 64-key ones in every short case (up to 19%).
SHORT_SEGMENT_MAX_TILES: int = 4


def short_segment_tile_n(tile_n: int, kv_element_bytes: int, num_splits: int, max_seq_len: int) -> int:
    """The key tile of a split decode launch: ``tile_n // 2`` for a 1-byte cache whose segments hold at
    most :data:`SHORT_SEGMENT_MAX_TILES` tiles of ``tile_n`` = 128 keys, else ``tile_n``."""
    short = (kv_element_bytes == 1 and num_splits > 1 and tile_n == 128
             and segment_tiles(num_splits, max_seq_len, tile_n) <= SHORT_SEGMENT_MAX_TILES)
    return tile_n // 2 if short else tile_n


#: Whether a split decode without a sliding window cuts every sequence into segments of
#: :func:`segment_tiles` tiles, whose first block ids the kernel can then load before it knows the
#: sequence's length, instead of cutting each sequence's own tiles evenly.
#: Measured on an H100 against segments cut from each sequence's length (benchmarks/kernel_notes.md,
#: round 12; outputs bit-identical): B=1, L=1024 5-9% faster, B=1, L=8192 3-5% for 1-byte caches,
#: fp8 per-token-head 8% at B=1, L=32768 and B=4, L=8192; every other case within ±2%.
FIXED_DECODE_SEGMENTS: bool = True


def fixed_decode_segments(decode_only: bool, num_splits: int, windowed: bool) -> bool:
    """Whether a launch uses fixed-size segments (:data:`FIXED_DECODE_SEGMENTS`): split decode
    launches without a sliding window (a window's first tile depends on the sequence's length).
    Not unsplit ones: there the early load measured 13-32% slower for 1-byte caches at B=64 on an
    H100 (``benchmarks/kernel_notes.md``, round 12), bf16 level."""
    return FIXED_DECODE_SEGMENTS and decode_only and num_splits > 1 and not windowed


#: Whether split decode grids merge their segments inside the attention kernel (the last segment of
#: each (sequence, KV head) to finish, see ``kernels/attention_kernel.py``) instead of in a second
#: kernel. Off: measured slower on an H100 everywhere it was timed (benchmarks/kernel_notes.md,
#: round 8): bf16 B=1, L=32768 73.1 µs against 55.7 µs, int8 B=16, L=32768 500 against 440 µs;
#: the last program merges its 4 query heads alone, while the merge kernel spreads them over 128.
FUSE_SPLIT_MERGE: bool = False


def fused_split_merge(decode_only: bool, num_splits: int, requested: bool | None = None) -> bool:
    """Whether a launch merges its split-K segments in the attention kernel: only split decode grids
    can (one query token per program); ``requested`` (``None``: :data:`FUSE_SPLIT_MERGE`) says
    whether they do."""
    wanted = FUSE_SPLIT_MERGE if requested is None else requested
    return decode_only and num_splits > 1 and wanted


#: Whether a split decode launches its merge kernel as a programmatic dependent of the attention
#: kernel (Hopper and later, :mod:`kvlab.kernels.dependent_launch`), with every attention program
#: letting it launch as soon as it starts. Measured on an H100 against the merge launched after
#: (benchmarks/kernel_notes.md, round 12): B=1, L=1024 4-10% faster for every scheme (bf16 7.89 ->
#: 7.13 µs), B=1, L=8192 bf16 and int4 3-4% faster, 1-byte and kivi2 caches 0.5-2.7% slower there,
#: every other split case within ±1%. Without the early start (the merge launched as a dependent
#: but only when the attention grid ends) nothing was faster.
DEPENDENT_SPLIT_MERGE: bool = True


def dependent_split_merge(num_splits: int, fused: bool, device_can: bool,
                          requested: bool | None = None) -> bool:
    """Whether a launch's merge kernel is a programmatic dependent of its attention kernel: only a
    split launch with a merge kernel (not ``fused``), on a GPU that can (``device_can``);
    ``requested`` (``None``: :data:`DEPENDENT_SPLIT_MERGE`) says whether it is."""
    wanted = DEPENDENT_SPLIT_MERGE if requested is None else requested
    return num_splits > 1 and not fused and device_can and wanted


#: Whether a split launch tells the compiler that its key tiles are never negative
#: (``tl.assume``), so that each key's block and offset in it are a shift and a mask rather than a
#: signed division. Offline for sm_90 the decode step of a split launch shrinks: int8
#: per-token-head 1,884 → 1,572 instructions (B=1), 1,582 → 1,404 (B=16, unmasked tiles); bf16 612
#: → 457. Unsplit launches start at tile 0 and compile the short form without it. Measured on an
#: H100 (benchmarks/kernel_notes.md, round 12; outputs bit-identical): B=1, L=8192 1-byte caches
#: 5-6% faster, fp8_e4m3 B=1, L=32768 5%, int8 B=16, L=32768 3%; fp8 per-token-head at B=4 and
#: B=16 1-2% slower; the rest within ±1.6%.
NONNEGATIVE_TILE_HINT: bool = True


def tiles_nonnegative_hint(num_splits: int) -> bool:
    """Whether a launch's key loops carry the hint (:data:`NONNEGATIVE_TILE_HINT`): split launches,
    whose first tile is known only at run time."""
    return NONNEGATIVE_TILE_HINT and num_splits > 1
