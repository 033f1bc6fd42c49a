"""An endless loop ends with a one-line report under a time limit; an interrupt is reported without a
traceback; an untouched stub says "not written yet"; code wrong in general is not blamed on an edge
case."""

from __future__ import annotations

import time

import pytest

import kvlab.exercises as exercises
from kvlab.exercises.catalogue import EXERCISES
from kvlab.exercises.compare import same_int
from kvlab.exercises.runner import Case, function_trial, run_check
from kvlab.exercises.time_limit import set_time_limit, time_limit_seconds

from .notebook_cells import exercise_path, load_cells


@pytest.fixture
def short_limit():
    set_time_limit(0.3)
    yield 0.3
    set_time_limit(None)


def _double(x):
    return 2 * x


def _loops_on_three(x):
    while x == 3:
        pass
    return 2 * x


def test_an_endless_loop_ends_with_a_message_naming_the_case(short_limit):
    cases = [Case(f"random case {i}", {"x": i}) for i in range(1, 6)]
    start = time.perf_counter()
    result = run_check("_loops_on_three", cases,
                       function_trial(_loops_on_three, _double, lambda e, g: same_int(e, g, "f(x)")),
                       verified="-")
    elapsed = time.perf_counter() - start
    assert not result.passed and result.status == "timeout" and result.case == "random case 3"
    assert "your function did not return within 0.3 s on case “random case 3”" in result.message
    assert "Traceback" not in result.message
    assert 0.25 < elapsed < 5.0  # stopped by the limit, not by luck


def test_a_loop_that_catches_exception_is_still_stopped(short_limit):
    def stubborn(x):
        while True:
            try:
                time.sleep(0.01)
            except Exception:  # noqa: SIM105 - a learner's catch-all must not swallow the time limit
                continue

    result = run_check("stubborn", [Case("one", {"x": 1}, edge=True)],
                       function_trial(stubborn, _double, lambda e, g: same_int(e, g, "f(x)")), verified="-")
    assert result.status == "timeout" and "did not return within 0.3 s" in result.message


def test_a_real_check_times_out_on_its_first_case(short_limit):
    def quantize_forever(x):
        while True:
            pass

    result = exercises.check_quantize_int8(quantize_forever, seed=1, num_random=3)
    assert result.status == "timeout"
    assert "did not return within 0.3 s on case “all-zero head vector”" in result.message


def test_time_limit_is_configurable_through_the_environment(monkeypatch):
    set_time_limit(None)
    monkeypatch.setenv("KVLAB_CASE_TIME_LIMIT", "2.5")
    assert time_limit_seconds() == 2.5
    monkeypatch.setenv("KVLAB_CASE_TIME_LIMIT", "soon")
    with pytest.raises(ValueError, match="KVLAB_CASE_TIME_LIMIT"):
        time_limit_seconds()
    with pytest.raises(ValueError, match="seconds"):
        set_time_limit(-1)


def test_an_interrupt_is_reported_without_a_traceback():
    def interrupted(x):
        raise KeyboardInterrupt

    result = run_check("interrupted", [Case("one", {"x": 1}, edge=True)],
                       function_trial(interrupted, _double, lambda e, g: same_int(e, g, "f(x)")),
                       verified="-")
    assert result.status == "interrupted" and "interrupted while your function ran" in result.message
    assert "Traceback" not in result.message and "KeyboardInterrupt" not in result.message


STUBS = [(ex, learner, check) for ex in EXERCISES for learner, check in ex.checks]


@pytest.mark.parametrize(("exercise", "learner", "check"), STUBS,
                         ids=[f"ex{ex.number:02d}-{learner}" for ex, learner, _ in STUBS])
def test_every_untouched_stub_reports_not_written_yet(exercise, learner, check, tmp_path):
    module = load_cells(exercise_path(exercise), "stub", tmp_path)
    result = getattr(exercises, check)(getattr(module, learner), seed=3)
    assert result.status == "not_written", result.message
    assert result.message.startswith(f"✗ {learner} is not written yet"), result.message
    assert "NaN" not in result.message


def test_general_failure_is_not_blamed_on_an_edge_case():
    def off_for_big(x):  # wrong for every x > 10, and for the edge case 0
        return 2 * x + (x > 10 or x == 0)

    cases = [Case("zero", {"x": 0}, edge=True)] + [Case(f"random case {i}", {"x": i}) for i in (4, 12, 30)]
    trial = function_trial(off_for_big, _double, lambda e, g: same_int(e, g, "f(x)"))
    general = run_check("off_for_big", cases, trial, verified="-", general_first=True)
    assert general.message.splitlines()[0] == "✗ off_for_big failed on case “random case 12” (3 of 4)"
    assert "(it also fails edge case “zero”)" in general.message and general.case == "random case 12"

    def off_for_zero(x):  # right everywhere but the edge case
        return 2 * x + (x == 0)

    trial = function_trial(off_for_zero, _double, lambda e, g: same_int(e, g, "f(x)"))
    edge = run_check("off_for_zero", cases, trial, verified="-", general_first=True)
    assert edge.message.splitlines()[0] == "✗ off_for_zero failed on edge case “zero” (1 of 4)"
