"""int8 tensor-core dots for the ``int4_per_token_head`` decode: no code is converted to a float.

An int4 code and its scale enter attention only as ``scale · (code − 8)``. The 16-bit kernel turns
every code into a bf16 number (about two instructions per code) and multiplies bf16 dots. This
path keeps the codes integer instead:

* **Codes.** ``16 · (code − 8)`` is a signed byte made by one ``lop3`` per four codes
  (:func:`kvlab.kernels.lowbit_unpack_asm.times16_int8_asm`), exact.
* **The other operand** is rounded to int8 per row: the query once per program (one scale for each
  query row, over all its channels), the probabilities ``p · v_scale`` once per key tile (one scale
  per row of the tile). This rounding is the only error the path adds to the 16-bit kernel's: at
  most half a step of ``max|row| / 127`` per element, about twice bf16's relative error for a
  row's largest elements, more for its small ones. It is the price of the integer dot, and it is
  not part of the scheme: the float64 reference keeps the query exact.
* **Dots** ``int8 × int8 → int32`` are exact (``|16 · (code − 8)| ≤ 128``, ``|x| ≤ 127``, so 128
  terms stay far below 2³¹). The scores become fp32 times the query row's scale and each key's K
  scale (with ``1 / 16`` and the softmax scale folded in); each tile's ``p · v`` comes back as fp32
  times its rows' scales.

**Opt-in** (``int8_dots=True`` of :func:`kvlab.kernels.lowbit_attention_call.prepare_lowbit_attention`):
on an H100 a full B=64 decode grid runs about 13% faster (``benchmarks/lowbit_notes.md``, round 15),
short grids no faster, and the query's rounding makes the output differ from the 16-bit kernel's by
about four times bf16's rounding (still a few percent of the scheme's own error), so the default
stays the kernel whose only rounding is the dot dtype's. How a tile runs on these dots is
:mod:`kvlab.kernels.lowbit_int8_tile`.

**Rounding without a conversion instruction.** Adding ``1.5 · 2²³`` to an fp32 ``|x| < 2²²`` leaves
``round(x)`` (to nearest, ties to even) in the low bits of its pattern, two's complement for
negatives; the low byte is the int8 code. One add and a byte extract, in both Triton modes.
"""

from __future__ import annotations

from kvlab.kernels.runtime import tl, triton

#: 1.5 · 2²³: adding it to |x| < 2²² rounds x to an integer held in the pattern's low bits
ROUNDING_MAGIC: tl.constexpr = tl.constexpr(12582912.0)


@triton.jit
def int8_codes(x, inv_scale):
    """``round(x · inv_scale)`` as int8 (``inv_scale`` broadcastable to ``x``; the product must lie in
    −127.5 .. 127.5)."""
    return (x * inv_scale + ROUNDING_MAGIC).to(tl.int32, bitcast=True).to(tl.int8)


@triton.jit
def row_inverse_scale(amax):
    """``127 / amax`` per row, 0 for an all-zero row (its codes are then 0 and so is its scale)."""
    return tl.where(amax > 0, 127.0 / tl.where(amax > 0, amax, 1.0), 0.0)

