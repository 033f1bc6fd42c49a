"""The frame every exercise check shares: name the learner's code, refuse what cannot be called, draw
a fresh seed unless one is given, run the cases and say how to replay them."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from kvlab.exercises.result import CheckResult
from kvlab.exercises.runner import Case, Trial, fresh_seed, learner_name, not_callable, run_check


def check_learner(
    learner: Any,
    default_name: str,
    check_name: str,
    *,
    seed: int | None,
    cases: Callable[[int], Sequence[Case]],
    trial: Callable[[Any], Trial],
    verified: str,
    what: str = "a function",
    general_first: bool = False,
) -> CheckResult:
    """Run one exercise check.

    Args:
        learner: the learner's function (or class).
        default_name: the name used when ``learner`` has none.
        check_name: the check's own name, for the replay line ``check_x(name, seed=...)``.
        seed: the seed of the random cases; ``None`` draws a fresh one.
        cases: ``cases(seed)`` gives the cases to try, edge cases first.
        trial: ``trial(learner)`` gives the comparison of one case (see :data:`Trial`).
        verified: what a pass means (shown in the report).
        what: what ``learner`` should be, for the message when it cannot be called.
        general_first: see :func:`run_check`.
    """
    name = learner_name(learner, default_name)
    if (bad := not_callable(learner, name, what)) is not None:
        return bad
    seed = fresh_seed() if seed is None else seed
    return run_check(name, cases(seed), trial(learner), verified=verified, seed=seed,
                     replay=f"{check_name}({name}, seed={seed})", general_first=general_first)
