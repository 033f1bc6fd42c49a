"""Checks of what users feed the model: texts, prompts, token counts, windows."""

from __future__ import annotations

from pathlib import Path

from kvlab.validation import require_positive_int


def read_text_file(path: str | Path) -> str:
    """The UTF-8 text of ``path``; one clear error when it is missing, not UTF-8 or empty."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"text file {str(p)!r} does not exist")
    try:
        text = p.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"text file {str(p)!r} is not valid UTF-8 (byte {exc.start}); "
                         "save it as UTF-8 text") from None
    return require_text(text, f"text file {str(p)!r}")


def require_text(text: object, what: str = "text") -> str:
    """``text`` if it is a non-blank string."""
    if not isinstance(text, str):
        raise ValueError(f"{what} must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError(f"{what} is empty; give at least a few words of text")
    return text


def require_fits_context(num_tokens: int, context_length: int, what: str = "the text") -> None:
    """Raise when ``num_tokens`` exceed the model's context."""
    if num_tokens > context_length:
        raise ValueError(f"{what} is {num_tokens} tokens long, longer than the model's context of "
                         f"{context_length} tokens; shorten it (the CLI's --max-tokens scores a prefix)")


def require_window(sliding_window: int | None) -> int | None:
    """``None`` (full attention) or a window of at least one token."""
    if sliding_window is None:
        return None
    if isinstance(sliding_window, bool) or not isinstance(sliding_window, int) or sliding_window < 1:
        raise ValueError(f"window must be an integer >= 1 (tokens) or None for full attention, "
                         f"got {sliding_window!r}")
    return sliding_window


def require_max_tokens(value: int) -> int:
    """A token budget of at least 2 (one token to predict from another)."""
    return require_positive_int(value, "max_tokens", minimum=2)
