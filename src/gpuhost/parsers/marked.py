"""Line-marked multi-section command output: one splitter for every fact that prints several
things in one command (pure; no I/O).

A command prints a marker line ``##GPUHOST <name> [args...]`` before each part; the lines up to
the next marker are that part's body. Facts that read files print ``##GPUHOST section NAME`` then
the file, or ``##GPUHOST missing`` when it does not exist (:func:`cat_section` writes that shell).

The audit probe frames its sections differently (stdout, stderr and exit code per section, byte
exact): :func:`gpuhost.probe.sections.split_sections`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

MARK = "##GPUHOST"
SECTION = f"{MARK} section "
MISSING = f"{MARK} missing"


class MarkedSection(NamedTuple):
    name: str
    args: list[str]
    lines: list[str]


def split_marked(lines: Iterable[str], prefix: str, maxsplit: int = -1) -> list[MarkedSection]:
    """Cut ``lines`` at every line starting with ``prefix`` (``"##GPUHOST "``), in order.

    The rest of a marker line is split on single spaces (at most ``maxsplit`` times): the first
    word is the name, the others its arguments. Lines before the first marker are dropped.
    """
    sections: list[MarkedSection] = []
    for line in lines:
        if line.startswith(prefix):
            words = line[len(prefix) :].split(" ", maxsplit)
            sections.append(MarkedSection(words[0], words[1:], []))
        elif sections:
            sections[-1].lines.append(line)
    return sections


def split_sections(lines: Iterable[str]) -> dict[str, list[str]]:
    """Output made of ``##GPUHOST section NAME`` headers and their lines → {NAME: lines} (a name
    given twice gets both bodies, in order)."""
    sections: dict[str, list[str]] = {}
    for section in split_marked(lines, SECTION):
        sections.setdefault(section.name, []).extend(section.lines)
    return sections


def section_text(sections: dict[str, list[str]], name: str) -> str | None:
    """A section's lines joined with "\\n"; None when the section is absent or says missing."""
    body = sections.get(name)
    if body is None or body == [MISSING]:
        return None
    return "\n".join(body)


def cat_section(name: str, path: str) -> str:
    """Shell that prints a ``section NAME`` marker, then the file or the missing marker."""
    return f"echo '{SECTION}{name}'; cat {path} 2>/dev/null || echo '{MISSING}'"
