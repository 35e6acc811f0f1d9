#!/usr/bin/env python3
"""gpuhost's fleet runner with a trivial command (``true``) instead of the probe: what the runner
itself costs (connect, one command, close) with no host work, parsing or judging.

    .venv/bin/python bench/fleet_null.py INVENTORY PARALLEL     (used by bench/audit.py *-null)
"""

from __future__ import annotations

import sys

from pyinfra.api import FactBase

from gpuhost import fleet


class Nothing(FactBase[bool]):
    def command(self) -> str:
        return "true"

    def process(self, output: list[str]) -> bool:
        return True


def main() -> int:
    selection = fleet.select_hosts(sys.argv[1])
    results = list(fleet.gather(selection, Nothing, parallel=int(sys.argv[2])))
    bad = [r.name for r in results if not r.ok]
    print(f"{len(results) - len(bad)} ok, failed: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
