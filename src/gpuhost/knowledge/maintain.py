"""The maintainers' comparisons behind ``gpuhost matrix sync`` and ``matrix advisories-sync``:
what the shipped files say against what PyPI / NVIDIA's CSAF documents say, as lines to print and
the text to write. The CLI only parses options and prints.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuhost.errors import ConfigError
from gpuhost.knowledge.csaf import read_bulletins, readable_row, render_advisories, trim
from gpuhost.knowledge.pypi import Index
from gpuhost.knowledge.sync import SyncResult, drift, matrix_drift, record, render_wheels, sync
from gpuhost.matrix import load_matrix
from gpuhost.matrix.advisories import read_raw, row_problems
from gpuhost.matrix.wheeldata import read_wheels_file
from gpuhost.redaction import redact_url


@dataclass
class Comparison:
    """Differences (one line each), the summary line and the file text the sources give."""

    lines: list[str]
    summary: str
    text: str

    def exit_code(self, check: bool) -> int:
        """1 when ``check`` (``--check``) and anything differs, else 0."""
        return 1 if check and self.lines else 0

    def outcome_lines(self, path: str, write: bool, record_dir: str | None = None) -> Iterator[str]:
        """The differences and the summary, then, each as it is done, the answers recorded
        under ``record_dir`` (wheels only) and the file at ``path`` rewritten (``write``)."""
        yield from self.lines
        yield self.summary
        if record_dir and isinstance(self, WheelComparison):
            yield f"recorded {record(self.result, Path(record_dir))} answers under {record_dir}"
        if write:
            write_text(path, self.text)
            yield f"wrote {path}"


@dataclass
class WheelComparison(Comparison):
    result: SyncResult


def wheel_ranges(path: str) -> dict[str, str]:
    """``range`` of a wheels file ({torch: "2.0.0", ...}); ConfigError naming the file."""
    ranges = read_wheels_file(path).get("range")
    if not isinstance(ranges, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in ranges.items()
    ):
        raise ConfigError(
            f'{path}: range: expected a mapping such as {{torch: "2.0.0", tensorflow: "2.13.0"}}'
        )
    return ranges


def compare_wheels(index: Index, path: str) -> WheelComparison:
    """The wheels file at ``path`` (and matrix.yaml's hand-kept rows) against the index."""
    current = read_wheels_file(path)
    ranges = wheel_ranges(path)
    result = sync(index, ranges)
    lines = drift(current, result.data) + matrix_drift(load_matrix(), result.data)
    counts = ", ".join(f"{len(rows)} {p} releases" for p, rows in result.data.items())
    summary = f"{index.base}: {counts}; {len(lines)} differences"
    return WheelComparison(lines, summary, render_wheels(ranges, result.data), result)


def compare_advisories(root: Path, path: str, record_dir: Path | None = None) -> Comparison:
    """The advisories file at ``path`` against the CSAF bulletins under ``root``; with
    ``record_dir`` the bulletins used are stored there, trimmed (test fixtures)."""
    if not root.is_dir():
        raise ConfigError(f"--from {root}: no such directory of CSAF bulletins")
    current = read_raw(path) if Path(path).exists() else {}
    threshold = float(current.get("error_at_cvss", 7.0))
    rows = bulletin_rows(root, record_dir)
    text = render_advisories(rows, threshold)
    old = Path(path).read_text(encoding="utf-8") if Path(path).exists() else ""
    known = {str(r.get("id")): r for r in current.get("advisories", []) or []}
    lines = []
    for row in rows:
        before = known.pop(row["id"], None)
        if before is None:
            lines.append(f"bulletin {row['id']} ({row['date']}): new ({row['title']})")
        elif {k: before.get(k) for k in row} != row:
            lines.append(f"bulletin {row['id']}: differs from {path}")
    lines += [f"bulletin {bid}: in {path} but not under {root}" for bid in known]
    if not lines and text != old:
        lines.append(f"{path}: same rows, other text (run --write to normalise)")
    summary = (
        f"{root}: {len(rows)} bulletins for Linux drivers and the container toolkit; "
        f"{len(lines)} differences"
    )
    return Comparison(lines, summary, text)


def bulletin_rows(root: Path, record_dir: Path | None = None) -> list[dict[str, Any]]:
    """The advisories rows of every driver / container-toolkit bulletin under ``root``."""
    rows: list[dict[str, Any]] = []
    for file, doc in read_bulletins(root):
        row = readable_row(doc, str(file))
        if row is None:
            continue
        problems = row_problems(row)
        if any(r["id"] == row["id"] for r in rows):
            problems.append(f"id {row['id']} is another bulletin's too")
        if problems:  # before its id or date names a file under record_dir
            raise ConfigError(f"{file}: {'; '.join(problems)}")
        rows.append(row)
        if record_dir is not None:
            target = record_dir / row["date"][:4] / row["id"] / f"{row['id']}.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(trim(doc), indent=1, sort_keys=True) + "\n")
    return rows


def write_text(path: str, text: str) -> None:
    """Rewrite a data file; ConfigError naming it when it cannot be written."""
    try:
        Path(path).write_text(redact_url(text), encoding="utf-8")  # no mirror's password
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write ({exc.strerror})") from exc
