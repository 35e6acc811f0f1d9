"""Parse CUDA toolkit and cuDNN version outputs: ``nvcc --version`` and ``cudnn_version.h``;
the ``/usr/local/cuda`` default link (``parse_cuda_link``)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from gpuhost.errors import ParseError
from gpuhost.parsers._common import first_line, is_blank, require_text

NVCC_EXPECTED = "nvcc --version output ('Cuda compilation tools, release X.Y, VX.Y.Z')"
# Cuda compilation tools, release 12.5, V12.5.82
NVCC_RE = re.compile(
    r"Cuda compilation tools,\s*release\s+(?P<release>\d+\.\d+),\s*V(?P<version>\d+(?:\.\d+)+)"
)
CUDNN_EXPECTED = "cudnn_version.h (or cudnn.h) with CUDNN_MAJOR/MINOR/PATCHLEVEL defines"
CUDNN_DEFINE_RE = re.compile(r"^\s*#\s*define\s+CUDNN_(MAJOR|MINOR|PATCHLEVEL)\s+(\d+)\s*$", re.M)


def parse_nvcc(text: str) -> tuple[str, str] | None:
    """(full version "12.5.82", release "12.5"); None for empty output (nvcc absent)."""
    text = require_text(text, NVCC_EXPECTED)
    if is_blank(text):
        return None
    match = NVCC_RE.search(text)
    if match is None:
        raise ParseError(f"expected {NVCC_EXPECTED}, found: {first_line(text)!r}")
    return match.group("version"), match.group("release")


def parse_nvcc_version(text: str) -> str | None:
    """The full toolkit version, e.g. "12.5.82" (see ``nvcc_release`` for "12.5")."""
    parsed = parse_nvcc(text)
    return parsed[0] if parsed else None


def nvcc_release(text: str) -> str | None:
    """The release, e.g. "12.5"."""
    parsed = parse_nvcc(text)
    return parsed[1] if parsed else None


def parse_cudnn_header(text: str) -> str | None:
    """ "MAJOR.MINOR.PATCHLEVEL" from cudnn_version.h; None for empty text (no header)."""
    text = require_text(text, CUDNN_EXPECTED)
    if is_blank(text):
        return None
    parts = dict(CUDNN_DEFINE_RE.findall(text))
    if "MAJOR" not in parts or "MINOR" not in parts:
        raise ParseError(f"expected {CUDNN_EXPECTED}, found: {first_line(text)!r}")
    return f"{int(parts['MAJOR'])}.{int(parts['MINOR'])}.{int(parts.get('PATCHLEVEL', '0'))}"


def cudnn_version_from_int(number: int) -> str:
    """Decode ``torch.backends.cudnn.version()``: 8.x uses M*1000+m*100+p (8101 → 8.1.1),
    9.x uses M*10000+m*100+p (90600 → 9.6.0); 7605 → 7.6.5."""
    if number < 0:
        raise ParseError(f"expected a cuDNN version number, found {number}")
    if number >= 10000:
        major, rest = divmod(number, 10000)
    else:
        major, rest = divmod(number, 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


CUDA_LINK_KINDS = ("link", "absent", "other")
ALTERNATIVE_PATH = "/etc/alternatives/cuda"
ALTERNATIVE_MODES = ("auto", "manual")


@dataclass(frozen=True)
class CudaLink:
    """``/usr/local/cuda`` as ``facts.cuda_link.CudaDefaultLink`` reads it: ``kind`` link (a
    symbolic link to ``link``), absent, or other (a directory or file, never changed); where it
    goes through ``/etc/alternatives/cuda``, that link's target ``alternative`` and the
    alternatives group's ``mode`` (auto or manual, its admin file's first line: Debian's
    update-alternatives and RHEL's alternatives write the same); ``exists``: whether the
    directory asked about is there (None: not asked)."""

    kind: str = "absent"
    link: str | None = None
    alternative: str | None = None
    mode: str | None = None
    exists: bool | None = None

    @property
    def default(self) -> str | None:
        """The toolkit directory it makes the default: the alternative's target where it goes
        through the alternatives group, else the link's own target."""
        if self.kind != "link":
            return None
        return self.alternative if self.link == ALTERNATIVE_PATH else self.link

    def record(self) -> dict[str, str | None]:
        """What a snapshot keeps (``exists`` is a question of the moment, not kept)."""
        return {"kind": self.kind, "link": self.link, "alternative": self.alternative,
                "mode": self.mode}


def parse_cuda_link(text: str) -> CudaLink:
    """``key=value`` lines of the link fact (pure); unknown lines and values are left out."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("kind", "link", "alternative", "mode", "exists") and value.strip():
            values.setdefault(key, value.strip())
    link = values.get("link")
    kind = "link" if link else values.get("kind", "absent")
    mode = values.get("mode")
    return CudaLink(
        kind=kind if kind in CUDA_LINK_KINDS else "other",
        link=link,
        alternative=values.get("alternative"),
        mode=mode if mode in ALTERNATIVE_MODES else None,
        exists={"yes": True, "no": False}.get(values.get("exists", "")),
    )
