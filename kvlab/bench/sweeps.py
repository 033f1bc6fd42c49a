"""The tuning sweep of ``kvlab bench --sweep``: which launch shapes to try, per decode case."""

from __future__ import annotations

from kvlab.bench.config import BenchConfig
from kvlab.kernels.launch_config import AttentionTiling, next_pow2


def default_sweep(config: BenchConfig) -> tuple[list[tuple[int, int]], dict]:
    """Cases ``(batch, context)`` and the tilings tried on each.

    * many long sequences (B=64, 32K): tile size × register cap (one pipeline buffer, 4 warps);
    * one long sequence (B=1, 32K) and a medium batch (B=16, 32K): split-K count × register cap ×
      pipeline depth, at 128-key tiles.
    """
    rows = max(16, next_pow2(config.num_q_heads // config.num_kv_heads))

    def tiling(tile_n, splits=1, regs=None, stages=2):
        return AttentionTiling(block_m=rows, block_q=1, tile_n=tile_n, num_warps=4, num_stages=stages,
                               num_splits=splits, max_registers=regs)

    big = [tiling(t, 1, r) for t in (64, 128) for r in (None, 128)]
    one = [tiling(128, n, r, s) for n in (33, 66) for r in (None, 128) for s in (2, 3)]
    mid = [tiling(128, n, r) for n in (2, 4, 8) for r in (None, 128)]
    return [(64, 32768), (1, 32768), (16, 32768)], {(64, 32768): big, (1, 32768): one, (16, 32768): mid}
