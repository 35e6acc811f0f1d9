"""The docs cannot drift from the code: links resolve, and every command example is either run here
or says why it is not.

A fenced block in README.md or docs/*.md that shows a command line (one starting with `gpuhost`,
`sudo gpuhost`, `pytest`, `pip`, `scripts/`, `tests/lab/lab` or `.venv/bin/`) carries, on the line
right before its opening fence, one of these HTML comments (invisible when rendered):

    <!-- docs-test: offline -->                 every `gpuhost ...` line is run here by this test,
                                                in the repository root; exit code 0 unless the
                                                line's trailing comment says "exit N"
    <!-- docs-test: lab PATH::TEST -->          a lab test runs the example on lab hosts (checked
                                                to exist)
    <!-- docs-test: not-run REASON -->          not runnable here, and why (REASON required)
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})(.*)$")
MARKER = re.compile(r"^\s*<!--\s*docs-test:\s*(offline|lab|not-run)\b\s*(.*?)\s*-->\s*$")
COMMAND = re.compile(
    r"^(?:\$\s+)?(?:sudo\s+)?(gpuhost|pytest|pip|scripts/|tests/lab/lab|\.venv/bin/)"
)
LINK = re.compile(r"(?<!\!)\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)|!\[[^\]]*\]\(([^)\s]+)\)")
CODE_PATH = re.compile(
    r"`((?:docs|tests|src|checks|deploys|inventories|bench|scripts)/[\w./-]+"
    r"\.(?:md|py|yaml|yml|png|svg|sh))`"
)
EXIT = re.compile(r"#.*\bexit\s+(\d+)\b")
NO_EXAMPLE_LANGS = {"yaml", "yml", "json", "python", "py", "toml", "ini", "xml", "text", "promql"}


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # 1-based line of the opening fence
    lang: str
    marker: tuple[str, str] | None
    lines: tuple[str, ...]

    @property
    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    def commands(self) -> list[str]:
        return [ln.strip() for ln in self.lines if COMMAND.match(ln.strip())]


def _blocks(doc: Path) -> list[Block]:
    text = doc.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(text):
        m = FENCE.match(text[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(2), m.group(3).strip().split(" ")[0].lower()
        start = i
        body: list[str] = []
        i += 1
        while i < len(text) and not text[i].strip().startswith(fence):
            body.append(text[i])
            i += 1
        marker = None
        if start > 0:
            mm = MARKER.match(text[start - 1])
            if mm:
                marker = (mm.group(1), mm.group(2))
        blocks.append(Block(doc, start + 1, lang, marker, tuple(body)))
        i += 1
    return blocks


def _example_blocks() -> list[Block]:
    return [
        b for doc in DOCS for b in _blocks(doc) if b.lang not in NO_EXAMPLE_LANGS and b.commands()
    ]


def test_every_command_example_is_run_or_says_why_not() -> None:
    unmarked = [b.where for b in _example_blocks() if b.marker is None]
    assert not unmarked, (
        "command examples without a docs-test marker (offline | lab PATH::TEST | not-run REASON) "
        f"on the line before the fence: {unmarked}"
    )
    no_reason = [
        b.where
        for b in _example_blocks()
        if b.marker and b.marker[0] == "not-run" and not b.marker[1]
    ]
    assert not no_reason, f"not-run examples must say why: {no_reason}"


def test_lab_examples_name_an_existing_test() -> None:
    for b in _example_blocks():
        if not b.marker or b.marker[0] != "lab":
            continue
        path, _, name = b.marker[1].partition("::")
        target = ROOT / path
        assert target.is_file(), f"{b.where}: lab test file {path} does not exist"
        assert re.search(rf"^\s*def {re.escape(name)}\(", target.read_text(), re.M), (
            f"{b.where}: {path} has no test {name}"
        )


def _offline_cases() -> list[tuple[str, str, int]]:
    cases = []
    for b in _example_blocks():
        if b.marker and b.marker[0] == "offline":
            for cmd in b.commands():
                m = EXIT.search(cmd)
                cases.append((b.where, cmd, int(m.group(1)) if m else 0))
    return cases


def _argv(command: str) -> list[str]:
    words = shlex.split(command, comments=True)
    if words and words[0] == "$":
        words = words[1:]
    if words and words[0] == "sudo":
        words = words[1:]
    return words


@pytest.mark.parametrize(("where", "command", "expected"), _offline_cases(), ids=lambda v: str(v))
def test_offline_example_runs_with_its_documented_exit_code(
    where: str, command: str, expected: int, tmp_path: Path
) -> None:
    argv = _argv(command)
    assert argv[0] == "gpuhost", f"{where}: offline examples run gpuhost commands only: {command}"
    # files the example writes land in a scratch folder; paths it reads are the repository's
    env = {**os.environ, "GPUHOST_STATE_DIR": str(tmp_path / "state"), "NO_COLOR": "1"}
    argv = [a.replace("/var/lib/node_exporter/", f"{tmp_path}/") for a in argv]
    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost", *argv[1:]],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == expected, (
        f"{where}: `{command}` exited {proc.returncode}, the doc says {expected}\n"
        f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
    )
    assert "Traceback" not in proc.stderr, f"{where}: `{command}` printed a traceback"


def _anchor(heading: str) -> str:
    slug = heading.strip().lower()
    slug = re.sub(r"[^\w\- ]", "", slug)
    return slug.replace(" ", "-")


def _anchors(doc: Path) -> set[str]:
    out: set[str] = set()
    in_fence = False
    for line in doc.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and line.startswith("#"):
            out.add(_anchor(line.lstrip("#")))
    return out


def _links(doc: Path) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    in_fence = False
    for n, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            in_fence = not in_fence
            continue
        if in_fence:
            continue
        for m in LINK.finditer(line):
            found.append((n, m.group(1) or m.group(2)))
        # file names written as code, e.g. `docs/harden.md`, are references too
        for m in CODE_PATH.finditer(line):
            found.append((n, "/" + m.group(1)))
    return found


def _ignored(path: str) -> bool:
    return subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_relative_links_resolve(doc: Path) -> None:
    broken = []
    for n, target in _links(doc):
        if re.match(r"^[a-z]+:", target):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        if path.startswith("/"):  # a path written as code: the repository's, or the package's
            resolved = ROOT / path.lstrip("/")
            if not resolved.exists():
                resolved = ROOT / "src" / "gpuhost" / path.lstrip("/")
        elif path:
            resolved = (doc.parent / path).resolve()
        else:
            resolved = doc
        if not resolved.exists() and path.startswith("/") and _ignored(path.lstrip("/")):
            continue  # a generated file (git ignores it), e.g. a benchmark's work folder
        if not resolved.exists():
            broken.append(f"{doc.relative_to(ROOT)}:{n}: {target} (no such file)")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{doc.relative_to(ROOT)}:{n}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)
