"""Comparisons between kvlab's answer and the learner's, each returning ``None`` when they agree or a
short text naming the first difference (``scales[0, 1]: expected 1e-06, got 0``).
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import torch

from kvlab.exercises.report import describe, format_number


def as_python(value: Any) -> Any:
    """Plain Python form of a learner's answer: 0-d tensors and NumPy scalars become numbers,
    1-d tensors and tuples become lists (so ``(1, 2)``, ``[1, 2]`` and ``tensor([1, 2])`` compare equal).
    """
    if isinstance(value, torch.Tensor):
        return value.item() if value.dim() == 0 else [as_python(v) for v in value]
    if isinstance(value, (list, tuple)):
        return [as_python(v) for v in value]
    if hasattr(value, "item") and callable(value.item) and not isinstance(value, (int, float, str)):
        try:
            return value.item()  # NumPy scalars
        except (TypeError, ValueError):
            return value
    return value


def _index_text(index: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in index) + "]"


def same_int(expected: int, got: Any, what: str) -> str | None:
    """Exact integer comparison (a float such as ``4096.0`` is accepted only if it is integral)."""
    value = as_python(got)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"{what} must be an integer, got {describe(got)} ({type(got).__name__})"
    if isinstance(value, float) and not value.is_integer():
        return f"{what}: expected {expected}, got {format_number(value)} (not a whole number)"
    if int(value) != expected:
        return f"{what}: expected {expected}, got {int(value)} (off by {int(value) - expected:+d})"
    return None


def close_float(
    expected: float, got: Any, what: str, rel_tol: float = 1e-6, abs_tol: float = 1e-12
) -> str | None:
    """Float comparison with a relative tolerance (an absolute one near zero)."""
    value = as_python(got)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return f"{what} must be a number, got {describe(got)} ({type(got).__name__})"
    value = float(value)
    if math.isnan(value) or not math.isclose(value, expected, rel_tol=rel_tol, abs_tol=abs_tol):
        return f"{what}: expected {format_number(expected)}, got {format_number(value)}"
    return None


def same_list(expected: list[Any], got: Any, what: str) -> str | None:
    """Exact comparison of two sequences, reporting the length or the first differing position."""
    value = as_python(got)
    if not isinstance(value, list):
        return f"{what} must be a list, got {describe(got)} ({type(got).__name__})"
    if len(value) != len(expected):
        return (f"{what} has {len(value)} entries, expected {len(expected)}\n"
                f"  expected: {describe(expected)}\n  got:      {describe(value)}")
    diffs = [i for i, (e, g) in enumerate(zip(expected, value, strict=True)) if e != g]
    if diffs:
        i = diffs[0]
        more = f" ({len(diffs)} of {len(expected)} entries differ)" if len(diffs) > 1 else ""
        return (f"{what}[{i}]: expected {describe(expected[i])}, got {describe(value[i])}{more}\n"
                f"  expected: {describe(expected)}\n  got:      {describe(value)}")
    return None


def tensor_shape_dtype(
    expected: torch.Tensor, got: Any, what: str, check_dtype: bool = True
) -> str | None:
    """Check that ``got`` is a tensor of the expected shape (and dtype)."""
    if not isinstance(got, torch.Tensor):
        return f"{what} must be a torch.Tensor, got {type(got).__name__}"
    if tuple(got.shape) != tuple(expected.shape):
        return f"{what} must have shape {tuple(expected.shape)}, got {tuple(got.shape)}"
    if check_dtype and got.dtype != expected.dtype:
        return f"{what} must be a {expected.dtype} tensor, got {got.dtype}"
    return None


def same_tensor(expected: torch.Tensor, got: Any, what: str, check_dtype: bool = True) -> str | None:
    """Bit-exact comparison (NaN equals NaN), naming the first differing element."""
    problem = tensor_shape_dtype(expected, got, what, check_dtype)
    if problem:
        return problem
    e = expected.detach().cpu()
    g = got.detach().cpu().to(e.dtype)
    if e.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        e, g = e.float(), g.float()
    differ = e != g
    if e.dtype.is_floating_point:
        differ &= ~(torch.isnan(e) & torch.isnan(g))
    return _first_difference(e, g, differ, what)


def close_tensor(
    expected: torch.Tensor, got: Any, what: str, rtol: float, atol: float, check_dtype: bool = False
) -> str | None:
    """``|got − expected| <= atol + rtol·|expected|`` elementwise; NaN in ``got`` always differs."""
    problem = tensor_shape_dtype(expected, got, what, check_dtype)
    if problem:
        return problem
    e = expected.detach().cpu().double()
    g = got.detach().cpu().double()
    differ = ~(torch.abs(g - e) <= atol + rtol * torch.abs(e))
    return _first_difference(e, g, differ, what, tolerance=f" (tolerance {atol:g} + {rtol:g}·|expected|)")


def _first_difference(
    e: torch.Tensor, g: torch.Tensor, differ: torch.Tensor, what: str, tolerance: str = ""
) -> str | None:
    count = int(differ.sum())
    if not count:
        return None
    index = tuple(int(i) for i in torch.nonzero(differ)[0].tolist())
    ev, gv = e[index].item(), g[index].item()
    where = _index_text(index) if index else ""
    of = f" ({count} of {e.numel()} elements differ)" if e.numel() > 1 else ""
    return f"{what}{where}: expected {format_number(ev)}, got {format_number(gv)}{tolerance}{of}"
