"""Fixtures of the kernel tests: where they run, and the tolerances they are held to.

Every kernel test runs twice, as two parametrisations of the ``target`` fixture:

* ``interp`` (marked ``interpreter``): Triton's interpreter on CPU tensors, small shapes. Runs when
  ``kvlab.kernels`` is in interpreter mode (no GPU, or ``KVLAB_TRITON=interpret``).
* ``gpu`` (marked ``gpu``): compiled on an NVIDIA GPU, larger shapes. Skipped without a GPU.

Triton picks its mode once per process, so one pytest run executes one of the two.

Tolerances, both relative errors ``‖out − ref‖ / ‖ref‖``:

* against the float64 reference on the *dequantized* cache, only the kernel's own arithmetic
  remains: it rounds ``p`` (times the V scale) to the dot dtype and the result to the query dtype,
  two roundings of unit roundoff ``u`` each, whose relative RMS adds up to about ``1.2 u``;
  :func:`kernel_tolerance` allows ``2 (u_dot + u_out)`` plus ``1e-5`` for fp32's exp2/division;
* against the *unquantized* truth, the scheme's rounding of K and V adds an error of the order of one
  element's relative rounding error (a V error passes straight into the output);
  :func:`scheme_tolerance` bounds it by twice that RMS, derived from the scheme's code range or
  mantissa width.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest
import torch

pytest.importorskip("kvlab.kernels", reason="Triton is not installed (Linux x86_64 only)")

from kvlab.cache.example import build_paged_example  # noqa: E402
from kvlab.kernels import INTERPRET  # noqa: E402
from kvlab.quantization import get_scheme  # noqa: E402
from kvlab.quantization.schemes import QuantMode  # noqa: E402


@dataclass(frozen=True)
class Target:
    """Where a kernel test runs: ``device`` for the tensors, ``large`` for GPU-sized shapes."""

    name: str
    device: torch.device
    large: bool


@pytest.fixture(
    params=[
        pytest.param("interpreter", marks=pytest.mark.interpreter, id="interp"),
        pytest.param("gpu", marks=pytest.mark.gpu, id="gpu"),
    ]
)
def target(request) -> Target:
    if request.param == "interpreter":
        if not INTERPRET:
            pytest.skip("Triton runs compiled in this process; KVLAB_TRITON=interpret runs these tests")
        return Target("interpreter", torch.device("cpu"), large=False)
    if INTERPRET:
        pytest.skip("needs an NVIDIA GPU (Triton runs in its interpreter here)")
    return Target("gpu", torch.device("cuda"), large=True)


#: Unit roundoff (half the spacing at 1) of the dtypes the kernels round to.
UNIT_ROUNDOFF = {torch.bfloat16: 2.0**-9, torch.float16: 2.0**-12, torch.float32: 2.0**-24}


def p_dtype(query_dtype: torch.dtype, scheme_name: str, kv_dtype: torch.dtype = torch.bfloat16
            ) -> torch.dtype:
    """The dtype the kernel rounds ``p`` (times the V scale) to before the PV dot: the query dtype,
    unless the query or the cache is fp32 (mirrors the kernel's documented rule)."""
    sch = get_scheme(scheme_name, kv_dtype)
    if query_dtype == torch.float32 or sch.storage_dtype == torch.float32:
        return torch.float32
    return query_dtype


def kernel_tolerance(query_dtype: torch.dtype, scheme_name: str, kv_dtype: torch.dtype = torch.bfloat16
                     ) -> float:
    """Relative error allowed against the float64 reference on the dequantized cache."""
    u_dot = UNIT_ROUNDOFF[p_dtype(query_dtype, scheme_name, kv_dtype)]
    u_out = UNIT_ROUNDOFF[query_dtype]
    return 2.0 * (u_dot + u_out) + 1e-5


#: Largest |x| / σ expected in one head vector of N(0, 1) data (D <= 512): sets the int8 step.
_ABSMAX_SIGMAS = 4.5


def scheme_tolerance(scheme_name: str, rounding: str = "nearest", kv_dtype: torch.dtype = torch.bfloat16
                     ) -> float:
    """Relative error the scheme itself may add against the unquantized truth, for N(0, 1) K/V."""
    sch = get_scheme(scheme_name, kv_dtype)
    if sch.mode == QuantMode.NONE:
        if sch.storage_dtype == kv_dtype or sch.storage_dtype == torch.float32:
            return 0.0
        return 2.0 * UNIT_ROUNDOFF[sch.storage_dtype]
    if sch.mode == QuantMode.INT8_PER_TOKEN_HEAD:
        step = _ABSMAX_SIGMAS / sch.qmax  # one code step, in units of σ
        rms = step / math.sqrt(12.0) if rounding == "nearest" else step / math.sqrt(3.0)
        return 2.0 * rms
    # fp8: relative rounding error of a normal value is at most 2**-(mantissa bits + 1)
    mant = round(-math.log2(torch.finfo(sch.storage_dtype).eps))
    return 2.0 * 2.0 ** -(mant + 1) / math.sqrt(3.0)


@pytest.fixture
def tolerances():
    """``(kernel_tolerance, scheme_tolerance)`` for the tests."""
    return kernel_tolerance, scheme_tolerance


def small_example(target: Target, seed: int, query_lens, seq_lens, scheme: str, **kw):
    """A small random batch over a fresh cache of ``scheme``: 8 query heads over 2 KV heads of 64, blocks
    of 16 tokens, on the target's device (the prefill-path tests' shape)."""
    return build_paged_example(query_lens, seq_lens, num_q_heads=8, num_kv_heads=2, head_size=64,
                               scheme=scheme, block_size=16, seed=seed, device=target.device, **kw)


def poisoned(shape, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """An output buffer full of NaN: any element a kernel forgets to write stays NaN."""
    return torch.full(shape, float("nan"), dtype=dtype, device=device)


@pytest.fixture
def make_poisoned():
    return poisoned

