"""A paged cache for kvlab's low-bit schemes (packed 4/2-bit codes; not vLLM dtypes).

Layout, ``N`` blocks of ``B`` tokens, ``H`` KV heads, ``P = 8 / bits`` codes per byte::

    key_codes    [N, B, H, D / P]   uint8    code d of a row at byte d // P, bits (d % P) * bits
    value_codes  [N, H, Dv / P, B]  uint8    same packing, but token-minor: a block's B bytes at one
                                             byte position of one head lie side by side
    int4_per_token_head:  key_scale, value_scale  [N, B, H]   fp32
    kivi:  key_scale, key_zero      [N, H, D]          fp16   one pair per channel per block
           value_scale, value_zero  [N, H, Dv / G, B]  fp16   one pair per token and group, token-minor
           residual_key/value       [pages, B, H, D]   bf16   the newest tokens (residual pages)
           residual_page            [N]                int32  page of a residual block, -1 once quantized

A KIVI write stores new tokens in bf16 in their block's residual page and quantizes every block that
leaves the residual (:mod:`kvlab.cache.lowbit_residual`): keys per channel over the block's tokens,
values per token. Reading a token therefore looks at ``residual_page[block]`` first. Fresh caches
hold NaN scales, so reading a never-written slot shows up as NaN.

**Why values are stored token-minor.** Attention contracts ``P·V`` over the keys, so a tensor-core
operand register of V holds *consecutive keys of one channel*. Stored token-major, those are bytes
``Dv / P`` apart and reach the registers one byte at a time (single-byte shared-memory loads with
bank conflicts); stored token-minor they are adjacent, and a tile of a block's values loads as whole
16-byte rows. Keys contract over channels and stay token-major. The bytes are the same either way.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from kvlab.cache.batch import AttentionBatch
from kvlab.cache.lowbit_residual import ResidualPool
from kvlab.cache.paged_cache import PagedKVCache, WriteReport
from kvlab.quantization.lowbit import (
    INT4_OFFSET,
    check_half_range,
    dequantize_value_groups,
    pack_codes,
    quantize_asymmetric,
    quantize_int4_per_token_head,
    quantize_value_groups,
    unpack_codes,
)
from kvlab.quantization.lowbit_schemes import LowBitScheme
from kvlab.quantization.per_token_head import ROUNDINGS
from kvlab.quantization.schemes import QuantMode, get_scheme
from kvlab.validation import require_choice, require_finite, require_positive_int

_NAN = float("nan")


@dataclass(eq=False)
class LowBitPagedCache:
    """K and V of one layer as packed low-bit codes in blocks, with scales, zero points and residual.

    Build one with :meth:`allocate` (or ``PagedKVCache.allocate`` with a low-bit scheme name), write
    with :meth:`write` (reference) or ``kvlab.kernels.lowbit_cache_write.write_lowbit_cache``
    (Triton), read with :meth:`gather` or ``kvlab.attention``.
    """

    scheme: LowBitScheme
    key_codes: torch.Tensor
    value_codes: torch.Tensor
    key_scale: torch.Tensor
    value_scale: torch.Tensor
    key_zero: torch.Tensor | None = None
    value_zero: torch.Tensor | None = None
    residual_key: torch.Tensor | None = None
    residual_value: torch.Tensor | None = None
    residual_page: torch.Tensor | None = None
    head_size: int = 0
    head_size_v: int = 0
    pool: ResidualPool | None = field(default=None, repr=False)

    @classmethod
    def allocate(cls, scheme: str | LowBitScheme, num_blocks: int, block_size: int, num_kv_heads: int,
                 head_size: int, *, head_size_v: int | None = None, device: str | torch.device = "cpu",
                 residual_pages: int | None = None) -> LowBitPagedCache:
        """An empty cache (NaN scales) of ``num_blocks`` blocks of ``block_size`` tokens.

        Args:
            scheme: ``int4_per_token_head`` or a ``kivi`` name.
            num_blocks, block_size, num_kv_heads, head_size, head_size_v: as ``PagedKVCache.allocate``.
            device: where the tensors live.
            residual_pages: bf16 residual pages (KIVI); default ``num_blocks`` (never runs out). A
                serving engine needs running sequences × residual_blocks + the blocks of one step.
        """
        sch = get_scheme(scheme)
        if not sch.mode.is_low_bit:
            raise ValueError(f"scheme {sch.name!r} is not a low-bit scheme; use PagedKVCache.allocate")
        for name, v in (("num_blocks", num_blocks), ("block_size", block_size),
                        ("num_kv_heads", num_kv_heads), ("head_size", head_size)):
            require_positive_int(v, name)
        hv = head_size if head_size_v is None else require_positive_int(head_size_v, "head_size_v")
        sch.check_shape(head_size, hv, block_size)
        shape = (num_blocks, block_size, num_kv_heads)
        p = sch.codes_per_byte

        def full(s, dtype):
            return torch.full(s, _NAN, dtype=dtype, device=device)

        key_codes = torch.zeros(*shape, head_size // p, dtype=torch.uint8, device=device)
        value_codes = torch.zeros(num_blocks, num_kv_heads, hv // p, block_size, dtype=torch.uint8,
                                  device=device)
        if sch.mode == QuantMode.INT4_PER_TOKEN_HEAD:
            return cls(sch, key_codes, value_codes, full(shape, torch.float32), full(shape, torch.float32),
                       head_size=head_size, head_size_v=hv)
        pages = (num_blocks if residual_pages is None
                 else require_positive_int(residual_pages, "residual_pages"))
        per_channel = (num_blocks, num_kv_heads, head_size)
        per_group = (num_blocks, num_kv_heads, hv // sch.group_size, block_size)
        return cls(
            sch, key_codes, value_codes, full(per_channel, torch.float16), full(per_group, torch.float16),
            key_zero=full(per_channel, torch.float16), value_zero=full(per_group, torch.float16),
            residual_key=full((pages, block_size, num_kv_heads, head_size), torch.bfloat16),
            residual_value=full((pages, block_size, num_kv_heads, hv), torch.bfloat16),
            residual_page=torch.full((num_blocks,), -1, dtype=torch.int32, device=device),
            head_size=head_size, head_size_v=hv, pool=ResidualPool(num_blocks, pages),
        )

    # -- shape (the attributes PagedKVCache offers, so the references accept either) ------------------

    @property
    def num_blocks(self) -> int:
        """Blocks in the cache."""
        return self.key_codes.shape[0]

    @property
    def block_size(self) -> int:
        """Tokens per block."""
        return self.key_codes.shape[1]

    @property
    def num_kv_heads(self) -> int:
        """KV heads."""
        return self.key_codes.shape[2]

    @property
    def num_slots(self) -> int:
        """Token slots: ``num_blocks * block_size``."""
        return self.num_blocks * self.block_size

    @property
    def device(self) -> torch.device:
        """Device of the cache tensors."""
        return self.key_codes.device

    @property
    def is_kivi(self) -> bool:
        """True for the KIVI schemes (residual, zero points), False for int4 per-token-head."""
        return self.scheme.mode == QuantMode.KIVI

    @property
    def nbytes(self) -> int:
        """Bytes of the pages: codes, scales and zero points (the residual pool not included)."""
        parts = (self.key_codes, self.value_codes, self.key_scale, self.value_scale, self.key_zero,
                 self.value_zero)
        return sum(t.nbytes for t in parts if t is not None)

    # -- write -----------------------------------------------------------------------------------------

    def check_write(self, key: torch.Tensor, value: torch.Tensor, slot_mapping: torch.Tensor,
                    check_finite: bool) -> torch.Tensor:
        """Validate a write (shared by the reference and the Triton writer); return the kept rows."""
        PagedKVCache.check_write_args(self, key, value, slot_mapping)
        keep = slot_mapping >= 0
        if check_finite or self.is_kivi:  # KIVI's fp16 scales cannot hold Inf: refuse, never saturate
            pad = (~keep)[:, None, None]
            check = check_half_range if self.is_kivi else require_finite
            check(key.masked_fill(pad, 0), "key")
            check(value.masked_fill(pad, 0), "value")
        return keep

    def write(self, key: torch.Tensor, value: torch.Tensor, slot_mapping: torch.Tensor, *,
              batch: AttentionBatch | None = None, rounding: str = "nearest",
              check_finite: bool = True) -> WriteReport:
        """Quantize and store new tokens (reference path).

        Args:
            key, value, slot_mapping: as :meth:`kvlab.cache.PagedKVCache.write`.
            batch: the step's batch (``seq_lens`` including the new tokens); KIVI with a residual
                longer than one block needs it to know which blocks leave the residual.
            rounding: only ``"nearest"`` (round half to even).
            check_finite: refuse NaN/Inf (KIVI always refuses them, and values beyond fp16).
        """
        require_choice(rounding, ROUNDINGS[:1], "rounding")
        keep = self.check_write(key, value, slot_mapping, check_finite)
        slots = slot_mapping[keep].long()
        k, v = key[keep], value[keep]
        blocks, offsets = slots // self.block_size, slots % self.block_size
        if not self.is_kivi:
            for codes_t, scale_t, x in ((self.key_codes, self.key_scale, k),
                                        (self.value_codes, self.value_scale, v)):
                q, s = quantize_int4_per_token_head(x, check_finite=False)
                codes = pack_codes((q + INT4_OFFSET).to(torch.uint8), 4)
                if codes_t is self.value_codes:  # token-minor: [blocks, :, :, offsets] is [n, H, Dv / P]
                    codes_t[blocks, :, :, offsets] = codes
                else:
                    codes_t[blocks, offsets] = codes
                scale_t[blocks, offsets] = s
            return WriteReport(int(slots.numel()), int((~keep).sum()))
        cpu_blocks = blocks.cpu()
        pages = self.pool.pages_for(cpu_blocks).to(self.device).long()
        self.residual_key[pages, offsets] = k.to(torch.bfloat16)
        self.residual_value[pages, offsets] = v.to(torch.bfloat16)
        self.pool.add_tokens(cpu_blocks)
        self.quantize_blocks(self.pool.leaving(self.block_size, self.scheme.residual_blocks, batch))
        self.residual_page.copy_(self.pool.page_of)
        return WriteReport(int(slots.numel()), int((~keep).sum()))

    def quantize_blocks(self, blocks: list[int]) -> None:
        """Quantize full blocks from their residual pages and give the pages back (reference).

        Keys: min/max over each block's tokens per channel; values: per token in groups of G channels.
        """
        if not blocks:
            return
        ids = torch.tensor(blocks, dtype=torch.long, device=self.device)
        pages = self.pool.page_of[blocks].long().to(self.device)
        bits, group = self.scheme.bits, self.scheme.group_size
        kc, ks, kz = quantize_asymmetric(self.residual_key[pages], bits, 1, check_finite=False)
        n, b, h, dv = self.residual_value[pages].shape
        vc, vs, vz = quantize_value_groups(self.residual_value[pages].reshape(n * b, h, dv), bits, group,
                                           check_finite=False)
        self.key_codes[ids] = pack_codes(kc, bits)
        self.value_codes[ids] = _token_minor(pack_codes(vc.reshape(n, b, h, dv), bits))
        self.key_scale[ids], self.key_zero[ids] = ks.squeeze(1), kz.squeeze(1)
        self.value_scale[ids] = _token_minor(vs.reshape(n, b, h, -1))
        self.value_zero[ids] = _token_minor(vz.reshape(n, b, h, -1))
        for block in blocks:
            self.pool.release(block)

    # -- read ------------------------------------------------------------------------------------------

    def gather(self, block_table_row: torch.Tensor, num_tokens: int, dtype: torch.dtype = torch.float64
               ) -> tuple[torch.Tensor, torch.Tensor]:
        """Dequantized K and V of one sequence's first ``num_tokens`` tokens (exact in float64).

        Residual tokens come back as their bf16 values, quantized ones as ``q * s (+ z)``.
        """
        pos = torch.arange(num_tokens, device=self.device)
        blocks = block_table_row.to(self.device).long()[pos // self.block_size]
        offs = pos % self.block_size
        bits = self.scheme.bits
        kc = unpack_codes(self.key_codes[blocks, offs], bits).to(dtype)
        vc = unpack_codes(self.value_codes[blocks, :, :, offs], bits)  # [n, H, Dv / P] (token-minor)
        if not self.is_kivi:
            k = (kc - INT4_OFFSET) * self.key_scale[blocks, offs].to(dtype).unsqueeze(-1)
            v = (vc.to(dtype) - INT4_OFFSET) * self.value_scale[blocks, offs].to(dtype).unsqueeze(-1)
            return k, v
        k = kc * self.key_scale[blocks].to(dtype) + self.key_zero[blocks].to(dtype)
        v = dequantize_value_groups(vc, self.value_scale[blocks, :, :, offs],
                                    self.value_zero[blocks, :, :, offs], dtype)
        page = self.residual_page[blocks].long()
        res = page >= 0
        k[res] = self.residual_key[page[res], offs[res]].to(dtype)
        v[res] = self.residual_value[page[res], offs[res]].to(dtype)
        return k, v

    def dequantize(self, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole cache as real values ``[num_blocks, block_size, num_kv_heads, head_size]``
        (residual blocks as their bf16 values; never-written slots NaN)."""
        k, v = self.gather(torch.arange(self.num_blocks, device=self.device), self.num_slots, dtype)
        return (k.reshape(self.num_blocks, self.block_size, self.num_kv_heads, self.head_size),
                v.reshape(self.num_blocks, self.block_size, self.num_kv_heads, self.head_size_v))

    def residual_tokens(self) -> int:
        """Tokens currently held in bf16 residual pages."""
        if not self.is_kivi:
            return 0
        return int(self.pool.filled[self.pool.page_of >= 0].sum())


def _token_minor(x: torch.Tensor) -> torch.Tensor:
    """Blocks ``[N, B, H, C]`` (token-major) → the value layout ``[N, H, C, B]`` (module docstring)."""
    return x.permute(0, 2, 3, 1)
