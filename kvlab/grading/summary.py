"""Grading many notebooks, the CSV of the results, and the two summary tables a teacher reads:
per student (checks passed) and per exercise (the cases most students fail)."""

from __future__ import annotations

import csv
import dataclasses
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from kvlab.grading.notebook_run import ROW_STATUSES, GradeLimits, GradeRow, grade_notebook
from kvlab.grading.submissions import Submission

CSV_COLUMNS = tuple(f.name for f in dataclasses.fields(GradeRow))


def grade_all(
    submissions: Sequence[Submission],
    limits: GradeLimits | None = None,
    progress: Callable[[Submission, list[GradeRow]], None] | None = None,
) -> list[GradeRow]:
    """Grade every submission in turn (each in its own kernel); ``progress`` is called after each."""
    rows: list[GradeRow] = []
    for sub in submissions:
        graded = grade_notebook(sub, limits)
        rows += graded
        if progress is not None:
            progress(sub, graded)
    return rows


def write_csv(rows: Sequence[GradeRow], path: str | Path) -> Path:
    """Write one line per row (columns :data:`CSV_COLUMNS`); returns the path written."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(CSV_COLUMNS)
        for row in rows:
            writer.writerow([getattr(row, name) for name in CSV_COLUMNS])
    return path


def student_table(rows: Sequence[GradeRow]) -> tuple[list[str], list[list[str]]]:
    """``(header, lines)``: per student, checks passed out of graded, and the count of each status."""
    by_student: dict[str, Counter] = defaultdict(Counter)
    for row in rows:
        by_student[row.student][row.status] += 1
    header = ["student", "passed", *[s for s in ROW_STATUSES if s != "passed"]]
    lines = []
    for student in sorted(by_student):
        counts = by_student[student]
        total = sum(counts.values())
        lines.append([student, f"{counts['passed']}/{total}", *[str(counts[s]) for s in ROW_STATUSES[1:]]])
    return header, lines


def hardest_cases_table(rows: Sequence[GradeRow]) -> tuple[list[str], list[list[str]]]:
    """``(header, lines)``: per exercise and check, how many students passed, and the cases (or
    statuses) the others stopped at, most frequent first."""
    grouped: dict[tuple[int, str], list[GradeRow]] = defaultdict(list)
    for row in rows:
        grouped[(row.exercise, row.check)].append(row)
    header = ["exercise", "check", "passed", "where the others stopped (students)"]
    lines = []
    for (exercise, check), group in sorted(grouped.items()):
        passed = sum(r.status == "passed" for r in group)
        stops = Counter(
            f"{r.status}: {r.case}" if r.case else r.status for r in group if r.status != "passed"
        )
        where = "; ".join(f"{label} ({n})" for label, n in stops.most_common())
        lines.append([f"ex{exercise:02d}", check, f"{passed}/{len(group)}", where or "-"])
    return header, lines
