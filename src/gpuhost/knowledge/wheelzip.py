"""A wheel's ``*.dist-info/METADATA`` read out of the zip with a few byte ranges, as pip's lazy
wheel does: the end of the file (end-of-central-directory record and the central directory), then
the member's local header and its compressed bytes. Used where an index publishes no PEP 658
``.metadata`` file (every TensorFlow wheel on PyPI).

Pure over ``read(start, length) -> bytes`` and the file size: the HTTP side is in
:mod:`gpuhost.knowledge.pypi`. Anything that is not such a zip raises :class:`ValueError`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

_EOCD = b"PK\x05\x06"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
TAIL = 65536 + 22  # the longest zip comment plus the record
_MAX_METADATA = 4 * 1024 * 1024

Reader = Callable[[int, int], bytes]


def _central_directory(read: Reader, size: int) -> bytes:
    start = max(0, size - TAIL)
    tail = read(start, size - start)
    at = tail.rfind(_EOCD)
    if at < 0 or len(tail) < at + 22:
        raise ValueError("no zip end-of-central-directory record at the end of the file")
    cd_size, cd_offset = struct.unpack("<II", tail[at + 12 : at + 20])
    if cd_offset == 0xFFFFFFFF or cd_offset + cd_size > size:
        raise ValueError("a zip64 or damaged central directory")
    if cd_offset >= start:
        return tail[cd_offset - start : cd_offset - start + cd_size]
    return read(cd_offset, cd_size)


def _entries(cd: bytes) -> dict[str, tuple[int, int, int, int]]:
    """name -> (method, compressed size, uncompressed size, local header offset)."""
    out = {}
    pos = 0
    while pos + 46 <= len(cd) and cd[pos : pos + 4] == _CENTRAL:
        method, _, _, _, csize, usize, nlen, elen, clen = struct.unpack(
            "<HHHIIIHHH", cd[pos + 10 : pos + 34]
        )
        (offset,) = struct.unpack("<I", cd[pos + 42 : pos + 46])
        name = cd[pos + 46 : pos + 46 + nlen].decode("utf-8", "replace")
        out[name] = (method, csize, usize, offset)
        pos += 46 + nlen + elen + clen
    if not out:
        raise ValueError("an empty or damaged zip central directory")
    return out


def metadata_member(names: list[str]) -> str | None:
    """The ``<name>-<version>.dist-info/METADATA`` member (top level only)."""
    found = [n for n in names if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    return found[0] if len(found) == 1 else None


def read_metadata(read: Reader, size: int) -> str:
    """The METADATA text of the wheel whose bytes ``read`` gives."""
    entries = _entries(_central_directory(read, size))
    name = metadata_member(list(entries))
    if name is None:
        raise ValueError("no single *.dist-info/METADATA member")
    method, csize, usize, offset = entries[name]
    if usize > _MAX_METADATA or csize > _MAX_METADATA:
        raise ValueError(f"{name} is larger than {_MAX_METADATA} bytes")
    header = read(offset, 30)
    if header[:4] != _LOCAL:
        raise ValueError(f"no local file header for {name}")
    nlen, elen = struct.unpack("<HH", header[26:30])
    data = read(offset + 30 + nlen + elen, csize)
    if method == 0:
        raw = data
    elif method == 8:
        raw = zlib.decompress(data, -15)
    else:
        raise ValueError(f"{name} is stored with zip method {method} (expected 0 or 8)")
    return raw.decode("utf-8")
