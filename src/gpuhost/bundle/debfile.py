"""The control fields of a Debian binary package (``.deb``): an ar archive whose
``control.tar[.gz|.xz|.zst]`` member holds ``./control``. Pure Python for gz, xz and plain tar;
a zstd member (Ubuntu's packages since 21.10) is read with ``dpkg-deb`` when Python cannot."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path

from gpuhost import toolrun
from gpuhost.errors import ConfigError
from gpuhost.pkgmgr import APT

AR_MAGIC = b"!<arch>\n"
_HEADER = 60
#: dpkg-deb reading one package's control file (toolrun's deadline)
DPKG_DEB_TIMEOUT_S = 120.0


def ar_members(data: bytes, source: str) -> dict[str, bytes]:
    """{member name: bytes} of an ar archive; ConfigError naming ``source`` when it is not one."""
    if not data.startswith(AR_MAGIC):
        raise ConfigError(f"{source}: not a Debian package (no ar archive header)")
    members: dict[str, bytes] = {}
    offset = len(AR_MAGIC)
    while offset + _HEADER <= len(data):
        header = data[offset : offset + _HEADER]
        name = header[:16].decode("ascii", "replace").strip().rstrip("/")
        try:
            size = int(header[48:58].decode("ascii").strip())
        except ValueError:
            raise ConfigError(f"{source}: damaged ar member header at byte {offset}") from None
        start = offset + _HEADER
        if start + size > len(data):
            raise ConfigError(f"{source}: truncated (member {name} runs past the end)")
        members[name] = data[start : start + size]
        offset = start + size + (size % 2)
    return members


def parse_control(text: str) -> dict[str, str]:
    """Deb822 fields of one stanza (continuation lines kept, joined with newlines)."""
    fields: dict[str, str] = {}
    last = None
    for line in text.splitlines():
        if line[:1] in (" ", "\t") and last is not None:
            fields[last] += "\n" + line
        elif ":" in line:
            last, _, value = line.partition(":")
            fields[last] = value.strip()
    return fields


def _control_from_tar(blob: bytes, source: str) -> str:
    try:
        with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
            for member in tar.getmembers():
                if member.name in ("./control", "control"):
                    handle = tar.extractfile(member)
                    if handle is not None:
                        return handle.read().decode("utf-8")
    except (tarfile.TarError, EOFError, OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{source}: control archive not readable ({exc})") from None
    raise ConfigError(f"{source}: its control archive has no control file")


def control_text(path: Path) -> str:
    """The ``control`` file of the package at ``path``."""
    members = ar_members(path.read_bytes(), str(path))
    for name, blob in members.items():
        if name in ("control.tar", "control.tar.gz", "control.tar.xz"):
            return _control_from_tar(blob, str(path))
        if name.startswith("control.tar."):
            return _control_with_dpkg(path, name)
    raise ConfigError(f"{path}: not a Debian package (no control.tar member)")


def _control_with_dpkg(path: Path, member: str) -> str:
    argv = APT.control_argv(str(path))
    if shutil.which(argv[0]) is None:
        raise ConfigError(f"{path}: {member} needs {argv[0]} to be read, and it is not installed")
    result = toolrun.run(argv, DPKG_DEB_TIMEOUT_S)
    if result.timed_out:
        raise ConfigError(f"{path}: {argv[0]} did not finish within {DPKG_DEB_TIMEOUT_S:g} s")
    if result.returncode != 0:
        said = result.text(result.stderr).strip()[:200]
        raise ConfigError(f"{path}: {argv[0]} could not read it ({said})")
    return result.text()
