"""Error measures used across kvlab's tests, benchmarks and widgets."""

from __future__ import annotations

import torch


def relative_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    """``‖out − ref‖₂ / ‖ref‖₂`` over all elements, computed in float64.

    Returns ``inf`` if ``out`` holds NaN/Inf (an unwritten or poisoned output never passes), and the
    absolute norm of the difference when ``ref`` is all zeros.
    """
    if out.shape != ref.shape:
        raise ValueError(f"out and ref must have one shape, got {tuple(out.shape)} and {tuple(ref.shape)}")
    o = out.detach().to(torch.float64)
    r = ref.detach().to(device=o.device, dtype=torch.float64)
    if not bool(torch.isfinite(o).all()):
        return float("inf")
    denom = torch.linalg.vector_norm(r)
    diff = torch.linalg.vector_norm(o - r)
    return float(diff / denom) if denom > 0 else float(diff)
