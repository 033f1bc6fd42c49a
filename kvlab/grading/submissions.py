"""Finding the submitted exercise notebooks: ``SUBMISSIONS_DIR/<student>/.../exNN_*.ipynb``.

This is nbgrader's layout (``submitted/<student>/<assignment>/<notebook>.ipynb``) and also the flat
one (``<student>/<notebook>.ipynb``): every folder directly inside the submissions folder is one
student, and any notebook below it whose name starts with an exercise's ``exNN`` is that exercise.
Checkpoints (``.ipynb_checkpoints``) and hidden folders are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from kvlab.exercises.catalogue import EXERCISES, Exercise

_EXERCISE_NAME = re.compile(r"^ex(\d+)")


@dataclass(frozen=True)
class Submission:
    """One student's notebook for one exercise.

    Attributes:
        student: the student's folder name.
        exercise: the exercise the notebook's name says it is.
        path: the notebook file.
    """

    student: str
    exercise: Exercise
    path: Path


def _exercise_of(path: Path) -> Exercise | None:
    match = _EXERCISE_NAME.match(path.name)
    if not match:
        return None
    number = int(match.group(1))
    return next((ex for ex in EXERCISES if ex.number == number), None)


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def find_submissions(folder: str | Path) -> list[Submission]:
    """Every exercise notebook of every student under ``folder``, sorted by student then exercise.

    Raises:
        ValueError: ``folder`` is not a directory, or holds no student folder.
    """
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"the submissions folder {str(root)!r} does not exist or is not a directory")
    students = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not students:
        raise ValueError(
            f"{str(root)!r} holds no student folder; expected one folder per student, each holding "
            "that student's exercise notebooks (exNN_*.ipynb), as nbgrader lays them out"
        )
    found = []
    for student in students:
        for path in sorted(student.rglob("*.ipynb")):
            exercise = _exercise_of(path)
            if exercise is not None and not _hidden(path, root):
                found.append(Submission(student.name, exercise, path))
    return sorted(found, key=lambda s: (s.student, s.exercise.number, str(s.path)))
