"""``python -m paperzoo.bench NAME [--json PATH]``: run a benchmark; without a name, list them."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from paperzoo.bench.runner import all_benches, run_bench


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m paperzoo.bench", description=__doc__)
    parser.add_argument("name", nargs="?", help="bench name (omit to list them)")
    parser.add_argument("--json", dest="json_path", type=Path, default=None,
                        help="where to write the JSON (default benchmarks/NAME.json; a .md goes beside it)")
    args = parser.parse_args(argv)
    if args.name is None:
        for name, target in sorted(all_benches().items()):
            print(f"{name}\t{target if isinstance(target, str) else getattr(target, '__name__', target)}")
        return 0
    try:
        run_bench(args.name, json_path=args.json_path)
    except KeyError as e:
        print(f"error: {e.args[0]}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
