"""Progress of a check run host by host: one line per host as its last check finishes.

``gpuhost check`` runs each host's checks together (plugin.py orders them so), and prints

    gpuhost check: h1: 38 passed, 3 skipped (1/3 hosts done, 0:14 elapsed)
    gpuhost check: h2: 35 passed, 2 failed, 3 skipped (2/3 hosts done, 0:27 elapsed)

between pytest's own lines, on a terminal and in a pipe or log alike (pytest owns the terminal's
current line, so there is no redrawn status line as audit and upgrade have).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable

from gpuhost.terminal import elapsed_text

ORDER = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")


class HostProgress:
    """Counts each host's check outcomes; ``hosts`` has one entry per selected check."""

    def __init__(self, hosts: Iterable[str], clock: Callable[[], float] = time.monotonic) -> None:
        self.remaining = Counter(hosts)
        self.total = len(self.remaining)
        self.done = 0
        self.counts: dict[str, Counter[str]] = {host: Counter() for host in self.remaining}
        self.clock = clock
        self.started = clock()

    def report(self, host: str, when: str, outcome: str, xfail: bool = False) -> str | None:
        """Count one phase report of one of ``host``'s checks (pytest's ``when`` and
        ``outcome``); the host's line once its last check's teardown is in, else None."""
        if host not in self.remaining:
            return None
        counts = self.counts[host]
        if when == "call" or outcome != "passed":  # what pytest's summary counts, per phase
            word = "error" if when != "call" and outcome == "failed" else outcome
            if xfail:
                word = "xfailed" if outcome == "skipped" else "xpassed"
            counts[word] += 1
        if when != "teardown":
            return None
        self.remaining[host] -= 1
        if self.remaining[host]:
            return None
        self.done += 1
        parts = [_count(counts[word], word) for word in ORDER if counts[word]]
        name, results = host.removeprefix("ssh://"), ", ".join(parts) or "nothing ran"
        return (
            f"gpuhost check: {name}: {results} ({self.done}/{self.total} hosts done, "
            f"{elapsed_text(self.clock() - self.started)} elapsed)"
        )


def _count(number: int, word: str) -> str:
    """As pytest's summary says it: ``1 error``, ``2 errors``, ``3 failed``."""
    return f"{number} {word}{'s' if word == 'error' and number != 1 else ''}"
