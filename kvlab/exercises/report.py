"""Short, readable descriptions of the values a check shows the learner (inputs, expected, got).

Small values are shown in full; tensors and long lists are summarised (shape, dtype, range) so that a
failure report stays a few lines long.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

#: Tensors with at most this many elements are printed in full.
FULL_TENSOR_ELEMENTS = 24
#: Lists and tuples with at most this many items are printed in full.
FULL_SEQUENCE_ITEMS = 16
#: Longest single description, in characters.
MAX_CHARS = 400


def format_number(x: float) -> str:
    """A float with enough digits to see a difference, without noise (``0.1234567``, ``1e-06``)."""
    if isinstance(x, bool) or not isinstance(x, float):
        return repr(x)
    if math.isnan(x) or math.isinf(x):
        return repr(x)
    return f"{x:.7g}"


def _format_nested(values: Any) -> str:
    if isinstance(values, list):
        return "[" + ", ".join(_format_nested(v) for v in values) + "]"
    return format_number(values)


def describe_tensor(t: torch.Tensor) -> str:
    """``float32 tensor (2, 3) [[...]]`` in full when small, else shape, dtype and value range."""
    dtype = str(t.dtype).removeprefix("torch.")
    shape = tuple(t.shape)
    if t.numel() <= FULL_TENSOR_ELEMENTS:
        values = t.detach().cpu()
        if values.dtype in (torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float16):
            values = values.float()
        return f"{dtype} tensor {shape} {_format_nested(values.tolist())}"
    flat = t.detach().cpu().reshape(-1)
    if flat.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        flat = flat.float()
    if flat.dtype.is_floating_point:
        finite = flat[torch.isfinite(flat)]
        bad = flat.numel() - finite.numel()
        if finite.numel():
            span = f"values in [{format_number(float(finite.min()))}, {format_number(float(finite.max()))}]"
        else:
            span = "no finite values"
        extra = f", {bad} NaN/Inf" if bad else ""
        return f"{dtype} tensor of shape {shape}, {span}{extra}"
    return f"{dtype} tensor of shape {shape}, values in [{int(flat.min())}, {int(flat.max())}]"


def describe(value: Any) -> str:
    """One-line description of any value a check passes to or gets from the learner."""
    if isinstance(value, torch.Tensor):
        text = describe_tensor(value)
    elif isinstance(value, Mapping):
        text = "{" + ", ".join(f"{k!r}: {describe(v)}" for k, v in value.items()) + "}"
    elif isinstance(value, (list, tuple)):
        text = _describe_sequence(value)
    elif isinstance(value, float):
        text = format_number(value)
    else:
        text = repr(value)
    if len(text) > MAX_CHARS:
        text = text[: MAX_CHARS - 5] + " ...]"
    return text


def _describe_sequence(value: Sequence[Any]) -> str:
    open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
    items = list(value)
    if len(items) <= FULL_SEQUENCE_ITEMS:
        inner = ", ".join(describe(v) for v in items)
        if isinstance(value, tuple) and len(items) == 1:
            inner += ","
        return open_ + inner + close
    head = ", ".join(describe(v) for v in items[:8])
    tail = ", ".join(describe(v) for v in items[-4:])
    return f"{open_}{head}, ..., {tail}{close} ({len(items)} items)"


def describe_inputs(args: Mapping[str, Any], shown: Mapping[str, str] | None = None) -> str:
    """``name = description`` lines, indented for a failure report; ``shown`` overrides some descriptions."""
    shown = shown or {}
    return "\n".join(f"    {name} = {shown.get(name) or describe(value)}" for name, value in args.items())
