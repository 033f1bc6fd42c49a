"""The check runner every exercise shares: run the learner's code on cases, stop at the first
disagreement with kvlab, and say what went wrong in a few lines.

A *case* is one set of inputs (random or a named edge case). A *trial* runs one case: it asks kvlab for
the answer, asks the learner's code for its answer and returns ``None`` when they agree or a short
text naming the difference. The learner's exceptions are caught and reported with the case and the
line of their code that raised; they never surface as a traceback.
"""

from __future__ import annotations

import copy
import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kvlab.exercises.learner_errors import LearnerError, call_learner, learner_error  # noqa: F401 (checks import them from here)
from kvlab.exercises.report import describe_inputs
from kvlab.exercises.result import CheckResult
from kvlab.exercises.time_limit import CaseTimeout, time_limit, time_limit_seconds

#: A trial: ``None`` when kvlab and the learner agree on the case, else a description of the difference.
Trial = Callable[["Case"], "str | None"]


@dataclass(frozen=True)
class Case:
    """One set of inputs for the learner's code.

    Attributes:
        label: how the report names the case (``"random case 17"``, ``"all-zero head vector"``).
        args: keyword arguments, shown in the report as ``name = value``.
        edge: True for a hand-picked edge case, False for a random one.
        shown: descriptions that replace the default one of some arguments in the report (for
            objects too large to print, e.g. a model with 60 layers).
    """

    label: str
    args: Mapping[str, Any] = field(default_factory=dict)
    edge: bool = False
    shown: Mapping[str, str] = field(default_factory=dict)


def fresh_seed() -> int:
    """A new seed for each check run, so every run draws new random cases."""
    return secrets.randbelow(2**31)


def copy_args(args: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a case's arguments, so code that modifies its inputs cannot affect the other side."""
    return copy.deepcopy(dict(args))


def learner_name(learner: Any, default: str) -> str:
    """The name the report uses for the learner's code."""
    wrapped = getattr(learner, "fn", None)  # a Triton kernel wraps the Python function
    return getattr(learner, "__name__", None) or getattr(wrapped, "__name__", None) or default


def not_callable(learner: Any, name: str, what: str = "a function") -> CheckResult | None:
    """A failed result when ``learner`` cannot be called (``None``, a number, a forgotten definition)."""
    if callable(learner):
        return None
    shown = repr(learner)[:60]
    return CheckResult(name, False, f"✗ {name}: expected {what}, got {type(learner).__name__} ({shown})")


def count_text(cases: Sequence[Case]) -> str:
    """``200 random cases + 6 edge cases`` (or ``6 cases`` when none is random)."""
    edge = sum(c.edge for c in cases)
    rand = len(cases) - edge
    plural = lambda n, word: f"{n} {word}" + ("" if n == 1 else "s")
    if rand and edge:
        return f"{plural(rand, 'random case')} + {plural(edge, 'edge case')}"
    if rand:
        return plural(rand, "random case")
    return plural(edge, "case")


def not_written_yet(name: str, where: str = "") -> CheckResult:
    """The report of an exercise whose stub is still untouched."""
    return CheckResult(name, False, (
        f"✗ {name} is not written yet{where}.\n"
        "  Replace the stub (the `raise NotImplementedError` line, or `pass`) with your code, then run the "
        "check again."
    ), status="not_written")


@dataclass(frozen=True)
class _Outcome:
    status: str  # "failed", "error", "timeout", "interrupted" or "not_written"
    problem: str


def _attempt(name: str, case: Case, trial: Trial, seconds: float) -> _Outcome | None:
    """Run one trial under the time limit; ``None`` when kvlab and the learner agree."""
    try:
        with time_limit(seconds):
            problem = trial(case)
    except CaseTimeout:
        return _Outcome("timeout", (
            f"your function did not return within {seconds:g} s on case “{case.label}”: is there a loop "
            "that never ends? (kvlab.exercises.set_time_limit changes the limit)"
        ))
    except KeyboardInterrupt:
        return _Outcome("interrupted", f"interrupted while your function ran on case “{case.label}”")
    except LearnerError as err:
        if isinstance(err.error, NotImplementedError):
            where = f" in {err.function}" if err.function and err.function != name else ""
            return _Outcome("not_written", f" (NotImplementedError{where})")
        problem = f"your code raised {type(err.error).__name__}: {str(err.error) or '(no message)'}"
        if err.where:
            problem += f"\n  at {err.where}"
        return _Outcome("error", problem)
    return None if problem is None else _Outcome("failed", problem)


def run_check(
    name: str,
    cases: Sequence[Case],
    trial: Trial,
    *,
    verified: str,
    seed: int | None = None,
    replay: str | None = None,
    general_first: bool = False,
) -> CheckResult:
    """Run ``trial`` on every case and stop at the first failure.

    Each case runs under the time limit of :mod:`kvlab.exercises.time_limit`.

    Args:
        name: the learner's function, kernel or class, as the report names it.
        cases: random and edge cases, in the order they are tried.
        trial: compares kvlab and the learner on one case (see :data:`Trial`).
        verified: what a pass means, e.g. ``"scales and codes bit-exact"``.
        seed: the seed the random cases were drawn with (shown so a failure can be replayed).
        replay: the call that replays the same cases, e.g. ``"check_quantize_int8(quantize_int8, seed=7)"``.
        general_first: for checks whose edge cases are true corner cases (an all-zero vector, a
            tie): when the first failure is on an edge case, the random cases are tried too, and if
            one of them fails as well the code is wrong in general, so the report names that random
            case (and mentions the edge case) rather than suggesting that only a corner is missed.
            Checks whose named cases are simply readable examples (a real model) leave it off.

    Returns:
        A :class:`CheckResult`; a pass names the number of cases and what was verified.
    """
    seconds = time_limit_seconds()
    total = len(cases)
    for number, case in enumerate(cases, 1):
        outcome = _attempt(name, case, trial, seconds)
        if outcome is None:
            continue
        if outcome.status == "not_written":
            return not_written_yet(name, outcome.problem)
        also = ""
        if general_first and case.edge and outcome.status in ("failed", "error"):
            for later, general in enumerate(cases[number:], number + 1):
                if general.edge:
                    continue
                found = _attempt(name, general, trial, seconds)
                if found is not None and found.status in ("failed", "error"):
                    also = f"(it also fails edge case “{case.label}”)"
                    number, case, outcome = later, general, found
                    break
                if found is not None:  # a timeout or an interrupt: report the edge case
                    break
        kind = "edge case" if case.edge else "case"
        lines = [f"✗ {name} failed on {kind} “{case.label}” ({number} of {total})"]
        if case.args:
            lines += ["  inputs:", describe_inputs(case.args, case.shown)]
        lines.append("  " + outcome.problem.replace("\n", "\n  "))
        if also:
            lines.append("  " + also)
        if seed is not None and replay:
            lines.append(f"  (seed {seed}: {replay} replays the same cases)")
        return CheckResult(name, False, "\n".join(lines), status=outcome.status, case=case.label)
    return CheckResult(name, True, f"✓ {name}: {count_text(cases)} passed — {verified}")


def function_trial(
    learner: Callable[..., Any],
    expected: Callable[..., Any],
    compare: Callable[[Any, Any], str | None],
    diagnose: Callable[[Case, Any, Any], str | None] | None = None,
) -> Trial:
    """The trial of a pure function: kvlab's ``expected(**args)`` against ``learner(**args)``.

    Args:
        learner: the learner's function.
        expected: kvlab's answer for the same keyword arguments.
        compare: ``compare(expected, got)`` → ``None`` or the difference.
        diagnose: optional ``diagnose(case, expected, got)`` → a hint naming a likely mistake.
    """

    def trial(case: Case) -> str | None:
        want = expected(**copy_args(case.args))
        got = call_learner(learner, **copy_args(case.args))
        return compare_and_diagnose(case, want, got, compare, diagnose)

    return trial


def compare_and_diagnose(
    case: Case,
    want: Any,
    got: Any,
    compare: Callable[[Any, Any], str | None],
    diagnose: Callable[[Case, Any, Any], str | None] | None = None,
) -> str | None:
    """``compare(want, got)`` plus a hint from ``diagnose`` when they differ.

    An answer so malformed that comparing it fails is reported as such; a diagnosis that fails on it
    is left out.
    """
    try:
        problem = compare(want, got)
    except Exception as error:  # the learner's answer has an unexpected type or shape
        return f"your result could not be compared with the expected one ({type(error).__name__}: {error})"
    if problem and diagnose is not None:
        try:
            hint = diagnose(case, want, got)
        except Exception:  # a hint is a bonus; an odd answer must not break the report
            hint = None
        if hint:
            problem += f"\nhint: {hint}"
    return problem


def random_cases(count: int, seed: int, make: Callable[[torch.Generator], Mapping[str, Any]]) -> list[Case]:
    """``count`` random cases, ``make(generator)`` drawing the arguments of each.

    ``generator`` is a ``torch.Generator`` seeded with ``seed``: same seed, same cases.
    """
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise ValueError(f"num_random must be an integer >= 0, got {count!r}")
    gen = torch.Generator().manual_seed(seed)
    return [Case(f"random case {i}", make(gen)) for i in range(1, count + 1)]


def randint(gen: torch.Generator, low: int, high: int) -> int:
    """A random integer in ``[low, high]`` (both included) from a torch generator."""
    return int(torch.randint(low, high + 1, (1,), generator=gen))


def choice(gen: torch.Generator, options: Sequence[Any]) -> Any:
    """A random element of ``options`` from a torch generator."""
    return options[randint(gen, 0, len(options) - 1)]
