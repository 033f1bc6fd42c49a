"""The outcome of one exercise check: passed or not, and a message written for the learner.

A :class:`CheckResult` prints as plain text (tests, terminals) and renders as a green or red box when
it is the last expression of a notebook cell.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

#: What a check can report: every case agreed; an answer differed; the learner's code raised; it
#: ran past the time limit; it is still the untouched stub; the run was interrupted.
STATUSES = ("passed", "failed", "error", "timeout", "not_written", "interrupted")

_PASS_STYLE = "border-left:4px solid #2e7d32;background:#edf7ed;color:#1b3d1d"
_FAIL_STYLE = "border-left:4px solid #c62828;background:#fdecea;color:#4a1414"


@dataclass(frozen=True)
class CheckResult:
    """What a check found.

    Attributes:
        name: the learner's function (or kernel, or class) that was checked.
        passed: True when every case agreed with kvlab.
        message: one line saying what was verified (pass), or the first failing case with its inputs,
            the expected and the received value (fail).
        status: one of :data:`STATUSES` (default ``passed`` or ``failed`` from ``passed``).
        case: the label of the case the report names (empty when none is named).
    """

    name: str
    passed: bool
    message: str
    status: str = ""
    case: str = ""

    def __post_init__(self) -> None:
        if not self.status:
            object.__setattr__(self, "status", "passed" if self.passed else "failed")
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}; got {self.status!r}")

    def __str__(self) -> str:
        return self.message

    def __repr__(self) -> str:
        return self.message

    def _repr_html_(self) -> str:
        style = _PASS_STYLE if self.passed else _FAIL_STYLE
        body = html.escape(self.message)
        return (
            f'<pre style="{style};padding:8px 12px;border-radius:4px;white-space:pre-wrap;'
            f'font-size:13px;margin:4px 0">{body}</pre>'
        )
