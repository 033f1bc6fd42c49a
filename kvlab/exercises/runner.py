"""The check runner every exercise shares: run the learner's code on cases, stop at the first
disagreement with kvlab, and say what went wrong in a few lines.

A *case* is one set of inputs (random or a named edge case). A *trial* runs one case: it asks kvlab for
the answer, asks the learner's code for its answer and returns ``None`` when they agree or a short
text naming the difference. The learner's exceptions are caught and reported with the case and the
line of their code that raised; they never surface as a traceback.
"""

from __future__ import annotations

import copy
import os
import secrets
import sys
import sysconfig
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from kvlab.exercises.report import describe_inputs
from kvlab.exercises.result import CheckResult

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


def fresh_seed() -> int:
    """A new seed for each check run, so every run draws new random cases."""
    return secrets.randbelow(2**31)


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


def run_check(
    name: str,
    cases: Sequence[Case],
    trial: Trial,
    *,
    verified: str,
    seed: int | None = None,
    replay: str | None = None,
) -> CheckResult:
    """Run ``trial`` on every case and stop at the first failure.

    Args:
        name: the learner's function, kernel or class, as the report names it.
        cases: random and edge cases, in the order they are tried.
        trial: compares kvlab and the learner on one case (see :data:`Trial`).
        verified: what a pass means, e.g. ``"scales and codes bit-exact"``.
        seed: the seed the random cases were drawn with (shown so a failure can be replayed).
        replay: the call that replays the same cases, e.g. ``"check_quantize_int8(quantize_int8, seed=7)"``.

    Returns:
        A :class:`CheckResult`; a pass names the number of cases and what was verified.
    """
    total = len(cases)
    for number, case in enumerate(cases, 1):
        try:
            problem = trial(case)
        except LearnerError as err:
            if isinstance(err.error, NotImplementedError):
                where = f" in {err.function}" if err.function and err.function != name else ""
                return CheckResult(name, False, (
                    f"✗ {name} is not written yet (NotImplementedError{where}).\n"
                    "  Replace the `raise NotImplementedError` line with your code, then run the check again."
                ))
            message = str(err.error) or "(no message)"
            problem = f"your code raised {type(err.error).__name__}: {message}"
            if err.where:
                problem += f"\n  at {err.where}"
        if problem is None:
            continue
        kind = "edge case" if case.edge else "case"
        lines = [f"✗ {name} failed on {kind} “{case.label}” ({number} of {total})"]
        if case.args:
            lines += ["  inputs:", describe_inputs(case.args, case.shown)]
        lines.append("  " + problem.replace("\n", "\n  "))
        if seed is not None and replay:
            lines.append(f"  (seed {seed}: {replay} replays the same cases)")
        return CheckResult(name, False, "\n".join(lines))
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
