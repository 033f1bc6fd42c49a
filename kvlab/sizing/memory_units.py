"""Parse memory sizes written as people write them: ``11.54GiB``, ``16GB``, ``12e9``, ``512 MiB``."""

from __future__ import annotations

import math
import re

#: Bytes per unit. Binary units (KiB…TiB) are powers of 1024, decimal ones (KB…TB) powers of 1000.
UNITS: dict[str, int] = {
    "": 1,
    "b": 1,
    "kb": 10**3,
    "mb": 10**6,
    "gb": 10**9,
    "tb": 10**12,
    "kib": 2**10,
    "mib": 2**20,
    "gib": 2**30,
    "tib": 2**40,
}

_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


def parse_memory(text: str | int | float, name: str = "kv_cache_memory") -> int:
    """Bytes in a memory size.

    Accepts an integer number of bytes, a float such as ``12e9``, or a string with an optional unit
    (``B``, ``KB``, ``MB``, ``GB``, ``TB``, ``KiB``, ``MiB``, ``GiB``, ``TiB``; case-insensitive).
    Fractions of a byte are rounded down.

    Raises:
        ValueError: naming ``name`` for anything else, or a size that is not positive.
    """
    if isinstance(text, bool):
        raise ValueError(f"{name} must be a size such as 16GiB, 12e9 or 16GB; got {text!r}")
    if isinstance(text, (int, float)):
        value, unit = float(text), ""
    elif isinstance(text, str):
        match = _PATTERN.match(text)
        if not match or match.group(2).lower() not in UNITS:
            raise ValueError(
                f"{name} must be a number with an optional unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB), "
                f"such as 16GiB, 11.54GiB, 12e9 or 16GB; got {text!r}"
            )
        value, unit = float(match.group(1)), match.group(2).lower()
    else:
        raise ValueError(f"{name} must be a string or a number of bytes, got {type(text).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be positive and finite, got {text!r}")
    size = int(value * UNITS[unit])
    if size <= 0:
        raise ValueError(f"{name} must be at least 1 byte, got {text!r}")
    return size


def format_gib(num_bytes: int) -> str:
    """``num_bytes`` as GiB with two decimals, e.g. ``"16.00 GiB"``."""
    return f"{num_bytes / 2**30:.2f} GiB"
