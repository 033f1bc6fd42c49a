"""The catalogue matches the files: every exercise has a notebook, a solution, its lesson and one
stub and one check cell per check; every notebook in notebooks/exercises is catalogued."""

from __future__ import annotations

import kvlab.exercises as exercises
from kvlab.exercises.catalogue import EXERCISES, get_exercise

from .notebook_cells import EXERCISE_DIR, ROOT, SOLUTION_DIR, defined_names, exercise_path, read, tagged


def test_numbers_run_from_one_to_ten_then_ascend():
    numbers = [e.number for e in EXERCISES]
    assert numbers[:10] == list(range(1, 11))
    assert numbers == sorted(set(numbers))  # later exercises follow, each number once
    assert get_exercise(6).slug == "ex06_block_pool"


def test_every_exercise_has_its_files_cells_and_checks():
    for exercise in EXERCISES:
        nb = read(exercise_path(exercise))
        assert (SOLUTION_DIR / f"{exercise.slug}.py").is_file(), exercise.slug
        assert (ROOT / "notebooks" / f"{exercise.lesson}.py").is_file(), exercise.lesson
        stubs, checks = tagged(nb, "stub"), tagged(nb, "check")
        assert len(stubs) == len(checks) == len(exercise.checks), exercise.slug
        for (learner, check), stub, cell in zip(exercise.checks, stubs, checks, strict=True):
            assert learner in defined_names(stub.source), (exercise.slug, learner)
            assert f"{check}({learner})" in cell.source, (exercise.slug, check)
            assert callable(getattr(exercises, check))


def test_no_uncatalogued_notebooks():
    slugs = {e.slug for e in EXERCISES}
    assert {p.stem for p in EXERCISE_DIR.glob("ex*.py")} == slugs
    assert {p.stem for p in SOLUTION_DIR.glob("ex*.py")} == slugs

