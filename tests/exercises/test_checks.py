"""Every solution passes its check, every untouched stub fails it, and every common mistake fails
with a report that names the failing case."""

from __future__ import annotations

import pytest

import kvlab.exercises as exercises
from kvlab.exercises.catalogue import EXERCISES

from .notebook_cells import exercise_path, load_cells, solution_path
from .wrong_variants import RANDOM, WRONG_VARIANTS

CHECKS = [(ex, learner, check) for ex in EXERCISES for learner, check in ex.checks]
IDS = [f"ex{ex.number:02d}-{learner}" for ex, learner, _ in CHECKS]


@pytest.mark.parametrize(("exercise", "learner", "check"), CHECKS, ids=IDS)
def test_solution_passes(exercise, learner, check, seed, tmp_path):
    module = load_cells(solution_path(exercise), "solution", tmp_path)
    result = getattr(exercises, check)(getattr(module, learner), seed=seed)
    assert result.passed, result.message
    assert result.message.startswith("✓") and "passed" in result.message


@pytest.mark.parametrize(("exercise", "learner", "check"), CHECKS, ids=IDS)
def test_untouched_stub_fails(exercise, learner, check, seed, tmp_path):
    module = load_cells(exercise_path(exercise), "stub", tmp_path)
    result = getattr(exercises, check)(getattr(module, learner), seed=seed)
    assert not result.passed
    assert result.message.startswith(f"✗ {learner}")


def _wrong_cases():
    check_of = {learner: check for _, learner, check in CHECKS}
    for learner, variants in WRONG_VARIANTS.items():
        for mistake, fn, label in variants:
            yield pytest.param(check_of[learner], fn, label, id=f"{learner}-{mistake}")


@pytest.mark.parametrize(("check", "wrong", "label"), list(_wrong_cases()))
def test_wrong_variant_fails_naming_the_case(check, wrong, label, seed):
    result = getattr(exercises, check)(wrong, seed=seed)
    assert not result.passed
    first_line = result.message.splitlines()[0]
    assert first_line.startswith(f"✗ {wrong.__name__} failed on"), result.message
    if label == RANDOM:  # wrong in general: reported on a random case, not on an edge case
        assert "failed on case “random case " in first_line, result.message
    elif label is not None:
        assert f"“{label}”" in first_line, result.message
    assert "inputs:" in result.message and "expected" in result.message, result.message


@pytest.mark.interpreter
def test_wrong_kernels_fail_naming_the_case(seed):
    from .wrong_kernels import WRONG_KERNELS

    for mistake, kernel, label in WRONG_KERNELS:
        result = exercises.check_int8_scores_kernel(kernel, seed=seed, num_random=3)
        first_line = result.message.splitlines()[0]
        assert not result.passed, mistake
        assert first_line.startswith(f"✗ {kernel.fn.__name__} failed on “{label}”") or \
            f"“{label}”" in first_line, (mistake, result.message)
