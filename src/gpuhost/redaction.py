"""Secrets kept off every line gpuhost writes (issue 29): log records, error lines, stdout.

Two rules; log records get both (:func:`redact_secrets`, ``connection.RedactSecrets``),
everything written to stdout and stderr the second (:func:`redact_known`,
``escape.EscapingStream``):

- a pair whose key names a password, passphrase, secret or token (``'password': 'x'``,
  ``token=abc``, a logged tuple ``('ssh_password', 'x')``) has its value shown as ``'***'``;
- every secret value gpuhost was given (the inventory's ``ssh_password``, ``ssh_key_password``
  and any other data key naming a secret, a provider's password), registered with
  :func:`remember_secrets` when it is read, is shown as ``***`` wherever it appears, whatever
  surrounds it. Values shorter than :data:`MIN_CHARS` are hidden in pairs only: hiding every
  ``x`` of every line would make the output unreadable and tell which letters the secret has.
  A stream written in pieces (a value printed in two writes) is redacted with
  :func:`redact_written`: the end of a write that could begin a secret is held back until the
  next write (or the stream's end) tells; a write that ends a line is never held.

A third rule for every text, registered or not: the password of a URL's user information
(``https://user:pw@mirror/``, a ``--index``, a bundle URL, ``gpuhost_proxy``) is shown as ``***``
(:func:`redact_url`), in lines, log records and the data files gpuhost writes; the password of
a URL gpuhost is given is registered too (:func:`remember_url_secrets`), so it is hidden where it
shows without its URL.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterable, Mapping

#: the keys whose values are secrets (inventory data, log pairs)
SECRET_KEY_RE = re.compile(r"password|passphrase|secret|token", re.IGNORECASE)
#: a registered value this long or longer is hidden wherever it appears
MIN_CHARS = 4

_KEY = r"[\w-]*(?:password|passphrase|secret|token)[\w-]*"
_VALUE = r"""(?P<value>'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"|[^\s,;})\]]+)"""
# key: value / key=value (quoted or not), or a quoted key then a comma (a logged tuple)
_PAIR_RE = re.compile(
    rf"""(?P<key>['"]?{_KEY}['"]?\s*[:=]\s*|['"]{_KEY}['"]\s*,\s*){_VALUE}""",
    re.IGNORECASE,
)

# scheme://user:password@ (the user kept: it tells which account; the password never shown)
_URL_USERINFO_RE = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:]*):[^\s/?#]*@")

_lock = threading.Lock()
_known: set[str] = set()
_pattern: re.Pattern[str] | None = None
# every proper beginning of a registered form that holds no newline (what a write may end with
# while the secret's rest is still to come), and the longest form's length
_beginnings: frozenset[str] = frozenset()
_longest = 0


def _forms(value: str) -> set[str]:
    """The value as it appears in a line: as is, inside a Python repr (a logged dict or tuple),
    inside JSON."""
    return {
        value,
        repr(value)[1:-1],
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
    }


def remember_secrets(values: Iterable[object]) -> None:
    """Hide these values (the strings among them) in every line from now on."""
    global _pattern, _beginnings, _longest
    new = {
        form
        for value in values
        if isinstance(value, str)
        for form in _forms(value)
        if len(form) >= MIN_CHARS
    }
    with _lock:
        if new <= _known:
            return
        _known.update(new)
        ordered = sorted(_known, key=len, reverse=True)  # a longer secret before its prefix
        _beginnings = frozenset(
            v[:n] for v in _known for n in range(1, len(v)) if "\n" not in v[:n]
        )
        _longest = len(ordered[0])
        _pattern = re.compile("|".join(re.escape(v) for v in ordered))


def remember_data_secrets(data: Mapping[str, object]) -> None:
    """Hide the values of ``data``'s keys that name a secret (a host's inventory data), and
    the password of every URL among its values (``gpuhost_proxy``, a bundle's ``url``, at any
    depth)."""
    remember_secrets(v for k, v in data.items() if isinstance(k, str) and SECRET_KEY_RE.search(k))
    for text in _strings(data, depth=0):
        if "://" in text and "@" in text:
            remember_url_secrets(text)


def _strings(value: object, depth: int) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif depth < 8 and isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item, depth + 1)
    elif depth < 8 and isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item, depth + 1)


def redact_url(text: str) -> str:
    """``text`` with the password of every URL in it as ``***`` (``https://u:***@host/``)."""
    return _URL_USERINFO_RE.sub(r"\g<head>:***@", text)


def remember_url_secrets(url: str) -> None:
    """Hide the password of ``url``'s user information (as written and percent-decoded)
    wherever it appears from now on."""
    from urllib.parse import unquote, urlsplit

    try:
        password = urlsplit(url).password
    except ValueError:
        return
    if password:
        remember_secrets({password, unquote(password)})


def forget_secrets() -> None:
    """Forget every registered value (tests; a long-lived caller done with an inventory)."""
    global _pattern, _beginnings, _longest
    with _lock:
        _known.clear()
        _pattern = None
        _beginnings = frozenset()
        _longest = 0


def redact_known(text: str) -> str:
    """``text`` with every registered secret value as ``***`` (what stdout and stderr get:
    gpuhost's own lines name a secret's key, e.g. "ssh_password: found a list", never its
    value)."""
    pattern = _pattern
    return redact_url(pattern.sub("***", text) if pattern is not None else text)


def redact_written(text: str) -> tuple[str, str]:
    """``text`` (what a stream holds back from before, then a new write) as what can be written
    now, every registered secret in it as ``***``, and the end held back: the longest end,
    after the last secret found, that is the beginning of a registered secret (it may be
    finished by the next write). Nothing is held when no secret is registered, nor once a
    line ends (no beginning held holds a newline)."""
    pattern, beginnings, longest = _pattern, _beginnings, _longest
    if pattern is None:
        return redact_url(text), ""
    found_to = 0
    for match in pattern.finditer(text):
        found_to = match.end()
    held = 0
    for size in range(min(longest - 1, len(text) - found_to), 0, -1):
        if text[-size:] in beginnings:
            held = size
            break
    cut = len(text) - held
    return redact_url(pattern.sub("***", text[:cut])), text[cut:]


def redact_secrets(text: str) -> str:
    """``text`` with every secret pair's value as '***' and every registered secret as ***
    (what a log record gets)."""
    return redact_known(_PAIR_RE.sub(lambda m: m["key"] + "'***'", text))
