"""argparse types for sizes and lengths, read the way vLLM and Hugging Face write them."""

from __future__ import annotations

import argparse

from kvlab.sizing.memory_units import parse_token_count


def token_count(text: str) -> int:
    """A token count: ``32768``, ``32k`` (32,000), ``1M`` (1,048,576); ``-1`` passes through."""
    try:
        return parse_token_count(text, "value")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"invalid int value {text!r}: {exc}") from None


def max_model_len(text: str) -> int:
    """``--max-model-len``: a token count, or ``-1`` / ``auto`` for the longest length that fits."""
    if text.strip().lower() == "auto":
        return -1
    return token_count(text)
