"""int8 codes → ``code / 64`` in bf16 by the subnormal trick (``kvlab.kernels.int8_decode``).

Three checks, each against a value computed without the code under test:

* the PTX string, executed instruction by instruction in Python on every one of the 256 codes
  (runs everywhere), against ``c / 64`` in float64 (exact in bf16: an integer of 8 bits over a power
  of two);
* the kernel helper on every code: in the interpreter its pure-Triton path, against float64; on the
  GPU the inline PTX, whose bits must equal those of Triton's own cast divided by 64 (so the two
  conversions are the same numbers) and of torch's;
* the attention kernel with the trick (keys and values, keys only, and the rule's choice) and with
  Triton's cast, decode (unsplit and split) and a prefill chunk, on a poisoned int8 cache: the
  outputs must be bit-identical (the 64 goes back into the softmax and output scales, powers of two),
  and within the kernel's tolerance of float64. The rule itself is checked on hand-worked shapes.
"""

from __future__ import annotations

import pytest
import torch

from kvlab import build_paged_example
from kvlab.kernels import prepare_paged_attention
from kvlab.kernels.int8_decode import CODE_DIVISOR, INT8_TO_BF16_OVER_64_ASM, int8_to_bf16_over_64
from kvlab.kernels.runtime import INTERPRET, tl, triton
from kvlab.reference import paged_attention_reference
from kvlab.reference.metrics import relative_error

from .conftest import kernel_tolerance, poisoned
from .ptx_model import output_halves, run_ptx

ALL_CODES = torch.arange(-128, 128, dtype=torch.int8)


def _execute(word: int) -> list[float]:
    """Run the PTX on one b32 of four codes; the four bf16 results (code 0 first)."""
    return output_halves(run_ptx(INT8_TO_BF16_OVER_64_ASM, [word]), torch.bfloat16)


def test_ptx_gives_every_code_over_64_exactly():
    got = []
    for w in range(64):
        codes = ALL_CODES[4 * w:4 * w + 4]
        got += _execute(int.from_bytes(codes.view(torch.uint8).numpy().tobytes(), "little"))
    want = [int(c) / 64.0 for c in ALL_CODES]
    assert got == want
    assert CODE_DIVISOR == 64
    # the worked example of the module docstring: −3 → −3/64
    assert got[128 - 3] == -0.046875


@triton.jit
def _convert_kernel(c_ptr, new_ptr, old_ptr, INTERPRET_: tl.constexpr):
    i = tl.arange(0, 256)
    c = tl.load(c_ptr + i)
    tl.store(new_ptr + i, int8_to_bf16_over_64(c, INTERPRET_).to(tl.float32))
    tl.store(old_ptr + i, c.to(tl.float32))


def test_kernel_helper_on_all_256_codes(target):
    codes = ALL_CODES.to(target.device)
    new = torch.full((256,), float("nan"), device=target.device)
    old = torch.full((256,), float("nan"), device=target.device)
    _convert_kernel[(1,)](codes, new, old, INTERPRET_=INTERPRET)
    truth = ALL_CODES.double() / 64.0
    assert torch.equal(new.cpu().double(), truth)
    if not INTERPRET:
        # the inline PTX against Triton's own cast: same numbers, to the bit, once the 64 is back
        assert torch.equal((new.cpu() * 64).to(torch.bfloat16).view(torch.int16),
                           ALL_CODES.to(torch.bfloat16).view(torch.int16))
        assert torch.equal(old.cpu(), ALL_CODES.float())


@pytest.mark.parametrize("values", [None, True, False])
@pytest.mark.parametrize("case", ["decode", "decode-split", "prefill"])
def test_attention_with_the_trick_is_bit_identical_to_the_cast(target, seed, case, values):
    if target.large:
        qlens, slens, hq, hkv, d = ([1] * 6, [1, 129, 300, 4097, 2048, 8192], 32, 8, 128)
    else:
        qlens, slens, hq, hkv, d = ([1] * 4, [1, 64, 75, 200], 4, 2, 32)
    if case == "prefill":
        qlens = [min(q, s) for q, s in zip([64, 1, 37, 128, 5, 64], slens, strict=False)]
    splits = 3 if case == "decode-split" else None
    ex = build_paged_example(qlens, slens, num_q_heads=hq, num_kv_heads=hkv, head_size=d,
                             scheme="int8_per_token_head", seed=seed, device=target.device)
    outs = []
    for fast in (True, False):
        out = poisoned((sum(qlens), hq, d), ex.query.dtype, target.device)
        call = prepare_paged_attention(ex.query, ex.cache, ex.batch, out=out, num_splits=splits,
                                       int8_fast_decode=fast, int8_fast_values=values)
        call.run()
        assert torch.isfinite(out).all(), "outputs unwritten, or a poisoned slot was read"
        outs.append(out)
    assert torch.equal(outs[0].view(torch.int16), outs[1].view(torch.int16)), (
        f"{(outs[0] != outs[1]).sum().item()} outputs differ between the trick and the cast")
    ref = paged_attention_reference(ex.query, ex.cache, ex.batch)
    tol = kernel_tolerance(ex.query.dtype, "int8_per_token_head", torch.bfloat16)
    assert relative_error(outs[0], ref) <= tol


def test_rule_for_the_values_on_hand_worked_shapes():
    from kvlab.kernels.int8_decode import int8_parts_by_trick

    # B=64 decode, one program per sequence and head: keys and values by the trick
    assert int8_parts_by_trick(True, 1, 128) == (True, True)
    # B=16 / B=1 at 32K: split programs over 128-key tiles keep the values on the cast (spills)
    assert int8_parts_by_trick(True, 4, 128) == (True, False)
    assert int8_parts_by_trick(True, 66, 128) == (True, False)
    # B=1 at 8K: 64-key tiles, split: both
    assert int8_parts_by_trick(True, 66, 64) == (True, True)
    # prefill: keys only; an explicit choice wins over the rule
    assert int8_parts_by_trick(False, 1, 64) == (True, False)
    assert int8_parts_by_trick(False, 1, 64, values=True) == (True, True)
    assert int8_parts_by_trick(True, 1, 128, values=False) == (True, False)
