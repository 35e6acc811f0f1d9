"""Cut the probe's output back into its sections (pure; no I/O).

The probe (:mod:`gpuhost.probe.script`) frames each section as (``\\n`` = newline)::

    \\n##GPUHOST## begin NAME\\n<stdout>
    \\n##GPUHOST## stderr NAME\\n<stderr>
    \\n##GPUHOST## end NAME RC\\n

The leading newline of every marker is added by the probe, so a section whose output does not
end in a newline still gets its marker on a line of its own; the splitter removes exactly that
newline again, so ``stdout`` is what the command printed, byte for byte.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from gpuhost.errors import ParseError
from gpuhost.probe.script import MARK

RC_MISSING_TOOL = 127
RC_TIMEOUT = 124

_SECTION_RE = re.compile(
    rf"\n{re.escape(MARK)} begin (?P<name>[\w.-]+)\n"
    rf"(?P<stdout>.*?)\n{re.escape(MARK)} stderr (?P=name)\n"
    rf"(?P<stderr>.*?)\n{re.escape(MARK)} end (?P=name) (?P<rc>\d+)\n",
    re.S,
)
_BEGIN_RE = re.compile(rf"^{re.escape(MARK)} begin ([\w.-]+)$", re.M)


@dataclass(frozen=True)
class SectionOutput:
    """What one probe section printed and how it ended."""

    name: str
    stdout: str
    stderr: str
    rc: int

    @property
    def missing_tool(self) -> bool:
        return self.rc == RC_MISSING_TOOL

    @property
    def timed_out(self) -> bool:
        return self.rc == RC_TIMEOUT

    @property
    def ok(self) -> bool:
        return self.rc == 0


@dataclass(frozen=True)
class ProbeOutput:
    """Every section found, plus the names of sections that began but never ended."""

    sections: dict[str, SectionOutput]
    truncated: tuple[str, ...] = ()

    def get(self, name: str) -> SectionOutput | None:
        return self.sections.get(name)

    def stdout(self, name: str) -> str:
        """The section's stdout, or "" when the section is absent."""
        section = self.sections.get(name)
        return section.stdout if section else ""


def join_lines(lines: Iterable[str]) -> str:
    """Rebuild the text from the lines pyinfra hands a fact (newlines stripped)."""
    return "\n".join(lines) + "\n"


def split_sections(text: str) -> ProbeOutput:
    """Split the probe's whole stdout into sections.

    Text outside the markers (a login banner, shell noise) is ignored. A section that began but
    did not end (connection cut, probe killed) is listed in ``truncated``. Output with no section
    at all raises ParseError: it is not the probe's output.
    """
    if not isinstance(text, str):
        raise ParseError(
            f"expected the gpuhost probe's output as text, found {type(text).__name__}"
        )
    text = text.replace("\r\n", "\n")
    if not text.startswith("\n"):
        text = "\n" + text
    if not text.endswith("\n"):
        text += "\n"
    sections: dict[str, SectionOutput] = {}
    for match in _SECTION_RE.finditer(text):
        name = match.group("name")
        sections[name] = SectionOutput(
            name=name,
            stdout=match.group("stdout"),
            stderr=match.group("stderr"),
            rc=int(match.group("rc")),
        )
    begun = _BEGIN_RE.findall(text)
    truncated = tuple(name for name in begun if name not in sections)
    if not sections and not truncated:
        start = text.strip().splitlines()[0][:80] if text.strip() else ""
        raise ParseError(
            f"expected the gpuhost probe's sectioned output ({MARK} markers), found: {start!r}"
            if start
            else "expected the gpuhost probe's output, found nothing"
        )
    return ProbeOutput(sections=sections, truncated=truncated)
