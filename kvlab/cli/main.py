"""The ``kvlab`` command: one sub-command per module of :mod:`kvlab.cli`.

Each sub-command module provides ``register(subparsers)`` (adds its parser and sets
``func=run``) and ``run(args) -> int``. Errors caused by the user's input (``ValueError``) are
printed as one line, ``kvlab <command>: error: ...``, with exit code 2 — never a traceback. Notes a
command leaves in ``args.notes`` (defaults it had to adjust) are printed on stderr after its output.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

#: Sub-command modules, in the order ``kvlab --help`` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "kvlab.cli.info",
    "kvlab.cli.capacity",
    "kvlab.cli.budget",
    "kvlab.cli.simulate",
    "kvlab.cli.gpus",
    "kvlab.cli.bench",
    "kvlab.cli.grade",
    "kvlab.cli.quality",
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every available sub-command."""
    parser = argparse.ArgumentParser(
        prog="kvlab",
        description="KV-cache memory, quantization, admission and kernels, as serving engines do them.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kvlab`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        code = int(args.func(args) or 0)
    except (ValueError, NotImplementedError) as exc:  # NotImplementedError: what vLLM's profile refuses too
        print(f"kvlab {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"kvlab {args.command}: interrupted", file=sys.stderr)
        return 130
    for note in getattr(args, "notes", []):
        print(note, file=sys.stderr)
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
