"""The compact 16-bit scratch cache of the dequantize-first prefill paths, and the call that fills it.

A prefill chunk reads every K/V tile of its context once per query block, so a kernel that converts
codes inside the attention loop converts each tile many times (a 2,048-token chunk: up to 32 times).
The dequantize-first paths convert each block the batch reads once, into a scratch cache of the query's
dtype, then run the plain 16-bit kernel over it. Two caches use it: the 8-bit schemes
(:mod:`kvlab.kernels.dequantized_prefill`) and kvlab's low-bit schemes (:mod:`kvlab.kernels.lowbit_prefill`).

The scratch holds only the distinct blocks the batch reads, renumbered ``0 .. used − 1``; the batch is
rebuilt with block tables into it. Its size (:func:`dequantized_scratch_bytes`)::

    scratch bytes = used blocks × block_size × num_kv_heads × (head_size + head_size_v) × query dtype bytes

e.g. 8,192 tokens of 8 KV heads, head 128, bf16: 512 × 16 × 8 × 256 × 2 = 32 MiB, transient.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kvlab.cache.batch import AttentionBatch
from kvlab.cache.paged_cache import PagedKVCache
from kvlab.quantization.schemes import get_scheme


def compact_blocks(batch: AttentionBatch, block_size: int) -> tuple[torch.Tensor, list[list[int]]]:
    """The distinct block ids the batch reads (int32, ascending), and each sequence's block table
    renumbered into that list's order."""
    host = batch.block_table.cpu()
    rows = [host[i, : -(-n // block_size)].long() for i, n in enumerate(batch.seq_lens.cpu().tolist())]
    used = torch.unique(torch.cat(rows)) if rows else torch.zeros(0, dtype=torch.long)
    index = {int(b): k for k, b in enumerate(used.tolist())}
    return used.to(torch.int32), [[index[int(b)] for b in r.tolist()] for r in rows]


def dequantized_scratch_bytes(used_blocks: int, block_size: int, num_kv_heads: int, head_size: int,
                              head_size_v: int, dtype: torch.dtype) -> int:
    """Bytes of the transient 16-bit (``dtype``) scratch cache for ``used_blocks`` distinct blocks
    (module docstring): ``used_blocks × block_size × num_kv_heads × (head_size + head_size_v) ×
    dtype's element size``."""
    itemsize = torch.empty(0, dtype=dtype).element_size()
    return used_blocks * block_size * num_kv_heads * (head_size + head_size_v) * itemsize


def scratch_for(batch: AttentionBatch, block_size: int, num_kv_heads: int, head_size: int, head_size_v: int,
                dtype: torch.dtype, device: torch.device
                ) -> tuple[torch.Tensor, PagedKVCache, AttentionBatch]:
    """``(used block ids on device, an uninitialised scratch cache of dtype, the batch over it)``."""
    used, tables = compact_blocks(batch, block_size)
    n = max(1, used.numel())
    shape = (n, block_size, num_kv_heads)
    scratch = PagedKVCache(get_scheme("auto", dtype),
                           torch.empty(*shape, head_size, dtype=dtype, device=device),
                           torch.empty(*shape, head_size_v, dtype=dtype, device=device))
    local = AttentionBatch.from_lengths(batch.query_lens, batch.seq_lens.cpu().tolist(), tables or [[0]],
                                        device=device)
    return used.to(device), scratch, local


@dataclass(eq=False)
class DequantizedPrefillCall:
    """A validated dequantize-then-attend call; :meth:`run` launches both kernels (no host work), so it
    can be timed in a loop or captured in a CUDA graph.

    Attributes:
        out: the output; ``scratch``: the compact 16-bit cache it fills; ``batch``: the call's batch
        with block tables into ``scratch``; ``attention``: the 16-bit call.
    """

    out: torch.Tensor
    scratch: PagedKVCache
    batch: AttentionBatch
    attention: object  # kvlab.kernels.attention.PagedAttentionCall (not imported: it imports this path)
    _launch: tuple = field(repr=False)  # (dequantize kernel, grid, args, constexprs)

    # the launch shape of the 16-bit kernel, named as on the other calls (benchmark tables)
    tiling = property(lambda self: self.attention.tiling)
    num_splits = property(lambda self: self.attention.tiling.num_splits)
    tile_n = property(lambda self: self.attention.tiling.tile_n)
    block_m = property(lambda self: self.attention.tiling.block_m)
    num_warps = property(lambda self: self.attention.tiling.num_warps)
    tiles_per_step = 1
    options = property(lambda self: dict(num_stages=self.attention.tiling.num_stages,
                                         maxnreg=self.attention.tiling.max_registers))

    @property
    def scratch_bytes(self) -> int:
        """Bytes of the scratch cache this call holds (K and V)."""
        return self.scratch.key.nbytes + self.scratch.value.nbytes

    def run(self) -> torch.Tensor:
        """Dequantize the batch's blocks into :attr:`scratch`, then run attention; returns :attr:`out`."""
        kernel, grid, args, consts = self._launch
        if grid[0]:
            kernel[grid](*args, **consts)
        return self.attention.run()
