"""``make mutation``: mutmut over kvlab's core packages, one package at a time, with a score per package.

For each package ``P`` this runs ``mutmut run "kvlab.P.*"`` (configuration: ``[tool.mutmut]`` in
pyproject.toml; mutmut re-runs, for each mutant, only the selected tests that execute the mutated
function), then reads the verdicts with ``mutmut results --all true`` and prints::

    package              mutants  unchecked  killed  survived  no tests  timeout  other   score
    admission                 81          0      ...

The score is killed (timeouts count as killed: the mutant made the tests hang) over the mutants that
were checked; a mutant no selected test executes ("no tests") counts against the score. Mutants of an
interrupted run that were never tried are shown as "unchecked" and left out of the score. Survivors
are listed by name; ``mutmut show NAME`` prints the change. Usage::

    python scripts/mutation.py [PACKAGE ...] [--max-children N] [--report-only]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from collections import Counter
from pathlib import Path

PACKAGES = ("admission", "allocator", "sizing", "simulator", "quantization")
ROOT = Path(__file__).resolve().parents[1]
MUTMUT = [sys.executable, "-m", "mutmut"]
KILLED = {"killed", "timeout", "caught by type check"}


def run_package(package: str, max_children: int) -> int:
    """Run mutmut on one package; returns its exit code."""
    cmd = [*MUTMUT, "run", "--max-children", str(max_children), f"kvlab.{package}.*"]
    print("$", " ".join(cmd[2:]), flush=True)
    return subprocess.run(cmd, cwd=ROOT, stdout=subprocess.DEVNULL).returncode


def verdicts() -> dict[str, str]:
    """``{mutant name: status}`` of every mutant mutmut has recorded."""
    out = subprocess.run([*MUTMUT, "results", "--all", "true"], cwd=ROOT, capture_output=True, text=True)
    found = {}
    for line in out.stdout.splitlines():
        name, sep, status = line.strip().rpartition(": ")
        if sep and name.startswith("kvlab."):
            found[name] = status
    return found


def score_table(results: dict[str, str], packages: tuple[str, ...]) -> tuple[str, list[str]]:
    """The per-package table and the names of the survivors."""
    rows = ["package              mutants  unchecked  killed  survived  no tests  timeout  other   score"]
    survivors = []
    for package in packages:
        mine = {n: s for n, s in results.items() if n.startswith(f"kvlab.{package}.")}
        if not mine:
            rows.append(f"{package:<20} (not run)")
            continue
        c = Counter(mine.values())
        killed = sum(c[s] for s in KILLED)
        checked = len(mine) - c["not checked"]
        other = checked - killed - c["survived"] - c["no tests"]
        score = f"{100 * killed / checked:5.1f}%" if checked else "    -"
        rows.append(
            f"{package:<20} {len(mine):>7}  {c['not checked']:>9}  {killed:>6}  {c['survived']:>8}  "
            f"{c['no tests']:>8}  {c['timeout']:>7}  {other:>5}  {score}"
        )
        survivors += sorted(n for n, s in mine.items() if s not in KILLED | {"not checked"})
    return "\n".join(rows), survivors


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", default=list(PACKAGES), metavar="PACKAGE",
                        help=f"{', '.join(PACKAGES)}, or a module of one (allocator.hashing)")
    parser.add_argument("--max-children", type=int, default=1, help="parallel mutant runs (default 1)")
    parser.add_argument("--report-only", action="store_true", help="print the recorded verdicts, run nothing")
    args = parser.parse_args(argv)
    packages = tuple(args.packages)
    for package in packages:
        if package.split(".")[0] not in PACKAGES:
            parser.error(f"package must be one of {', '.join(PACKAGES)} or a module of one, got {package!r}")
    if not args.report_only:
        for package in packages:
            code = run_package(package, args.max_children)
            if code not in (0,):
                print(f"mutmut stopped on {package} with exit code {code}", file=sys.stderr)
    table, survivors = score_table(verdicts(), packages)
    print(table)
    print(f"\nnot killed ({len(survivors)}):")
    for name in survivors:
        print("  ", name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
