"""Facts about the SSH server: its effective config, gpuhost's drop-in, users' authorized keys.

Each fact is a command plus a pure parser; the parsers (``parse_*``) are reused by ``checks/``.
The effective configuration comes from ``sshd -T`` (what sshd would really use, after Include
and first-match), never from reading the files; it is read by :mod:`gpuhost.parsers.sshd`,
which ``gpuhost audit`` uses too.
"""

from __future__ import annotations

import re
import shlex
from typing import TypedDict

from pyinfra.api import FactBase
from typing_extensions import override

from gpuhost.parsers.marked import MARK, MISSING, cat_section, section_text, split_sections
from gpuhost.parsers.sshd import parse_sshd_t
from gpuhost.probe.script import SSHD_T_CODE

SSHD_CONFIG = "/etc/ssh/sshd_config"
DROPIN_DIR = "/etc/ssh/sshd_config.d"
#: gpuhost's drop-in; "00-" sorts it before every other drop-in so that its values win (first match)
DROPIN_PATH = f"{DROPIN_DIR}/00-gpuhost.conf"
DROPIN_GLOBS = (f"{DROPIN_DIR}/*.conf", "sshd_config.d/*.conf")


#: key types that may start an authorized_keys entry (``ssh-keygen -l`` and sshd(8) AUTHORIZED_KEYS)
KEY_TYPES = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ssh-dss",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
        "ssh-ed25519-cert-v01@openssh.com",
        "ssh-rsa-cert-v01@openssh.com",
        "ecdsa-sha2-nistp256-cert-v01@openssh.com",
        "ecdsa-sha2-nistp384-cert-v01@openssh.com",
        "ecdsa-sha2-nistp521-cert-v01@openssh.com",
        "sk-ssh-ed25519-cert-v01@openssh.com",
        "sk-ecdsa-sha2-nistp256-cert-v01@openssh.com",
    }
)
_BASE64_RE = re.compile(r"^[A-Za-z0-9+/]+={0,3}$")


# --- sshd -T ------------------------------------------------------------------------------------


class SshdEffectiveConfig(FactBase[dict[str, list[str]]]):
    """The configuration sshd really uses (``sshd -T``, needs root), as ``parse_sshd_t`` returns it:

    .. code:: python

        {"port": ["22"], "passwordauthentication": ["no"], "permitrootlogin": ["prohibit-password"]}

    Empty when sshd is not installed or its config does not parse.
    """

    default = dict

    @override
    def requires_command(self) -> str:
        return "sshd"

    @override
    def command(self) -> str:
        return f"{SSHD_T_CODE} 2>/dev/null || true"

    @override
    def process(self, output: list[str]) -> dict[str, list[str]]:
        return parse_sshd_t(output)


# --- config files -------------------------------------------------------------------------------


class SshdFilesDict(TypedDict):
    main_present: bool
    #: the first directive of sshd_config is an Include of /etc/ssh/sshd_config.d/*.conf
    includes_dropins_first: bool
    #: gpuhost's drop-in as text (lines joined with "\n"), None when absent
    dropin: str | None


def include_precedes_settings(main_lines: list[str]) -> bool:
    """True when the first directive of ``sshd_config`` includes the drop-in directory.

    sshd uses the first value it reads for most keywords, so drop-ins only win when they are
    included before any setting of the main file (Debian 12 ships it this way).
    """
    for raw in main_lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = line.split()
        if words[0].lower() != "include":
            return False
        return any(word.strip('"') in DROPIN_GLOBS for word in words[1:])
    return False


def include_problem(main_lines: list[str] | None) -> str | None:
    """Why ``sshd_config`` (its lines; None: missing) does not read the drop-ins first, in one
    line; None when it does (:func:`include_precedes_settings`)."""
    expected = f"expected 'Include {DROPIN_DIR}/*.conf' as its first directive"
    if main_lines is None:
        return f"{SSHD_CONFIG} is missing ({expected})"
    if include_precedes_settings(main_lines):
        return None
    first = next((s for s in (raw.strip() for raw in main_lines) if s and s[0] != "#"), None)
    if first is None:
        return f"{SSHD_CONFIG} has no directive (empty or only comments): {expected}"
    return f"{SSHD_CONFIG}: {expected}, found {first[:80]!r}"


def parse_sshd_files(lines: list[str]) -> SshdFilesDict:
    """Parse the output of ``SshdConfigFiles``'s command (sections started by ``##GPUHOST``)."""
    sections = split_sections(lines)
    main = sections.get("main", [MISSING])
    main_present = main != [MISSING]
    return {
        "main_present": main_present,
        "includes_dropins_first": main_present and include_precedes_settings(main),
        "dropin": section_text(sections, "dropin"),
    }


class SshdConfigFiles(FactBase[SshdFilesDict]):
    """What gpuhost manages in the sshd config files:

    .. code:: python

        {"main_present": True, "includes_dropins_first": True, "dropin": "# Managed by gpuhost..."}
    """

    @override
    def command(self) -> str:
        return f"{cat_section('main', SSHD_CONFIG)}; {cat_section('dropin', DROPIN_PATH)}"

    @override
    def process(self, output: list[str]) -> SshdFilesDict:
        return parse_sshd_files(output)

    @staticmethod
    @override
    def default() -> SshdFilesDict:
        """An empty answer (pyinfra gives ``default()`` for no output) reads as no sshd_config:
        the drop-in operation says so in one line instead of a TypeError on None."""
        return parse_sshd_files([])


# --- authorized keys ----------------------------------------------------------------------------


class AuthorizedKeyDict(TypedDict):
    type: str
    blob: str
    comment: str
    options: str
    line: str


def _split_options(line: str) -> tuple[str, str]:
    """Split ``options rest`` of an authorized_keys line (options may hold quoted spaces)."""
    in_quotes = False
    for index, char in enumerate(line):
        if char == '"':
            in_quotes = not in_quotes
        elif char in " \t" and not in_quotes:
            return line[:index], line[index:].strip()
    return line, ""


def parse_authorized_key(line: str) -> AuthorizedKeyDict | None:
    """One authorized_keys line → its parts, or None for blank, comment or unreadable lines."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    options = ""
    words = text.split(None, 1)
    if words[0] not in KEY_TYPES:
        options, text = _split_options(text)
        words = text.split(None, 1)
        if not words or words[0] not in KEY_TYPES:
            return None
    rest = words[1].split(None, 1) if len(words) > 1 else []
    if not rest or not _BASE64_RE.match(rest[0]):
        return None
    return {
        "type": words[0],
        "blob": rest[0],
        "comment": rest[1].strip() if len(rest) > 1 else "",
        "options": options,
        "line": line.strip(),
    }


def parse_authorized_keys(lines: list[str]) -> list[AuthorizedKeyDict]:
    """Every usable key of an authorized_keys file, in file order."""
    keys = []
    for line in lines:
        key = parse_authorized_key(line)
        if key is not None:
            keys.append(key)
    return keys


def key_identity(key: AuthorizedKeyDict) -> tuple[str, str]:
    """What makes two entries the same key: type and base64 blob (not comment, not options)."""
    return key["type"], key["blob"]


class UserKeysDict(TypedDict):
    exists: bool
    home: str | None
    group: str | None
    groups: list[str]
    #: keys of ~/.ssh/authorized_keys (the file gpuhost edits)
    keys: list[AuthorizedKeyDict]
    #: keys of ~/.ssh/authorized_keys2 (still read by sshd's default AuthorizedKeysFile)
    keys2: list[AuthorizedKeyDict]


def parse_user_keys(lines: list[str]) -> UserKeysDict:
    """Parse the output of ``AuthorizedKeys``'s command."""
    result: UserKeysDict = {
        "exists": False,
        "home": None,
        "group": None,
        "groups": [],
        "keys": [],
        "keys2": [],
    }
    section = ""
    body: dict[str, list[str]] = {"keys": [], "keys2": []}
    for line in lines:
        if line.startswith(f"{MARK} "):
            words = line.split(None, 2)
            tag = words[1] if len(words) > 1 else ""
            value = words[2] if len(words) > 2 else ""
            if tag == "home":
                result["exists"] = True
                result["home"] = value or None
            elif tag == "group":
                result["group"] = value or None
            elif tag == "groups":
                result["groups"] = value.split()
            elif tag in ("keys", "keys2"):
                section = tag
            continue
        if section:
            body[section].append(line)
    result["keys"] = parse_authorized_keys(body["keys"])
    result["keys2"] = parse_authorized_keys(body["keys2"])
    return result


class AuthorizedKeys(FactBase[UserKeysDict]):
    """A user's home, groups and authorized keys:

    .. code:: python

        {"exists": True, "home": "/home/ops", "group": "ops", "groups": ["ops", "sudo"],
         "keys": [{"type": "ssh-ed25519", "blob": "AAAA...", "comment": "ops@laptop",
                   "options": "", "line": "ssh-ed25519 AAAA... ops@laptop"}],
         "keys2": []}

    ``exists`` is False (and the rest empty) when the user does not exist.
    """

    @override
    def command(self, user: str) -> str:
        quoted = shlex.quote(user)
        return (
            f"h=$(getent passwd {quoted} | cut -d: -f6); "
            f'[ -n "$h" ] || exit 0; '
            f'echo "{MARK} home $h"; '
            f'echo "{MARK} group $(id -gn {quoted})"; '
            f'echo "{MARK} groups $(id -Gn {quoted})"; '
            f"echo '{MARK} keys'; cat \"$h/.ssh/authorized_keys\" 2>/dev/null; echo; "
            f"echo '{MARK} keys2'; cat \"$h/.ssh/authorized_keys2\" 2>/dev/null; true"
        )

    @override
    def process(self, output: list[str]) -> UserKeysDict:
        return parse_user_keys(output)

    @staticmethod
    @override
    def default() -> UserKeysDict:
        return parse_user_keys([])


# --- the SSH session pyinfra uses ---------------------------------------------------------------


class SshSessionDict(TypedDict):
    #: the account that logged in (SUDO_USER when pyinfra sudoes), None when unknown
    login_user: str | None
    #: the address the host sees this connection come from (SSH_CONNECTION), None when not over SSH
    client_address: str | None


def parse_ssh_session(lines: list[str]) -> SshSessionDict:
    """``<user>`` and ``<SSH_CONNECTION>`` lines → who is connected, and from where."""
    user = lines[0].strip() if lines else ""
    connection = lines[1].split() if len(lines) > 1 else []
    return {"login_user": user or None, "client_address": connection[0] if connection else None}


class SshSession(FactBase[SshSessionDict]):
    """Who pyinfra is logged in as and the client address the host sees:

    .. code:: python

        {"login_user": "root", "client_address": "10.123.4.1"}
    """

    @override
    def command(self) -> str:
        return 'echo "${SUDO_USER:-$(id -un)}"; echo "${SSH_CONNECTION:-${SSH_CLIENT:-}}"'

    @override
    def process(self, output: list[str]) -> SshSessionDict:
        return parse_ssh_session(output)

    @staticmethod
    @override
    def default() -> SshSessionDict:
        return {"login_user": None, "client_address": None}
