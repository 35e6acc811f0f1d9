"""The value types of inventory data keys and the ``Key`` row (used by ``contract.py`` and the
key tables it gathers, e.g. ``collective_keys.py``).

Values that end up in config files gpuhost writes (the ssh_config of gpuhost check, sshd's
AllowUsers, authorized_keys) must stay data there: no control character (a newline would add a
line such as ProxyCommand), and a word no whitespace, quote, '#' or backslash either.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, Field, StrictFloat, StrictInt, StrictStr

_CONTROL = "\x00-\x1f\x7f-\x9f"
_LINE_RE = re.compile(f"^[^{_CONTROL}]+$")
_PATH_RE = re.compile(f'^[^{_CONTROL}"]+$')
_WORD_RE = re.compile(f"^(?!-)[^{_CONTROL}\\s\"'#\\\\]+$")


@dataclass(frozen=True)
class Key:
    """One inventory data key: its pydantic type, the expected form in words, default, meaning
    and the commands that read it."""

    name: str
    type: Any
    expected: str
    default: Any
    meaning: str
    used_by: str


def key(name: str, type_: Any, expected: str, default: Any, meaning: str, used_by: str) -> Key:
    return Key(name, type_, expected, default, meaning, used_by)


def matches(pattern: re.Pattern[str]) -> AfterValidator:
    def check(value: str) -> str:
        if not pattern.fullmatch(value):  # not match: '$' also matches before a final newline
            raise ValueError("")
        return value

    return AfterValidator(check)


NonEmpty = Annotated[StrictStr, Field(min_length=1)]
Port = Annotated[StrictInt, Field(ge=1, le=65535)]
Positive = Annotated[StrictInt, Field(gt=0)]
Seconds = Annotated[StrictInt | StrictFloat, Field(gt=0, allow_inf_nan=False)]
PositiveNumber = Seconds
Word = Annotated[StrictStr, matches(_WORD_RE)]
PathText = Annotated[StrictStr, matches(_PATH_RE)]


# a URL written into apt's configuration or a sources line: no whitespace, quote, ';', '#',
# backslash or control character, and a host after the scheme
APT_URL_RE = re.compile(f"^https?://[^{_CONTROL}\\s\"'#;\\\\/]+(/[^{_CONTROL}\\s\"'#;\\\\]*)?$")


def port_in_range(value: str) -> str:
    """``value`` when it names a host, its port (if any) is 1-65535 and its user information
    holds no second '@'; ValueError otherwise. ``http://:3128`` went into apt's and dnf's
    configuration as a proxy on no host; ``http://u:p@ss@proxy`` is read differently by
    different clients (RFC 3986 3.2.1: userinfo holds no '@'; it is written %40)."""
    parts = urllib.parse.urlsplit(value)
    if parts.netloc.count("@") > 1:
        raise ValueError("it has more than one '@'; write an '@' in a user name or password "
                         "as %40")
    try:
        port = parts.port  # ValueError beyond 0-65535 or not a number
    except ValueError:
        port = 0
    if port == 0:
        raise ValueError("its port is not 1-65535")
    if not parts.hostname:
        raise ValueError("it names no host")
    return value


AptUrl = Annotated[StrictStr, matches(APT_URL_RE), AfterValidator(port_in_range)]


def plain_user_info(value: str) -> str:
    """``value`` when its user name and password, percent-decoded as a client decodes them,
    hold no control character; ValueError otherwise. dnf.conf gets them decoded
    (``proxy_password=``): a ``%0A`` there would add a line of its own (``sslverify=False``)."""
    parts = urllib.parse.urlsplit(value)
    decoded = urllib.parse.unquote(parts.username or "") + urllib.parse.unquote(
        parts.password or "")
    if re.search(f"[{_CONTROL}]", decoded):
        raise ValueError("its user name or password decodes to a control character")
    return value


#: a proxy URL: an ``AptUrl`` whose user information decodes to plain text
ProxyUrl = Annotated[AptUrl, AfterValidator(plain_user_info)]
