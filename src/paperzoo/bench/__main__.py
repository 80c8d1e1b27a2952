"""``python -m paperzoo.bench NAME [--commit | --json PATH] [--precision all|fp32|bf16]``: run a benchmark;
without a name, list them.

The figures go to a fresh runs/bench/NAME/<stamp>/ (NAME.json and NAME.md) unless --commit writes the committed
benchmarks/NAME.json and .md (hand-written readings in the .md are kept) or --json names the file."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from paperzoo.bench.runner import BenchOptionError, all_benches, run_bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paperzoo.bench", description=__doc__)
    parser.add_argument("name", nargs="?", help="bench name (omit to list them)")
    parser.add_argument("--json", dest="json_path", type=Path, default=None,
                        help="where to write the JSON (default runs/bench/NAME/<stamp>/NAME.json; a .md goes beside)")
    parser.add_argument("--commit", action="store_true",
                        help="write the committed benchmarks/NAME.json and .md (run from the repository root)")
    parser.add_argument("--precision", choices=("all", "fp32", "bf16"), default="all",
                        help="all: fp32 rows, then bf16 rows where this machine computes bf16 fast (default)")
    args = parser.parse_args(argv)
    if args.name is None:
        for name, target in sorted(all_benches().items()):
            print(f"{name}\t{target if isinstance(target, str) else getattr(target, '__name__', target)}")
        return 0
    try:
        run_bench(args.name, json_path=args.json_path, commit=args.commit, precision=args.precision)
    except (KeyError, BenchOptionError) as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
