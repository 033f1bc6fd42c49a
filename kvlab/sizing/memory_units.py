"""Parse memory sizes and token counts written as people write them.

Memory: ``11.54GiB``, ``16GB``, ``12e9``, ``512 MiB``, and vLLM's one-letter suffixes (``16G``).
Token counts: vLLM's ``--max-model-len`` spelling, ``32k`` (32,000) and ``1M`` (1,048,576).
"""

from __future__ import annotations

import math
import re

#: Bytes per unit (case-insensitive). Binary units (KiB…TiB) are powers of 1024, decimal ones
#: (KB…TB) powers of 1000.
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

#: vLLM's one-letter suffixes, case-sensitive as vLLM reads them: lower case is decimal
#: (``32k`` = 32,000), upper case binary (``32K`` = 32,768).
LETTER_SUFFIXES: dict[str, int] = {
    "k": 10**3,
    "m": 10**6,
    "g": 10**9,
    "t": 10**12,
    "K": 2**10,
    "M": 2**20,
    "G": 2**30,
    "T": 2**40,
}

#: A bare number of bytes below this is almost surely a forgotten unit (``20`` meant 20 GiB).
SMALLEST_BARE_BYTES = 2**20

_PATTERN = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")
_UNIT_LIST = "B, KB, MB, GB, TB, KiB, MiB, GiB, TiB, or vLLM's k, K, M, G"


def _multiplier(unit: str) -> int | None:
    """Bytes per ``unit`` (``None`` if unknown): one letter as vLLM reads it, else case-insensitive."""
    if unit in LETTER_SUFFIXES:
        return LETTER_SUFFIXES[unit]
    return UNITS.get(unit.lower())


def parse_memory(text: str | int | float, name: str = "kv_cache_memory") -> int:
    """Bytes in a memory size.

    Accepts an integer number of bytes, a float such as ``12e9``, or a string with a unit
    (``B``, ``KB``, ``MB``, ``GB``, ``TB``, ``KiB``, ``MiB``, ``GiB``, ``TiB``, case-insensitive; or
    vLLM's one-letter ``k``/``m``/``g`` = 10³/10⁶/10⁹ and ``K``/``M``/``G`` = 2¹⁰/2²⁰/2³⁰). Fractions
    of a byte are rounded down. A string without a unit is bytes, and must be at least 1 MiB: ``"20"``
    is refused rather than read as 20 bytes (write ``20GiB``, or ``20B`` if bytes are meant).

    Raises:
        ValueError: naming ``name`` for anything else, or a size that is not positive.
    """
    if isinstance(text, bool):
        raise ValueError(f"{name} must be a size such as 16GiB, 12e9 or 16GB; got {text!r}")
    if isinstance(text, (int, float)):
        value, factor = float(text), 1
    elif isinstance(text, str):
        match = _PATTERN.match(text)
        factor = _multiplier(match.group(2)) if match else None
        if factor is None:
            raise ValueError(
                f"{name} must be a number with an optional unit ({_UNIT_LIST}), "
                f"such as 16GiB, 11.54GiB, 12e9 or 16GB; got {text!r}"
            )
        value = float(match.group(1))
        if not match.group(2) and 0 < value < SMALLEST_BARE_BYTES:
            raise ValueError(
                f"{name}={text.strip()} has no unit, so it would mean {text.strip()} bytes; write the unit, "
                f"e.g. {text.strip()}GiB or {text.strip()}GB (units: {_UNIT_LIST}; a number without a "
                f"unit is bytes and must be at least {SMALLEST_BARE_BYTES:,})"
            )
    else:
        raise ValueError(f"{name} must be a string or a number of bytes, got {type(text).__name__}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be positive and finite, got {text!r}")
    size = int(value * factor)
    if size <= 0:
        raise ValueError(f"{name} must be at least 1 byte, got {text!r}")
    return size


_COUNT_PATTERN = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([kmgtKMGT]?)$")


def parse_token_count(text: str | int, name: str = "max_model_len") -> int:
    """Tokens in a length written as vLLM's ``--max-model-len`` reads it.

    ``"32768"``; ``"32k"`` = 32,000 and ``"25.6k"`` = 25,600 (lower case: powers of 1000);
    ``"32K"`` = 32,768 and ``"1M"`` = 1,048,576 (upper case: powers of 1024, whole numbers only).
    The result is not range-checked (``-1`` is passed through as an int; callers check the range).

    Raises:
        ValueError: naming ``name``, for anything else or a length that is not a whole token count.
    """
    if isinstance(text, bool) or not isinstance(text, (int, str)):
        raise ValueError(f"{name} must be a whole number of tokens, got {text!r}")
    if isinstance(text, int):
        return text
    stripped = text.strip()
    if re.fullmatch(r"-?[0-9]+", stripped):
        return int(stripped)
    match = _COUNT_PATTERN.match(stripped)
    if not match or (match.group(2).isupper() and "." in match.group(1)) or not match.group(2):
        raise ValueError(
            f"{name} must be a whole number of tokens such as 32768, 32k (= 32,000), 25.6k (= 25,600) or "
            f"32K (= 32,768; upper-case suffixes are powers of 1024 and take whole numbers); got {text!r}"
        )
    number, suffix = match.groups()
    tokens = float(number) * LETTER_SUFFIXES[suffix]
    if tokens != int(tokens):
        raise ValueError(f"{name}={text!r} is {tokens:g} tokens, not a whole number")
    return int(tokens)


def format_gib(num_bytes: int) -> str:
    """``num_bytes`` as GiB with two decimals, e.g. ``"16.00 GiB"``; sizes below 0.01 GiB in MiB,
    KiB or bytes (``"1 B"``), so that a small size never prints as ``0.00 GiB``."""
    size = max(int(num_bytes), 0)
    if size >= 2**30 / 100:
        return f"{size / 2**30:.2f} GiB"
    if size >= 2**20 / 100:
        return f"{size / 2**20:.2f} MiB"
    if size >= 2**10:
        return f"{size / 2**10:.2f} KiB"
    return f"{size} B"
