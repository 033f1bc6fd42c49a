"""Which caches to compare: every kvlab scheme, and both int8 roundings.

A *variant* is a scheme name plus the rounding its int8 store uses. The list is read from the scheme
registry each time it is asked for, so schemes added to kvlab later appear without a change here.
The baseline of every comparison is the unquantized cache in the model's own dtype (``auto``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch

from kvlab.quantization import schemes as scheme_registry
from kvlab.quantization.per_token_head import ROUNDINGS
from kvlab.quantization.schemes import KVCacheScheme, get_scheme
from kvlab.validation import require_choice

#: The unquantized cache every variant is compared with.
BASELINE_SCHEME = "auto"


@dataclass(frozen=True)
class CacheVariant:
    """A kv-cache dtype name and the rounding of its int8 store (``"truncate"`` is vLLM's)."""

    scheme: str
    rounding: str = "nearest"

    def __post_init__(self) -> None:
        get_scheme(self.scheme)  # unknown names raise, listing the valid ones
        require_choice(self.rounding, ROUNDINGS, "rounding")

    @property
    def label(self) -> str:
        """``"int8_per_token_head (truncate)"``; plain scheme name when rounding does not apply."""
        return f"{self.scheme} ({self.rounding})" if has_rounding_choice(self.scheme) else self.scheme

    def resolved(self, model_dtype: torch.dtype) -> KVCacheScheme:
        """The scheme for a model computing in ``model_dtype``."""
        return get_scheme(self.scheme, model_dtype)

    def computation_key(self, model_dtype: torch.dtype) -> tuple:
        """Two variants with equal keys store identical codes (``fp8`` and ``fp8_e4m3``)."""
        s = self.resolved(model_dtype)
        rounding = self.rounding if has_rounding_choice(self.scheme) else "nearest"
        return (type(s).__name__, rounding, *(getattr(s, f.name) for f in fields(s) if f.name != "name"))


def has_rounding_choice(scheme: str) -> bool:
    """True for int8 per-token-head storage, where truncation and nearest rounding differ."""
    s = get_scheme(scheme)
    return s.mode.is_per_token_head and s.storage_dtype == torch.int8


def scheme_names() -> tuple[str, ...]:
    """Every scheme name the registry knows now."""
    return tuple(scheme_registry.SCHEME_NAMES)


def fits_head(scheme: str, head_size: int, block_size: int = 16) -> bool:
    """False for a scheme whose layout cannot hold this head (a KIVI group wider than the head)."""
    s = get_scheme(scheme)
    check = getattr(s, "check_shape", None)
    if check is None:
        return True
    try:
        check(head_size, head_size, block_size)
    except ValueError:
        return False
    return True


def all_variants(head_size: int | None = None, block_size: int = 16) -> list[CacheVariant]:
    """Every scheme of the registry; int8 per-token-head schemes twice (truncate, then nearest).

    With ``head_size``, schemes whose layout does not fit that head are left out.
    """
    out = []
    for name in scheme_names():
        if head_size is not None and not fits_head(name, head_size, block_size):
            continue
        if has_rounding_choice(name):
            out.extend(CacheVariant(name, r) for r in ("truncate", "nearest"))
        else:
            out.append(CacheVariant(name))
    return out


def parse_variants(names: list[str] | None, rounding: str | None = None,
                   head_size: int | None = None) -> list[CacheVariant]:
    """Variants for the given names (all that fit ``head_size`` when ``names`` is empty or None).

    ``rounding`` fixes the int8 rounding; by default both roundings of int8 schemes are listed.
    """
    if not names:
        return [v for v in all_variants(head_size)
                if rounding is None or v.rounding == rounding or not has_rounding_choice(v.scheme)]
    out = []
    for name in names:
        name = name.strip().lower()
        if name not in scheme_names():
            raise ValueError(f"unknown kv_cache_dtype {name!r}; valid names are: {', '.join(scheme_names())}")
        if has_rounding_choice(name):
            out.extend(CacheVariant(name, r) for r in ((rounding,) if rounding else ("truncate", "nearest")))
        else:
            out.append(CacheVariant(name))
    return out
