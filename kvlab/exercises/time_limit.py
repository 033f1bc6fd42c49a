"""A time limit for each checked case, so that an endless loop in the learner's code ends with a
one-line report instead of a hung kernel.

The limit is an interval timer (``SIGALRM``): when it fires, :class:`CaseTimeout` is raised inside
whatever Python code is running, the learner's loop included. It derives from ``BaseException`` so
that a learner's ``except Exception`` cannot swallow it. Where no such timer exists (Windows, or a
check run outside the main thread) cases run without a limit.

The limit is :data:`DEFAULT_SECONDS`, or the ``KVLAB_CASE_TIME_LIMIT`` environment variable (seconds;
``0`` turns the limit off), or whatever :func:`set_time_limit` set last.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: Seconds one case may take when nothing else is configured.
DEFAULT_SECONDS = 10.0
ENV_VAR = "KVLAB_CASE_TIME_LIMIT"

_configured: float | None = None


class CaseTimeout(BaseException):
    """The case ran past its time limit."""


def set_time_limit(seconds: float | None) -> None:
    """Set the time limit per case (seconds; ``0`` = no limit; ``None`` = back to the default)."""
    global _configured
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not seconds >= 0):
        raise ValueError(f"the time limit must be a number of seconds >= 0 (0 = none), got {seconds!r}")
    _configured = None if seconds is None else float(seconds)


def time_limit_seconds() -> float:
    """The time limit per case now in force (seconds; 0 = none)."""
    if _configured is not None:
        return _configured
    text = os.environ.get(ENV_VAR)
    if text:
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"{ENV_VAR} must be a number of seconds (0 = no limit), got {text!r}") from None
        if value >= 0:
            return value
    return DEFAULT_SECONDS


def _can_interrupt() -> bool:
    return hasattr(signal, "setitimer") and threading.current_thread() is threading.main_thread()


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Raise :class:`CaseTimeout` in the body if it runs longer than ``seconds`` (0: no limit)."""
    if seconds <= 0 or not _can_interrupt():
        yield
        return

    def expire(signum, frame):  # noqa: ARG001 - the signal handler's signature
        raise CaseTimeout

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
