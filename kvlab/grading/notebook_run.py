"""Execute one submitted notebook with nbclient and run kvlab's checks on what it defined.

The student's cells run first, each under a wall-clock limit (a cell past it is interrupted), in a
fresh kernel whose address space is capped (``RLIMIT_AS``). Cells tagged ``check`` are left out: the
grader runs each exercise's checks itself, one cell per check, with a fixed seed, and reads the
result back as one JSON line. Every check cell also runs each checked case under the per-case time
limit of :mod:`kvlab.exercises.time_limit`, so a looping function is reported like in class.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import DeadKernelError

from kvlab.grading.submissions import Submission

#: Prefix of the line a check cell prints; the JSON object after it is the check's result.
MARKER = "KVLAB-GRADE-RESULT "

#: Status of a row: every case agreed; an answer differed (or the stub is untouched); the code
#: raised, the notebook could not be read or the kernel died; a time limit was hit.
ROW_STATUSES = ("passed", "failed", "error", "timeout")
_ROW_STATUS = {
    "passed": "passed",
    "failed": "failed",
    "not_written": "failed",
    "error": "error",
    "timeout": "timeout",
    "interrupted": "timeout",  # only the grader interrupts: a cell ran past its limit
}


@dataclass(frozen=True)
class GradeLimits:
    """Limits of one notebook's run.

    Attributes:
        cell_seconds: wall-clock seconds each cell may run before it is interrupted.
        case_seconds: seconds each checked case may run (0 = no limit).
        memory_bytes: the kernel's address-space limit (bytes).
        seed: seed of the checks' random cases, the same for every student.
        kernel_name: the Jupyter kernel to start.
    """

    cell_seconds: float = 300.0
    case_seconds: float = 10.0
    memory_bytes: int = 4 * 2**30
    seed: int = 0
    kernel_name: str = "python3"

    def __post_init__(self) -> None:
        if not self.cell_seconds > 0:
            raise ValueError(f"the time limit per cell must be > 0 seconds, got {self.cell_seconds!r}")
        if not self.case_seconds >= 0:
            raise ValueError(f"the time limit per case must be >= 0 seconds, got {self.case_seconds!r}")
        if self.memory_bytes < 256 * 2**20:
            raise ValueError(f"the memory limit must be at least 256 MiB, got {self.memory_bytes:,} bytes")


@dataclass(frozen=True)
class GradeRow:
    """One (student, exercise, check) result.

    Attributes:
        student, exercise, notebook: who, which exercise (its number) and the file graded.
        check: the learner's function the check verifies (e.g. ``quantize_int8``).
        status: one of :data:`ROW_STATUSES`.
        case: the case the report names (empty when it names none).
        message: the report, as the student would have seen it.
        seconds: wall-clock seconds the check's cell took.
    """

    student: str
    exercise: int
    notebook: str
    check: str
    status: str
    case: str
    message: str
    seconds: float


def _setup_source(limits: GradeLimits) -> str:
    return (
        "import resource as _kvlab_resource\n"
        f"_kvlab_limit = {limits.memory_bytes}\n"
        "_kvlab_resource.setrlimit(_kvlab_resource.RLIMIT_AS, (_kvlab_limit, _kvlab_limit))\n"
        "from kvlab.exercises.time_limit import set_time_limit as _kvlab_set_time_limit\n"
        f"_kvlab_set_time_limit({limits.case_seconds!r})\n"
    )


def _check_source(learner: str, check: str, seed: int) -> str:
    missing = (
        f"✗ {learner} is not defined: the notebook never defines it (or the cell that does raised an error)"
    )
    return (
        "import json as _kvlab_json\n"
        "import kvlab.exercises as _kvlab_exercises\n"
        f"if {learner!r} not in globals():\n"
        f"    _kvlab_result = {{'status': 'error', 'case': '', 'message': {missing!r}}}\n"
        "else:\n"
        f"    _kvlab_r = _kvlab_exercises.{check}(globals()[{learner!r}], seed={seed})\n"
        "    _kvlab_result = {'status': _kvlab_r.status, 'case': _kvlab_r.case,\n"
        "                     'message': _kvlab_r.message}\n"
        f"print({MARKER!r} + _kvlab_json.dumps(_kvlab_result))\n"
    )


def _is_check_cell(cell: nbformat.NotebookNode) -> bool:
    return "check" in cell.get("metadata", {}).get("tags", [])


def _read_result(cell: nbformat.NotebookNode) -> dict | None:
    """The JSON a check cell printed, or a description of the error it raised instead."""
    for output in cell.get("outputs", []):
        if output.get("output_type") == "stream":
            for line in output.get("text", "").splitlines():
                if line.startswith(MARKER):
                    return json.loads(line[len(MARKER) :])
    for output in cell.get("outputs", []):
        if output.get("output_type") == "error":
            return {
                "status": "error",
                "case": "",
                "message": f"the check could not run: {output.get('ename')}: {output.get('evalue')}",
            }
    return None


def _rows(sub: Submission, status: str, message: str, seconds: float = 0.0) -> list[GradeRow]:
    """The same outcome for every check of the exercise (an unreadable notebook, a dead kernel)."""
    return [
        GradeRow(sub.student, sub.exercise.number, str(sub.path), learner, status, "", message, seconds)
        for learner, _ in sub.exercise.checks
    ]


def grade_notebook(sub: Submission, limits: GradeLimits | None = None) -> list[GradeRow]:
    """Run one submission and its exercise's checks; one :class:`GradeRow` per check."""
    limits = limits or GradeLimits()
    try:
        student_nb = nbformat.read(sub.path, as_version=4)
    except Exception as error:  # not JSON, not a notebook, unreadable file
        reason = str(error).splitlines()[0] if str(error) else type(error).__name__
        return _rows(sub, "error", f"the notebook could not be read ({type(error).__name__}: {reason[:200]})")
    cells = [nbformat.v4.new_code_cell(_setup_source(limits))]
    kept = [
        (number, c)
        for number, c in enumerate(student_nb.cells, 1)
        if c.get("cell_type") == "code" and not _is_check_cell(c)
    ]
    cells += [c for _, c in kept]
    cell_number = {index: number for index, (number, _) in enumerate(kept, 1)}  # as the student counts
    first_check = len(cells)
    cells += [
        nbformat.v4.new_code_cell(_check_source(learner, check, limits.seed))
        for learner, check in sub.exercise.checks
    ]
    nb = nbformat.v4.new_notebook(cells=cells, metadata=student_nb.get("metadata", {}))
    client = NotebookClient(
        nb,
        timeout=int(limits.cell_seconds),
        interrupt_on_timeout=True,
        allow_errors=True,
        kernel_name=limits.kernel_name,
        resources={"metadata": {"path": str(Path(sub.path).parent)}},
    )
    timed_out: list[int] = []
    seconds = [0.0] * len(cells)
    try:
        # The kernel process's own stderr holds only start-up chatter (a warning per kernel that its
        # local connection is not encrypted); what the student's code writes to stderr still reaches
        # the cell outputs through the kernel's messages.
        with client.setup_kernel(stderr=subprocess.DEVNULL):
            for index, cell in enumerate(cells):
                start = time.monotonic()
                client.execute_cell(cell, index)
                seconds[index] = time.monotonic() - start
                if seconds[index] >= limits.cell_seconds:
                    timed_out.append(index)
    except DeadKernelError:
        return _rows(
            sub,
            "error",
            f"the kernel died (it ran past its {limits.memory_bytes / 2**30:g} GiB memory limit, or crashed)",
        )
    except Exception as error:  # the kernel could not start, or the connection broke
        return _rows(sub, "error", f"the notebook could not be run ({type(error).__name__}: {error})")
    rows = []
    for offset, (learner, _) in enumerate(sub.exercise.checks):
        index = first_check + offset
        result = _read_result(cells[index]) or {
            "status": "error",
            "case": "",
            "message": "the check printed nothing",
        }
        status = _ROW_STATUS.get(result["status"], "error")
        message = result["message"]
        student_timeouts = [i for i in timed_out if i < first_check]
        if status == "error" and student_timeouts and "is not defined" in message:
            status = "timeout"
            message = (
                f"cell {cell_number.get(student_timeouts[0], '?')} of the notebook ran longer than "
                f"{limits.cell_seconds:g} s and was "
                f"interrupted, so {learner} was never defined (an endless loop outside a function?)"
            )
        rows.append(
            GradeRow(
                sub.student,
                sub.exercise.number,
                str(sub.path),
                learner,
                status,
                result.get("case", ""),
                message,
                round(seconds[index], 3),
            )
        )
    return rows
