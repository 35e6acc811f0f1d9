"""Helpers shared by the parsers: input checks and value conversion.

Every parser is a pure function from captured text to typed data. Values that a tool prints when it
has nothing to say ("N/A", "[Not Supported]", "Requested functionality has been deprecated", ...)
become ``None``; malformed, truncated or binary input raises :class:`gpuhost.errors.ParseError`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from gpuhost.errors import ParseError

# Values meaning "no value" in nvidia-smi, nvidia-container-cli and collect_env outputs.
NO_VALUE = frozenset(
    {
        "",
        "-",
        "n/a",
        "[n/a]",
        "na",
        "none",
        "not supported",
        "[not supported]",
        "not available",
        "not found",
        "unknown",
        "unknown error",
        "[unknown error]",
        "insufficient permissions",
        "[insufficient permissions]",
        "(null)",
        "could not collect",
        "requested functionality has been deprecated",
        "[requested functionality has been deprecated]",
    }
)
DEPRECATED = "requested functionality has been deprecated"
UNSUPPORTED = frozenset({"not supported", "[not supported]", DEPRECATED, f"[{DEPRECATED}]"})

_CONTROL_RE = re.compile(r"[\x00-\x08\x0e-\x1f\x7f\ufffd]")
_NUMBER_RE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([A-Za-z%/]*)\s*$")
_TRUE_WORDS = frozenset({"enabled", "yes", "on", "active", "true", "supported"})
_FALSE_WORDS = frozenset({"disabled", "no", "off", "not active", "false"})

MAX_INPUT_CHARS = 50_000_000


def first_line(text: str, limit: int = 80) -> str:
    """The first non-blank line of ``text``, shortened for an error message."""
    for line in text.splitlines():
        if line.strip():
            line = line.strip()
            return line if len(line) <= limit else line[: limit - 3] + "..."
    return ""


def require_text(text: object, expected: str) -> str:
    """Return ``text`` normalised (CRLF → LF) or raise ParseError if it is not readable text."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ParseError(f"expected {expected}, found binary data (not UTF-8)") from exc
    if not isinstance(text, str):
        raise ParseError(f"expected {expected} as text, found {type(text).__name__}")
    if len(text) > MAX_INPUT_CHARS:
        raise ParseError(f"expected {expected}, found {len(text)} characters (too large)")
    sample = text[:65536]
    bad = len(_CONTROL_RE.findall(sample))
    if "\x00" in sample or bad > max(4, len(sample) // 100):
        raise ParseError(f"expected {expected}, found binary data")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def is_blank(text: str) -> bool:
    return not text.strip()


def clean(value: str | None) -> str | None:
    """Strip ``value``; return None for the tools' "no value" words."""
    if value is None:
        return None
    value = value.strip()
    if value.lower() in NO_VALUE:
        return None
    return value


def is_unsupported(value: str | None) -> bool:
    return value is not None and value.strip().lower() in UNSUPPORTED


def to_number(value: str | None) -> float | None:
    """'230.00 W' → 230.0, '16x' → 16.0, '35 %' → 35.0; anything else → None."""
    value = clean(value)
    if value is None:
        return None
    value = value.rstrip("x") if re.fullmatch(r"\d+x", value) else value
    match = _NUMBER_RE.match(value)
    return finite(match.group(1)) if match else None


def finite(digits: str) -> float | None:
    """``digits`` as a float, None when that is not finite (hundreds of digits are inf, which
    passes any 'at least' comparison)."""
    number = float(digits)
    return number if math.isfinite(number) else None


def to_int(value: str | None) -> int | None:
    """'210 MHz' → 210, '16x' → 16, '0x1A' → 26; anything else → None."""
    cleaned = clean(value)
    if cleaned is not None and re.fullmatch(r"0x[0-9A-Fa-f]+", cleaned):
        return int(cleaned, 16)
    number = to_number(value)
    if number is None or number != int(number):
        return None
    return int(number)


def to_bool(value: str | None) -> bool | None:
    """'Enabled'/'Yes'/'On'/'Active' → True, 'Disabled'/'No'/'Off'/'Not Active' → False."""
    value = clean(value)
    if value is None:
        return None
    word = value.lower()
    if word in _TRUE_WORDS:
        return True
    if word in _FALSE_WORDS:
        return False
    return None


def sum_known(values: Iterable[int | None]) -> int | None:
    """Sum of the known values; None when none is known."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


_BRACKET_NOTE_RE = re.compile(r"\s*\[[^\]]*\]\s*$")


def version_value(value: str | None) -> str | None:
    """A version field without a trailing note: '610.57.04 [Deprecated; ...]' → '610.57.04'."""
    value = clean(value)
    if value is None:
        return None
    return clean(_BRACKET_NOTE_RE.sub("", value))
