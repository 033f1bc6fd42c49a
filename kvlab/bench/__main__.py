"""``python -m kvlab.bench``: the same as ``kvlab bench``, without loading the other sub-commands."""

import argparse
import sys

from kvlab.cli.bench import add_arguments, run


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="kvlab bench", description=__doc__)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ValueError as exc:
        print(f"kvlab bench: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
