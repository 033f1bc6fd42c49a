"""Choosing how Triton runs: compiled for an NVIDIA GPU, or in its interpreter on CPU tensors.

Triton reads ``TRITON_INTERPRET`` once, when it is imported (``@triton.jit`` helpers in its standard
library are wrapped at import time). So the choice has to be made *before* the first
``import triton`` anywhere in the process: this module makes it, and every kernel module imports
Triton through it.
"""

from __future__ import annotations

import os
import sys

import torch

#: Set ``KVLAB_TRITON=interpret`` to force the interpreter even where a GPU is present.
_FORCE_ENV = "KVLAB_TRITON"


def _want_interpreter() -> bool:
    if os.environ.get(_FORCE_ENV, "").lower() == "interpret":
        return True
    if os.environ.get("TRITON_INTERPRET", "0") not in ("", "0"):
        return True
    return not torch.cuda.is_available()


def _import_triton():
    interpret = _want_interpreter()
    if interpret:
        if "triton" in sys.modules and os.environ.get("TRITON_INTERPRET", "0") in ("", "0"):
            raise RuntimeError(
                "triton was imported before kvlab could switch it to interpreter mode (no GPU here). "
                "Import kvlab.kernels before triton, or set TRITON_INTERPRET=1 before starting Python."
            )
        os.environ["TRITON_INTERPRET"] = "1"
    try:
        import triton  # noqa: F401  (imported for its side effect: reading TRITON_INTERPRET)
        import triton.language  # noqa: F401
    except ImportError as exc:  # macOS, Windows, or not installed
        raise ImportError(
            "Triton is not installed (it ships wheels for Linux x86_64 only); the reference attention "
            "and everything else in kvlab work without it"
        ) from exc
    return triton, interpret


triton, INTERPRET = _import_triton()
tl = triton.language


def mode() -> str:
    """``"interpreter"`` (CPU tensors) or ``"compiled"`` (NVIDIA GPU)."""
    return "interpreter" if INTERPRET else "compiled"


def kernel_device() -> torch.device:
    """Where kernel inputs must live: ``cpu`` in the interpreter, ``cuda`` when compiled."""
    return torch.device("cpu" if INTERPRET else "cuda")
