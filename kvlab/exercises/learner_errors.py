"""Exceptions raised by the learner's code, located at the learner's own line.

A check reports ``your code raised IndexError: ... at line 7 in f: y = x[i]`` rather than a traceback
through kvlab; these helpers find that line (the innermost frame outside kvlab, the standard library
and installed packages).
"""

from __future__ import annotations

import os
import sys
import sysconfig
import traceback
from collections.abc import Callable
from typing import Any


class LearnerError(Exception):
    """The learner's code raised ``error``.

    Attributes:
        error: the exception.
        where: the line of the learner's code that raised (``line 7 in f: y = x / s``), when known.
        function: the learner's function that raised, when known.
    """

    def __init__(self, error: BaseException, where: str | None, function: str | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.where = where
        self.function = function


def _library_dirs() -> tuple[str, ...]:
    import kvlab

    dirs = {os.path.dirname(os.path.abspath(kvlab.__file__))}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.abspath(path))
    dirs.add(os.path.abspath(sys.prefix))
    return tuple(sorted(dirs))


def _learner_frame(error: BaseException) -> traceback.FrameSummary | None:
    """The innermost traceback frame outside kvlab, the standard library and installed packages."""
    skip = _library_dirs()
    found = None
    for frame in traceback.extract_tb(error.__traceback__):
        if os.path.abspath(frame.filename).startswith(skip) or frame.filename.startswith("<frozen"):
            continue
        found = frame
    return found


def learner_error(error: BaseException) -> LearnerError:
    """Wrap an exception raised by the learner's code, locating the line that raised it."""
    frame = _learner_frame(error)
    if frame is None:
        return LearnerError(error, None)
    code = (frame.line or "").strip()
    where = f"line {frame.lineno} in {frame.name}" + (f": {code}" if code else "")
    return LearnerError(error, where, frame.name)


def call_learner(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call the learner's code; any exception it raises becomes a :class:`LearnerError`."""
    try:
        return fn(*args, **kwargs)
    except Exception as error:  # the learner's bug, reported as a failed check
        raise learner_error(error) from None
