"""Input checks shared by the public functions: each failure is one ``ValueError`` that names the
parameter, says what was wrong and what is allowed."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def require_tensor(x: object, name: str) -> torch.Tensor:
    """Return ``x`` if it is a tensor, else raise."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name} must be a torch.Tensor, got {type(x).__name__}")
    return x


def require_rank(x: torch.Tensor, rank: int, name: str, layout: str) -> None:
    """Raise unless ``x`` has ``rank`` dimensions; ``layout`` names them, e.g. ``[tokens, heads, dim]``."""
    require_tensor(x, name)
    if x.dim() != rank:
        raise ValueError(f"{name} must have {rank} dimensions {layout}, got shape {tuple(x.shape)}")


def require_float(x: torch.Tensor, name: str) -> None:
    """Raise unless ``x`` holds floating-point values (fp8 excluded)."""
    if x.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
        raise ValueError(f"{name} must be float16, bfloat16, float32 or float64, got {x.dtype}")


def require_finite(x: torch.Tensor, name: str) -> None:
    """Raise if ``x`` holds NaN or ±Inf, reporting how many and where the first one is.

    Quantizing a NaN or Inf would poison a whole scale (per token-head) or the whole cache (per
    tensor), so these are refused rather than stored.
    """
    if bool(torch.isfinite(x).all()):
        return  # the usual case, in one pass and no count
    bad = ~torch.isfinite(x)
    count = int(bad.sum())
    if count:
        first = tuple(int(i) for i in torch.nonzero(bad)[0].tolist())
        value = x[first].item()
        raise ValueError(
            f"{name} contains {count} non-finite value(s) (NaN or Inf); the first is {value} at index {first}"
        )


def require_int_tensor(x: torch.Tensor, name: str, rank: int, layout: str) -> None:
    """Raise unless ``x`` is an integer tensor of the given rank."""
    require_rank(x, rank, name, layout)
    if x.dtype not in (torch.int32, torch.int64):
        raise ValueError(f"{name} must be an int32 or int64 tensor, got {x.dtype}")


def require_choice(value: object, allowed: Sequence[object], name: str) -> None:
    """Raise unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")


def require_positive_int(value: object, name: str, minimum: int = 1) -> int:
    """Return ``value`` as int if it is an integer >= ``minimum``, else raise."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def require_positive_finite(value: object, name: str, unit: str = "") -> float:
    """Return ``value`` as float if it is a finite number > 0 (not a bool), else raise.

    ``unit`` (e.g. ``"tokens"``) is named in the message so that it says what is allowed.
    """
    what = f"a finite number > 0{f' ({unit})' if unit else ''}"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be {what}, got {value!r}")
    if not (value > 0 and value != float("inf")):  # NaN fails ``> 0``
        raise ValueError(f"{name} must be {what}, got {value!r}")
    return float(value)


def require_power_of_two(value: object, name: str, why: str) -> int:
    """Return ``value`` if it is an integer power of two (1, 2, 4, ...), else raise saying ``why``."""
    require_positive_int(value, name)
    if value & (value - 1):
        lower = 1 << (value.bit_length() - 1)
        raise ValueError(
            f"{name} must be a power of two ({why}), got {value}; the nearest are {lower} and {2 * lower}"
        )
    return value
