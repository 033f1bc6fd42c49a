"""kvlab's low-bit KV schemes: 4-bit and 2-bit codes, two or four per byte. **Not vLLM dtypes.**

vLLM's ``--kv-cache-dtype`` values stop at 8 bits. These schemes go below, as KIVI (Liu et al.,
ICML 2024) and Hugging Face transformers' ``QuantizedCache`` do on contiguous caches, but inside the
paged cache: a full block is a key group, and the newest tokens stay in a bf16 residual.

``int4_per_token_head`` (symmetric, like vLLM's int8 per-token-head with 4-bit codes)::

    s   = max( max_d |x_d| / 7 , 1e-6 )                   one fp32 scale per (token, KV head), K and V
    q_d = round_half_even( clamp( x_d * fl(1/s), -7, 7 ) )  stored as the nibble q_d + 8
    x_d ≈ q_d * s

``kivi<b>[_g<G>][_r<R>]`` with ``b`` = 4 or 2 bits, ``Q = 2**b - 1``, G = 32 (64, 128), R = 1 block:

* keys, per channel: for one block of ``block_size`` tokens, each (KV head, channel ``d``) gets::

      z_d = fp16( min_t K[t, d] )                          zero point (fp16)
      s_d = fp16( max( (max_t K[t, d] - z_d) / Q , 2**-14 ) )   scale (fp16)
      q_td = round_half_even( clamp( (K[t, d] - z_d) * fl(1/s_d), 0, Q ) )
      K[t, d] ≈ q_td * s_d + z_d

* values, per token in groups of G channels: the same formulas with min/max over the G channels
  ``c`` of group ``g`` of one (token, KV head), one fp16 scale and zero point per group;
* the most recent tokens stay in bf16 (the *residual*): the block being filled plus ``R - 1`` full
  blocks before it. A block is quantized when it leaves the residual.

All arithmetic is fp32 with correctly rounded division; scale and zero point are rounded to fp16
*before* the codes are computed from them, so the stored numbers reproduce the codes exactly.

Bytes per token per layer (``H`` KV heads, head sizes ``D`` (K) and ``Dv`` (V), block size ``B``):

* int4_per_token_head: ``H (D + Dv) / 2`` codes + ``2 H × 4`` scales;
* kivi<b>: ``H (D + Dv) b / 8`` codes + ``H (Dv / G) × 2 × 2`` value scales/zeros +
  ``H D × 2 × 2 / B`` key scales/zeros (one pair per channel per block, spread over its B tokens).

Example, 8 KV heads, head 128, block 16: bf16 4096 B; int4_per_token_head 1088 B; kivi4 1408 B;
kivi2 896 B; kivi2 at block 32: 768 B.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from kvlab.quantization.formats import HALF_BYTES, INT4_QMAX, SCALE_BYTES
from kvlab.quantization.schemes import KVCacheScheme, QuantMode

#: Value group sizes (channels) the KIVI schemes accept.
GROUP_SIZES: tuple[int, ...] = (32, 64, 128)
#: Bits per code the KIVI schemes accept.
KIVI_BITS: tuple[int, ...] = (4, 2)
#: Bytes of one residual (bf16) element.
RESIDUAL_ELEMENT_BYTES: int = 2

_KIVI_NAME = re.compile(r"^kivi(\d+)(?:_g(\d+))?(?:_r(\d+))?$")


@dataclass(frozen=True)
class LowBitScheme(KVCacheScheme):
    """A packed low-bit scheme (kvlab's own, not a vLLM ``--kv-cache-dtype``).

    Attributes:
        bits: bits per code (4 or 2); ``8 // bits`` codes share one byte.
        group_size: KIVI value group (channels per scale/zero point); ``None`` for int4 per-token-head.
        residual_blocks: KIVI residual length in blocks (>= 1); 0 for int4 per-token-head.
    """

    bits: int = 4
    group_size: int | None = None
    residual_blocks: int = 0

    @property
    def codes_per_byte(self) -> int:
        """How many codes one byte holds (2 for 4 bits, 4 for 2 bits)."""
        return 8 // self.bits

    @property
    def levels(self) -> int:
        """Largest code: 7 for the symmetric int4 scheme (codes -7..7), ``2**bits - 1`` for KIVI."""
        return int(INT4_QMAX) if self.mode == QuantMode.INT4_PER_TOKEN_HEAD else 2**self.bits - 1

    @property
    def element_bytes(self) -> int:
        """Not defined for packed codes: use :attr:`bits` (or :func:`kvlab.token_footprint`)."""
        raise ValueError(
            f"scheme {self.name!r} packs {self.codes_per_byte} codes per byte; an element has "
            f"{self.bits} bits, not whole bytes (use scheme.bits or kvlab.token_footprint)"
        )

    def check_shape(self, head_size: int, head_size_v: int, block_size: int) -> None:
        """Raise ``ValueError`` unless the scheme can store heads of this size in blocks of this size."""
        for name, size in (("head_size", head_size), ("head_size_v", head_size_v)):
            if (size * self.bits) % 8:
                raise ValueError(
                    f"{name} {size} does not fill whole bytes at {self.bits} bits per code: "
                    f"it must be a multiple of {self.codes_per_byte} for scheme {self.name!r}"
                )
        if self.mode != QuantMode.KIVI:
            return
        if head_size_v % self.group_size:
            raise ValueError(
                f"group size G={self.group_size} does not divide the V head size {head_size_v}; "
                f"allowed G for this head: {[g for g in GROUP_SIZES if head_size_v % g == 0] or 'none'} "
                f"(scheme {self.name!r})"
            )
        if block_size < 2 or block_size & (block_size - 1):
            raise ValueError(
                f"block_size must be a power of two >= 2 for scheme {self.name!r} (one block is one key "
                f"group, reduced in one tile), got {block_size}"
            )
        if (head_size * 2 * HALF_BYTES) % block_size:
            raise ValueError(
                f"block_size {block_size} must divide the {head_size * 2 * HALF_BYTES} bytes of key "
                f"scales and zero points per head and block (scheme {self.name!r})"
            )

    def page_bytes_per_head(self, head_size: int, head_size_v: int, block_size: int) -> tuple[int, int]:
        """``(code_bytes, scale_bytes)`` of one block of one KV head, K and V together."""
        self.check_shape(head_size, head_size_v, block_size)
        codes = block_size * (head_size + head_size_v) * self.bits // 8
        if self.mode == QuantMode.INT4_PER_TOKEN_HEAD:
            return codes, block_size * 2 * SCALE_BYTES
        value_pairs = block_size * (head_size_v // self.group_size)
        key_pairs = head_size
        return codes, (value_pairs + key_pairs) * 2 * HALF_BYTES

    def residual_tokens(self, block_size: int) -> int:
        """Most tokens one sequence keeps in bf16 (``residual_blocks × block_size``)."""
        return self.residual_blocks * block_size

    def describe(self) -> str:
        """One line: what the scheme stores, and that vLLM does not offer it."""
        if self.mode == QuantMode.INT4_PER_TOKEN_HEAD:
            what = "4-bit symmetric codes, one fp32 scale per token and KV head"
        else:
            what = (f"{self.bits}-bit keys per channel per block, values per token in groups of "
                    f"{self.group_size}, fp16 scales and zero points, bf16 residual of "
                    f"{self.residual_blocks} block(s)")
        return f"{self.name}: {what} ({self.origin_note})"


def _kivi(name: str, bits: int, group: int, residual: int) -> LowBitScheme:
    if bits not in KIVI_BITS:
        raise ValueError(f"scheme {name!r}: KIVI codes have {' or '.join(map(str, KIVI_BITS))} bits, "
                         f"got {bits}")
    if group not in GROUP_SIZES:
        raise ValueError(
            f"scheme {name!r}: value group size must be one of {', '.join(map(str, GROUP_SIZES))}, "
            f"got {group}"
        )
    if residual < 1:
        raise ValueError(f"scheme {name!r}: the residual is at least the block being filled (_r1), "
                         f"got _r{residual}")
    return LowBitScheme(name, QuantMode.KIVI, torch.uint8, float(2**bits - 1), None,
                        bits=bits, group_size=group, residual_blocks=residual)


def parse_low_bit_scheme(name: str) -> LowBitScheme | None:
    """The low-bit scheme a name denotes, ``None`` if it is not a low-bit name.

    ``kivi2`` = ``kivi2_g32`` = ``kivi2_g32_r1``; the scheme keeps the name it was given.

    Raises:
        ValueError: a kivi name with unsupported bits, group or residual (the message says which).
    """
    if name == "int4_per_token_head":
        return LowBitScheme(name, QuantMode.INT4_PER_TOKEN_HEAD, torch.uint8, INT4_QMAX, None, bits=4)
    m = _KIVI_NAME.match(name)
    if m is None:
        return None
    bits, group, residual = m.groups()
    return _kivi(name, int(bits), int(group or 32), int(residual or 1))
