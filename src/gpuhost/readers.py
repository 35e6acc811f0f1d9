"""Reading files a user hands to gpuhost (captures, reports, smoke results) without surprises.

- :func:`read_text`: only a regular file is opened (a FIFO or device would block or never end),
  at most ``limit`` bytes; UTF-8 with or without a BOM and UTF-16 with a BOM (what Windows
  PowerShell's ``>`` writes) are read; anything else is one ConfigError line (exit 2).
- :func:`read_json`: that text as JSON, the error naming line and column.
- :func:`check_shape`: a document against one of gpuhost's JSON Schemas (``gpuhost.schemas``),
  the error naming the field path (``hosts[3].findings[0].severity``), what was found and what
  is expected.
"""

from __future__ import annotations

import codecs
import json
import os
import stat
from pathlib import Path
from typing import Any

from gpuhost.errors import ConfigError

# The largest file a user hands over that is read (a capture, a smoke result).
MAX_FILE_BYTES = 50_000_000


MAX_BYTES = 50_000_000
_BOMS = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode(data: bytes, source: str) -> str:
    """``data`` as text: a BOM decides (UTF-8, UTF-16 LE/BE), else UTF-8, else UTF-16 when
    every other byte is NUL (UTF-16 without a BOM); ConfigError for anything else."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec)
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"{source}: starts with a {codec} byte order mark but is not {codec} text "
                    f"(byte {exc.start}); expected UTF-8 or UTF-16 text"
                ) from None
    if len(data) >= 4 and len(data) % 2 == 0:  # UTF-16 without a BOM: ASCII with NUL halves
        for zeros, text, codec in (
            (data[1::2], data[0::2], "utf-16-le"),
            (data[0::2], data[1::2], "utf-16-be"),
        ):
            if not zeros.strip(b"\x00") and 0 not in text:
                try:
                    return data.decode(codec)
                except UnicodeDecodeError:
                    break
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{source}: binary data, not text (byte 0x{data[exc.start]:02x} at offset "
            f"{exc.start} is not UTF-8); expected UTF-8 or UTF-16 text"
        ) from None


def read_text(path: str | Path, what: str, limit: int = MAX_BYTES) -> str:
    """The text of the regular file ``path`` (``what`` it should be, for messages)."""
    name = str(path)
    try:
        info = os.stat(name)
    except OSError as exc:
        raise ConfigError(
            f"{name}: cannot read file ({exc.strerror or exc}); expected {what}"
        ) from None
    if stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{name}: is a directory; expected {what}")
    if not stat.S_ISREG(info.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "not a regular file"
        raise ConfigError(f"{name}: is {kind}; expected {what} in a regular file")
    try:
        with open(name, "rb") as file:
            data = file.read(limit + 1)
    except OSError as exc:
        raise ConfigError(
            f"{name}: cannot read file ({exc.strerror or exc}); expected {what}"
        ) from None
    if len(data) > limit:
        raise ConfigError(f"{name}: larger than {limit} bytes; expected {what}")
    return decode(data, name)


def read_json(path: str | Path, what: str) -> Any:
    """The JSON document in ``path``; ConfigError naming line and column when it is not JSON."""
    text = read_text(path, what)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"{path}: not JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); expected {what}"
        ) from None
    except RecursionError:
        raise ConfigError(f"{path}: JSON nested too deeply; expected {what}") from None
    except ValueError as exc:  # a number of thousands of digits (Python's int limit)
        raise ConfigError(f"{path}: JSON value not readable ({exc}); expected {what}") from None


def field_path(parts: Any) -> str:
    """``['hosts', 3, 'findings']`` -> ``hosts[3].findings`` (``(document)`` when empty)."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document)"


def check_shape(doc: Any, schema: str, source: str) -> None:
    """``doc`` against gpuhost's JSON Schema ``schema``; ConfigError naming the field path of the
    most relevant problem (jsonschema's best match)."""
    from jsonschema import Draft202012Validator
    from jsonschema.exceptions import best_match
    from referencing import Registry, Resource

    from gpuhost.schemas import ID_PREFIX, load_schema, registry_resources

    registry: Registry[Any] = Registry().with_resources(
        (uri, Resource.from_contents(contents)) for uri, contents in registry_resources()
    )
    validator = Draft202012Validator(load_schema(schema), registry=registry)
    error = best_match(validator.iter_errors(doc))
    if error is None:
        return
    message = error.message if len(error.message) <= 160 else error.message[:157] + "..."
    raise ConfigError(
        f"{source}: {field_path(error.absolute_path)}: {message}; expected a document of "
        f"schema {ID_PREFIX}{schema}"
    )
