"""Every byte from a host is data: the one escaping rule for what reaches a terminal or XML.

A host's ``uname -r``, GPU name, torch version, file contents or stderr can hold terminal
controls: OSC sequences (window title, OSC 52 clipboard), CSI (cursor moves, erasing), C1 codes
(U+0080-U+009F, which some terminals obey as ESC sequences), CR and backspace (overwriting what
was printed), bidirectional overrides (text shown in another order). ``terminal_text`` shows each
of them escaped, JSON-style (``\\u001b``, ``\\r``, ``\\b``), so the operator sees them and the
terminal obeys none; newline and tab stay.

gpuhost's own colours and status line are the only controls it writes: ``terminal.style`` and
``FleetProgress`` write them as private-use stand-ins (``OWN_ESC``, ``OWN_CR``) which
``terminal_output`` turns into the real characters while it escapes everything else.
``cli.main`` applies both to every line written to stdout and stderr (``EscapingStream``), so no
writer can forget it.

``xml_text``: what XML 1.0 cannot carry (C0 controls other than tab/newline/CR, lone surrogates,
U+FFFE/U+FFFF) shown escaped the same way, for JUnit files.
"""

from __future__ import annotations

import re
import threading
from typing import IO, Any

from gpuhost.redaction import redact_known, redact_written

OWN_ESC = "\ue01b"  # gpuhost's own ESC (colours, the status line's erase)
OWN_CR = "\ue00d"  # gpuhost's own CR (the status line)
_OWN = re.compile("[\ue000-\ue0ff]")

# Every character of the Unicode categories a terminal obeys or shows as nothing: controls (Cc:
# C0 but tab and newline, DEL, C1), format characters (Cf: bidirectional controls, zero-width
# characters, soft hyphen, invisible tag characters, ...), line/paragraph separators (Zl, Zp),
# surrogates (Cs) and private use (Co, where gpuhost's own stand-ins live: a host cannot forge
# them). tests/reports/test_hostile_bytes.py checks it against unicodedata.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2"
    "\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\uf8ff\ufeff"
    "\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f\U000f0000-\U000ffffd"
    "\U00100000-\U0010fffd]"
)
_UNSAFE_LINE = re.compile(f"[\n\t{_UNSAFE.pattern[1:-1]}]")
_OUTPUT = re.compile(f"(?P<own>{OWN_ESC}\\[[0-9;]*[mK]|{OWN_CR})|{_UNSAFE.pattern}")
_XML_UNSAFE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_SHORT = {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _shown(match: re.Match[str]) -> str:
    char = match.group()
    code = ord(char)
    return _SHORT.get(char) or (f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")


def terminal_text(text: str, one_line: bool = False) -> str:
    """``text`` with every control a terminal would obey shown escaped (see the module doc);
    ``one_line``: newline and tab too (a field that must stay on its line)."""
    return (_UNSAFE_LINE if one_line else _UNSAFE).sub(_shown, text)


def xml_text(text: str) -> str:
    """``text`` with the characters XML 1.0 cannot carry shown escaped (``\\u001b``)."""
    return _XML_UNSAFE.sub(_shown, text)


def terminal_output(text: str) -> str:
    """What ``EscapingStream`` writes for ``text``: ``terminal_text``, except that gpuhost's
    own stand-ins in their only forms (a colour or erase sequence, a CR) become the real
    controls, in the same single pass (escaped text can never turn into a control)."""

    def one(match: re.Match[str]) -> str:
        own = match.group("own")
        return own.replace(OWN_ESC, "\x1b").replace(OWN_CR, "\r") if own else _shown(match)

    return _OUTPUT.sub(one, text)


def own_controls(text: str) -> str:
    """``text`` (gpuhost's own styling, e.g. ``click.style``'s output) with its ESC and CR as
    the stand-ins ``EscapingStream`` lets through."""
    return text.replace("\x1b", OWN_ESC).replace("\r", OWN_CR)


class StreamError(OSError):
    """Writing to standard output or error failed (``name``: which; ``stream``: the stream)."""

    def __init__(self, errno: int | None, strerror: str | None, name: str, stream: Any) -> None:
        super().__init__(errno, strerror or "write failed")
        self.name = name
        self.stream = stream


class EscapingStream:
    """A text stream that shows escaped every control character written to it but gpuhost's
    own (see the module doc); everything else is the wrapped stream's. It has no ``buffer``
    attribute on purpose: nothing can write around it."""

    def __init__(self, stream: IO[str], name: str = "the terminal") -> None:
        self._stream = stream
        self._name = name
        self._held = ""  # the end of the last write that may begin a secret (redact_written)
        self._lock = threading.Lock()

    @property
    def wrapped(self) -> IO[str]:
        return self._stream

    def write(self, text: str) -> int:
        with self._lock:
            now, self._held = redact_written(self._held + text)
            self._write(now)
        return len(text)

    def release(self) -> None:
        """Write what was held back (the stream's writer is done: the end was no secret)."""
        with self._lock:
            held, self._held = self._held, ""
            self._write(redact_known(held))

    def _write(self, text: str) -> None:
        if not text:
            return
        try:
            self._stream.write(terminal_output(text))
        except OSError as exc:  # a full disk, a closed pipe: the CLI says so in one line
            raise StreamError(exc.errno, exc.strerror, self._name, self._stream) from exc

    def flush(self) -> None:
        try:
            self._stream.flush()
        except OSError as exc:
            raise StreamError(exc.errno, exc.strerror, self._name, self._stream) from exc

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        if name == "buffer":
            raise AttributeError(name)
        return getattr(self._stream, name)
