"""A paged KV cache for one layer, in the layout vLLM uses, with the reference (PyTorch) write path.

Layout (vLLM's NHD order)::

    key, value    [num_blocks, block_size, num_kv_heads, head_size]   storage dtype of the scheme
    key_scale,    [num_blocks, block_size, num_kv_heads]              fp32, per-token-head schemes only
    value_scale
    k_scale, v_scale                                                  fp32 numbers, per-tensor fp8 only

A token at *slot* ``s`` lives at ``block = s // block_size``, ``offset = s % block_size``.

Why the scales are separate tensors: vLLM stores each (token, head) scale inline, in 4 extra bytes
after the head's codes, so an int8 row for head 128 is 132 bytes long. A 132-byte row stride is not a
multiple of 16, so the compiler cannot prove 16-byte alignment and falls back to single-byte loads
(seen in vLLM's PTX for sm90). Here codes stay in rows of ``head_size`` bytes (128 for head 128,
aligned for wide vector loads) and scales sit in their own aligned fp32 tensors. The byte count per
page is identical (see :mod:`kvlab.quantization.memory`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvlab.cache.write_args import WriteReport, check_finite_rows, check_write_args
from kvlab.quantization.per_tensor import as_fp32_scale, quantize_per_tensor
from kvlab.quantization.per_token_head import ROUNDINGS, quantize_per_token_head
from kvlab.quantization.schemes import KVCacheScheme, QuantMode, get_scheme
from kvlab.validation import require_choice, require_positive_int, require_rank

__all__ = ["PagedKVCache", "WriteReport"]


def _poison_(t: torch.Tensor) -> None:
    """Fill a fresh cache tensor so that reading a never-written slot shows up in the result."""
    if t.dtype == torch.int8:
        # int8 has no NaN; the NaN scales of the same rows carry the poison
        t.fill_(-128)
    else:
        t.fill_(float("nan"))


@dataclass(eq=False)
class PagedKVCache:
    """K and V of one layer in fixed-size blocks, plus the scales its scheme needs.

    Build one with :meth:`allocate`; write tokens with :meth:`write` (the reference quantizer) or
    with the Triton cache-write kernel (``kvlab.kernels.write_kv_cache``); read them back with
    :meth:`gather` or :meth:`dequantize`.
    """

    scheme: KVCacheScheme
    key: torch.Tensor
    value: torch.Tensor
    key_scale: torch.Tensor | None = None
    value_scale: torch.Tensor | None = None
    k_scale: float = 1.0
    v_scale: float = 1.0

    def __post_init__(self) -> None:
        self.scheme = get_scheme(self.scheme)
        require_rank(self.key, 4, "key", "[num_blocks, block_size, num_kv_heads, head_size]")
        require_rank(self.value, 4, "value", "[num_blocks, block_size, num_kv_heads, head_size]")
        if self.key.shape[:3] != self.value.shape[:3]:
            raise ValueError(
                f"key and value must agree on [num_blocks, block_size, num_kv_heads], got "
                f"{tuple(self.key.shape)} and {tuple(self.value.shape)}"
            )
        for name, t in (("key", self.key), ("value", self.value)):
            if t.dtype != self.scheme.storage_dtype:
                raise ValueError(
                    f"{name} must be stored as {self.scheme.storage_dtype} for scheme "
                    f"{self.scheme.name!r}, got {t.dtype}"
                )
            if not t.is_contiguous():
                raise ValueError(f"{name} must be contiguous")
        if self.value.device != self.key.device:
            raise ValueError(
                f"key and value must be on one device, got {self.key.device} and {self.value.device}"
            )
        if self.scheme.has_token_head_scales:
            for name, s in (("key_scale", self.key_scale), ("value_scale", self.value_scale)):
                if s is None:
                    raise ValueError(
                        f"scheme {self.scheme.name!r} needs {name} [num_blocks, block_size, num_kv_heads]"
                    )
                if tuple(s.shape) != tuple(self.key.shape[:3]) or s.dtype != torch.float32:
                    raise ValueError(
                        f"{name} must be float32 of shape {tuple(self.key.shape[:3])}, "
                        f"got {s.dtype} {tuple(s.shape)}"
                    )
                if s.device != self.key.device or not s.is_contiguous():
                    raise ValueError(f"{name} must be contiguous and on {self.key.device}")
        elif self.key_scale is not None or self.value_scale is not None:
            raise ValueError(f"scheme {self.scheme.name!r} has no per-token-head scales; pass key_scale=None")
        self.k_scale = as_fp32_scale(self.k_scale, "k_scale")
        self.v_scale = as_fp32_scale(self.v_scale, "v_scale")

    # -- construction ------------------------------------------------------------------------------

    @classmethod
    def allocate(
        cls,
        scheme: str | KVCacheScheme,
        num_blocks: int,
        block_size: int,
        num_kv_heads: int,
        head_size: int,
        *,
        head_size_v: int | None = None,
        device: str | torch.device = "cpu",
        k_scale: float = 1.0,
        v_scale: float = 1.0,
        model_dtype: torch.dtype = torch.bfloat16,
        poison: bool = True,
    ) -> PagedKVCache:
        """An empty cache of ``num_blocks`` blocks of ``block_size`` tokens.

        Args:
            scheme: kv-cache dtype name (see :data:`kvlab.SCHEME_NAMES`); a low-bit kvlab scheme
                returns a :class:`kvlab.cache.LowBitPagedCache` instead.
            num_blocks: blocks in the pool (each block holds ``block_size`` tokens).
            block_size: tokens per block.
            num_kv_heads: KV heads of the layer.
            head_size: elements per head vector (K); ``head_size_v`` for V, default the same.
            device: where the tensors live.
            k_scale, v_scale: per-tensor fp8 scales (ignored by other schemes).
            model_dtype: what ``"auto"`` stores.
            poison: fill with NaN (NaN scales for int8) so that reading unwritten slots is visible.
        """
        sch = get_scheme(scheme, model_dtype)
        if sch.mode.is_low_bit:  # kvlab's packed schemes have their own layout
            from kvlab.cache.lowbit_cache import LowBitPagedCache

            return LowBitPagedCache.allocate(sch, num_blocks, block_size, num_kv_heads, head_size,
                                             head_size_v=head_size_v, device=device)
        require_positive_int(num_blocks, "num_blocks")
        require_positive_int(block_size, "block_size")
        require_positive_int(num_kv_heads, "num_kv_heads")
        require_positive_int(head_size, "head_size")
        hv = head_size if head_size_v is None else require_positive_int(head_size_v, "head_size_v")
        shape = (num_blocks, block_size, num_kv_heads)
        key = torch.empty(*shape, head_size, dtype=sch.storage_dtype, device=device)
        value = torch.empty(*shape, hv, dtype=sch.storage_dtype, device=device)
        key_scale = value_scale = None
        if sch.has_token_head_scales:
            key_scale = torch.ones(shape, dtype=torch.float32, device=device)
            value_scale = torch.ones(shape, dtype=torch.float32, device=device)
        if poison:
            for t in (key, value, key_scale, value_scale):
                if t is not None:
                    _poison_(t)
        else:
            key.zero_()
            value.zero_()
        return cls(sch, key, value, key_scale, value_scale, k_scale, v_scale)

    # -- shape -------------------------------------------------------------------------------------

    @property
    def num_blocks(self) -> int:
        """Blocks in the cache."""
        return self.key.shape[0]

    @property
    def block_size(self) -> int:
        """Tokens per block."""
        return self.key.shape[1]

    @property
    def num_kv_heads(self) -> int:
        """KV heads."""
        return self.key.shape[2]

    @property
    def head_size(self) -> int:
        """Elements per K head vector."""
        return self.key.shape[3]

    @property
    def head_size_v(self) -> int:
        """Elements per V head vector."""
        return self.value.shape[3]

    @property
    def num_slots(self) -> int:
        """Token slots: ``num_blocks * block_size``."""
        return self.num_blocks * self.block_size

    @property
    def device(self) -> torch.device:
        """Device of the cache tensors."""
        return self.key.device

    @property
    def nbytes(self) -> int:
        """Bytes of codes plus per-token-head scales (per-tensor scales are two numbers, not counted)."""
        n = self.key.nbytes + self.value.nbytes
        if self.key_scale is not None:
            n += self.key_scale.nbytes + self.value_scale.nbytes
        return n

    # -- write -------------------------------------------------------------------------------------

    # shared by the reference and the Triton writers (kvlab.cache.write_args)
    check_finite_rows = staticmethod(check_finite_rows)
    check_write_args = check_write_args

    def write(
        self,
        key: torch.Tensor,
        value: torch.Tensor,
        slot_mapping: torch.Tensor,
        *,
        rounding: str = "nearest",
        check_finite: bool = True,
    ) -> WriteReport:
        """Quantize ``key``/``value`` with the cache's scheme and store them at their slots.

        Args:
            key: ``[num_tokens, num_kv_heads, head_size]`` float values.
            value: ``[num_tokens, num_kv_heads, head_size_v]`` float values.
            slot_mapping: ``[num_tokens]`` int slots (``block_id * block_size + offset``); negative
                slots mark padding tokens and are skipped.
            rounding: int8 per-token-head rounding, ``"nearest"`` or ``"truncate"`` (vLLM's store).
            check_finite: refuse NaN/Inf input.

        Returns:
            A :class:`WriteReport`.
        """
        self.check_write_args(key, value, slot_mapping)
        require_choice(rounding, ROUNDINGS, "rounding")
        keep = slot_mapping >= 0
        slots = slot_mapping[keep].long()
        k, v = key[keep], value[keep]
        if check_finite:
            self.check_finite_rows(key, value, slot_mapping)
        k_sat = v_sat = 0
        mode = self.scheme.mode
        if mode.is_per_token_head:
            k_codes, k_scales = quantize_per_token_head(k, self.scheme, rounding, check_finite=False)
            v_codes, v_scales = quantize_per_token_head(v, self.scheme, rounding, check_finite=False)
            self.key_scale.view(self.num_slots, self.num_kv_heads)[slots] = k_scales
            self.value_scale.view(self.num_slots, self.num_kv_heads)[slots] = v_scales
        elif mode == QuantMode.FP8_PER_TENSOR:
            kq = quantize_per_tensor(k, self.k_scale, self.scheme, check_finite=False)
            vq = quantize_per_tensor(v, self.v_scale, self.scheme, check_finite=False)
            k_codes, v_codes, k_sat, v_sat = kq.codes, vq.codes, kq.num_saturated, vq.num_saturated
        else:
            k_codes, v_codes = k.to(self.scheme.storage_dtype), v.to(self.scheme.storage_dtype)
        self.key.view(self.num_slots, self.num_kv_heads, self.head_size)[slots] = k_codes
        self.value.view(self.num_slots, self.num_kv_heads, self.head_size_v)[slots] = v_codes
        return WriteReport(int(slots.numel()), int((~keep).sum()), k_sat, v_sat)

    # -- read --------------------------------------------------------------------------------------

    def _dequantize_rows(self, codes: torch.Tensor, scales: torch.Tensor | None, tensor_scale: float,
                         dtype: torch.dtype) -> torch.Tensor:
        mode = self.scheme.mode
        if mode.is_per_token_head:
            return codes.to(dtype) * scales.to(dtype).unsqueeze(-1)
        if mode == QuantMode.FP8_PER_TENSOR:
            return codes.to(dtype) * torch.tensor(tensor_scale, dtype=torch.float32).to(dtype)
        return codes.to(dtype)

    def dequantize(self, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
        """The whole cache as real values ``[num_blocks, block_size, num_kv_heads, head_size]``.

        In float64 (the default) ``code × scale`` is exact.
        """
        k = self._dequantize_rows(self.key, self.key_scale, self.k_scale, dtype)
        v = self._dequantize_rows(self.value, self.value_scale, self.v_scale, dtype)
        return k, v

    def gather(
        self, block_table_row: torch.Tensor, num_tokens: int, dtype: torch.dtype = torch.float64
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Dequantized K and V of one sequence's first ``num_tokens`` tokens, in order.

        Args:
            block_table_row: ``[max_blocks]`` block ids of the sequence.
            num_tokens: tokens to read (its sequence length).

        Returns:
            ``K [num_tokens, num_kv_heads, head_size]``, ``V [num_tokens, num_kv_heads, head_size_v]``.
        """
        positions = torch.arange(num_tokens, device=self.device)
        blocks = block_table_row.to(self.device).long()[positions // self.block_size]
        offsets = positions % self.block_size
        k = self.key[blocks, offsets]
        v = self.value[blocks, offsets]
        ks = self.key_scale[blocks, offsets] if self.key_scale is not None else None
        vs = self.value_scale[blocks, offsets] if self.value_scale is not None else None
        return (self._dequantize_rows(k, ks, self.k_scale, dtype),
                self._dequantize_rows(v, vs, self.v_scale, dtype))
