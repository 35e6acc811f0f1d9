"""Parse Container Device Interface specs (``/etc/cdi``, ``/var/run/cdi``): which NVIDIA driver
version a spec was generated for (pure).

``nvidia-ctk cdi generate`` writes the driver's library files by their versioned names
(``/usr/lib/x86_64-linux-gnu/libcuda.so.535.161.07``) and, since toolkit 1.17, a hook argument
``--host-driver-version=575.57.08``: after a driver change the spec names files that are gone
and GPU containers fail to start until it is regenerated. A spec file is YAML or JSON (a CDI
spec is either; JSON is read as YAML)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from gpuhost.datafiles import load_yaml, yaml_problem
from gpuhost.errors import ParseError
from gpuhost.parsers._common import require_text
from gpuhost.parsers.marked import split_marked
from gpuhost.parsers.smi_model import _ToDict

# the libraries whose file name carries the driver version (never a library's own version)
DRIVER_LIBRARY_RE = re.compile(
    r"/lib(?:cuda|nvidia-ml|nvidia-ptxjitcompiler)\.so\.(\d+\.\d+(?:\.\d+)?)$"
)
HOST_DRIVER_ARG_RE = re.compile(r"^--host-driver-version=(\d+\.\d+(?:\.\d+)?)$")
CDI_SECTION = "##GPUHOST cdi "
SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")
NVIDIA_SPEC = "/etc/cdi/nvidia.yaml"


@dataclass(frozen=True)
class CdiSpec(_ToDict):
    """One spec file: its ``kind`` (``nvidia.com/gpu``) and the driver versions it names
    (usually one; none for a spec that names no driver library). ``error``: why it could not be
    read (the file is kept in the list so the audit can say so)."""

    path: str
    kind: str | None = None
    driver_versions: list[str] = field(default_factory=list)
    error: str | None = None

    @property
    def nvidia(self) -> bool:
        return bool(self.kind and self.kind.startswith("nvidia.com/")) or bool(self.driver_versions)


def _strings(node: Any) -> list[str]:
    """Every string inside a parsed YAML/JSON document (depth first)."""
    found: list[str] = []
    stack = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def driver_versions_of(document: Any) -> list[str]:
    """The driver versions a parsed spec names: versioned driver library paths and the
    ``--host-driver-version=`` hook argument, sorted, each once."""
    versions: set[str] = set()
    for text in _strings(document):
        match = DRIVER_LIBRARY_RE.search(text) or HOST_DRIVER_ARG_RE.match(text)
        if match:
            versions.add(match.group(1))
    return sorted(versions)


def parse_cdi_spec(text: str, path: str) -> CdiSpec:
    """One spec file's text → CdiSpec; text that is not a CDI spec raises ParseError naming
    ``path``."""
    text = require_text(text, f"a CDI spec ({path})")
    try:
        document = load_yaml(text)
    except yaml.YAMLError as exc:
        raise ParseError(f"{path}: not YAML or JSON ({yaml_problem(exc)})") from exc
    if not isinstance(document, dict) or "cdiVersion" not in document:
        raise ParseError(f"{path}: expected a CDI spec (a mapping with cdiVersion and kind)")
    kind = document.get("kind")
    return CdiSpec(
        path=path,
        kind=str(kind) if kind is not None else None,
        driver_versions=driver_versions_of(document),
    )


def list_specs_command() -> str:
    """Shell printing every spec file of SPEC_DIRS as ``##GPUHOST cdi PATH`` then its text
    (the first 4 MiB): read by the audit probe and provision's CDI fact."""
    dirs = " ".join(f"{d}/*.yaml {d}/*.yml {d}/*.json" for d in SPEC_DIRS)
    return (
        f'for f in {dirs}; do [ -f "$f" ] || continue; '
        f'printf \'{CDI_SECTION}%s\\n\' "$f"; head -c 4194304 "$f"; echo; done; true'
    )


def parse_cdi_specs(text: str) -> list[CdiSpec]:
    """:func:`list_specs_command`'s output → one CdiSpec per file (a file that is not a spec
    becomes a CdiSpec with ``error``; the others are still read)."""
    text = require_text(text, "CDI spec files")
    specs = []
    for section in split_marked(text.splitlines(), CDI_SECTION, maxsplit=0):
        path = section.name
        try:
            specs.append(parse_cdi_spec("\n".join(section.lines), path))
        except ParseError as exc:
            specs.append(CdiSpec(path=path, error=str(exc)))
    return specs


def stale_specs(specs: list[CdiSpec], driver_version: str) -> list[CdiSpec]:
    """The NVIDIA specs that name a driver version other than ``driver_version``."""
    return [
        s
        for s in specs
        if s.error is None and s.nvidia and any(v != driver_version for v in s.driver_versions)
    ]
