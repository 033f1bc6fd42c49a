"""``kvlab grade``: run every student's exercise notebooks headless and write one CSV row per check."""

from __future__ import annotations

import argparse
import sys

from kvlab.cli.engine_args import print_table
from kvlab.sizing.memory_units import parse_memory


def run(args: argparse.Namespace) -> int:
    from kvlab.grading import (
        GradeLimits,
        find_submissions,
        grade_all,
        hardest_cases_table,
        student_table,
        write_csv,
    )

    limits = GradeLimits(
        cell_seconds=args.cell_time_limit,
        case_seconds=args.case_time_limit,
        memory_bytes=parse_memory(args.memory_limit, "memory_limit"),
        seed=args.seed,
    )
    submissions = find_submissions(args.submissions)
    if not submissions:
        raise ValueError(f"no exercise notebook (exNN_*.ipynb) found under {args.submissions!r}")

    def progress(sub, rows):
        statuses = ", ".join(f"{r.check} {r.status}" for r in rows)
        print(f"{sub.student}  ex{sub.exercise.number:02d}  {statuses}", file=sys.stderr, flush=True)

    rows = grade_all(submissions, limits, progress)
    path = write_csv(rows, args.out)
    print(f"{len(rows)} rows ({len(submissions)} notebooks) written to {path}\n")
    print_table(*reversed(student_table(rows)))
    print()
    print_table(*reversed(hardest_cases_table(rows)))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "grade",
        help="grade every student's exercise notebooks (one folder per student) into a CSV",
        description="Run each student's exercise notebooks headless, each in its own kernel with a time "
        "and memory limit, run kvlab's checks on them and write one CSV row per (student, exercise, "
        "check) with passed / failed / error / timeout and the message the student would see.",
    )
    p.add_argument(
        "submissions",
        metavar="SUBMISSIONS_DIR",
        help="one folder per student (nbgrader's submitted/ layout works as is)",
    )
    p.add_argument("--out", default="grades.csv", help="CSV to write (default grades.csv)")
    p.add_argument(
        "--cell-time-limit",
        type=float,
        default=300.0,
        help="seconds each notebook cell may run before it is interrupted (default 300)",
    )
    p.add_argument(
        "--case-time-limit",
        type=float,
        default=10.0,
        help="seconds each checked case may run (default 10; 0 = none)",
    )
    p.add_argument("--memory-limit", default="4GiB", help="address-space limit of each kernel (default 4GiB)")
    p.add_argument(
        "--seed", type=int, default=0, help="seed of the checks' random cases, the same for all (default 0)"
    )
    p.set_defaults(func=run)
