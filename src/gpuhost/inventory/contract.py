"""The contract of inventory data: every ``gpuhost_*`` key, and the connector keys gpuhost relies
on, with its type, allowed values, default and meaning, in one table (``KEYS``).

:func:`host_problems` checks one host's merged data against it (pydantic strict validation per
key, so ``"no"`` is not a boolean and ``"Tesla K80"`` is not a list); the loader
(``gpuhost.inventory.loader``) runs it for every selected host before any host is contacted.
:func:`value` reads a key with its default applied. docs/inventory.md is rendered from ``KEYS``
(``gpuhost inventory render``).

Keys that do not start with ``gpuhost_`` and are not listed here (pyinfra's own, the user's) are
left alone; an unknown ``gpuhost_`` key is an error naming the nearest known key.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Callable, Mapping
from functools import cache
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    StrictStr,
    TypeAdapter,
    ValidationError,
)

from gpuhost.fabric.expected import FabricOverride
from gpuhost.gpus.node_classes import override_conflict
from gpuhost.inventory.collective_keys import COLLECTIVE_KEYS
from gpuhost.inventory.node_keys import NODE_KEYS
from gpuhost.inventory.value_types import (
    _CONTROL,
    _LINE_RE,
    _PATH_RE,
    APT_URL_RE,
    Key,
    NonEmpty,
    PathText,
    Port,
    Positive,
    ProxyUrl,
    Seconds,
    Word,
    port_in_range,
)
from gpuhost.inventory.value_types import key as _k
from gpuhost.inventory.value_types import matches as _matches
from gpuhost.redaction import SECRET_KEY_RE

PREFIX = "gpuhost_"
SSH_PREFIX = "ssh_"
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RATE_RE = re.compile(r"^[1-9][0-9]*/(second|minute|hour)$")
_SHA256_RE = re.compile(r"^[0-9a-fA-F]{64}$")
_ONE_LINE_RE = re.compile(r"^[^\n\r]*$")
_HTTP_URL_RE = re.compile(r"^https?://[^\s/]+\S*$")
# paths DKMS sources as shell (framework.conf.d): absolute, nothing the shell would expand
_SIGNING_CERT_RE = re.compile(r'^/[^\x00-\x1f\x7f"$`\\]+$')
_SIGNING_KEY_RE = re.compile(r'^(/|pkcs11:)[^\x00-\x1f\x7f"$`\\]+$')
# Values that end up in config files gpuhost writes (the ssh_config of gpuhost check, sshd's
# AllowUsers, authorized_keys) must stay data there: no control character (a newline would add a
# line such as ProxyCommand), and a word no whitespace, quote, '#' or backslash either.
_HOSTNAME_RE = re.compile(r"^(?!-)[A-Za-z0-9_.:%\[\]-]+$")
# A host name is also an ssh_config Host pattern and a --limit glob: never a pattern character
_HOST_NAME_RE = re.compile(f"^(?!-)[^{_CONTROL}\\s\"'#*?!,\\\\]+$")


def host_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a host (None if it can): a literal name, since gpuhost check
    writes it as an ssh_config ``Host`` line (``*`` there would match every later host) and
    --limit reads globs: no whitespace, control character, quote, '#', backslash or
    ``* ? ! ,``, and no leading '-'."""
    if _HOST_NAME_RE.fullmatch(name):
        return None
    return (
        f"host name {shown(name)} is not a literal name (expected no whitespace, control "
        "characters, quotes, '#', backslash, '*', '?', '!' or ',', and no leading '-')"
    )


def _env_names(value: dict[str, Any]) -> dict[str, Any]:
    for name in value:
        if not _ENV_NAME_RE.match(name):
            raise ValueError(f"{name!r} is not a shell variable name")
    return value


def _plain_python(value: str) -> str:
    from gpuhost.errors import ConfigError
    from gpuhost.probe.script import check_pythons

    try:
        check_pythons([value])
    except ConfigError:
        raise ValueError("not a plain interpreter path: letters, digits and ./_+- only") from None
    return value


_BUNDLE_FIELDS = {
    "path": (_PATH_RE, "a path"),
    "url": (APT_URL_RE, "an http(s) URL"),
    "key_sha256": (_SHA256_RE, "64 hexadecimal digits"),
}


def _bundle_shape(value: dict[str, Any]) -> dict[str, Any]:
    from gpuhost.bundle.setting import bundle_shape_problem

    for field, text in value.items():
        pattern, expected = _BUNDLE_FIELDS[field]
        if not pattern.fullmatch(text):
            raise ValueError(f"{field} {text!r} is not {expected}")
        if field == "url":
            port_in_range(text)
    problem = bundle_shape_problem(value)
    if problem:
        raise ValueError(problem)
    return value


_Bundle = dict[Literal["path", "url", "key_sha256"], StrictStr]
_Proxies = Annotated[dict[Literal["http", "https"], ProxyUrl], Field(min_length=1)]


_LIST = "a list of strings, e.g. ['a', 'b']"
_WORDS = "a list of names, e.g. ['a', 'b'] (no whitespace, quotes, '#' or control characters)"
KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        # the stack
        _k(
            "gpuhost_profile",
            NonEmpty,
            "a profile name (gpuhost matrix profile list)",
            None,
            "The profile (driver, CUDA, cuDNN, toolkit versions) the host is provisioned to and "
            "audited against; without it, audit and check read the provision marker. A name "
            "its profile table (built-ins, --profiles or gpuhost_profiles_file) lacks is "
            "refused before any host is contacted.",
            "provision, audit, check, upgrade",
        ),
        _k(
            "gpuhost_profiles_file",
            NonEmpty,
            "a path to a profiles YAML file (a string)",
            None,
            "Extra profiles merged over the built-in ones for this host (a --profiles option "
            "given on the command line takes its place). Relative paths are read from the "
            "current directory.",
            "provision, audit, check, upgrade",
        ),
        _k(
            "gpuhost_gpus",
            list[NonEmpty],
            "a list of GPU names, e.g. ['Tesla T4']",
            [],
            "The GPUs the host should have: provision refuses a profile impossible for them, "
            "check compares the count and models with nvidia-smi.",
            "provision, check",
        ),
        _k(
            "gpuhost_fabric_manager",
            StrictBool,
            "true or false",
            False,
            "Install NVIDIA Fabric Manager when the profile says 'auto' (NVSwitch systems).",
            "provision",
        ),
        _k(
            "gpuhost_install_cuda",
            StrictBool,
            "true or false",
            True,
            "false: driver-only host, no CUDA toolkit installed nor expected.",
            "provision, audit, check",
        ),
        _k(
            "gpuhost_install_recommends",
            StrictBool,
            "true or false",
            False,
            "Let apt install recommended packages with the NVIDIA packages.",
            "provision",
        ),
        _k(
            "gpuhost_module_signing_key",
            Annotated[StrictStr, _matches(_SIGNING_KEY_RE)],
            "an absolute path on the host (or a pkcs11: URI), without quotes, $, ` or \\",
            None,
            "Private key DKMS signs the NVIDIA kernel modules with (Secure Boot): provision "
            "writes it and gpuhost_module_signing_cert into /etc/dkms/framework.conf.d/"
            "gpuhost.conf, checks both are readable before any package is touched and that the "
            "certificate is enrolled in MOK, and after the install that the module carries its "
            "signature. The files stay on the host: gpuhost never copies a key.",
            "provision, upgrade",
        ),
        _k(
            "gpuhost_module_signing_cert",
            Annotated[StrictStr, _matches(_SIGNING_CERT_RE)],
            "an absolute path on the host of a DER certificate, without quotes, $, ` or \\",
            None,
            "The certificate of gpuhost_module_signing_key (DER, as mokutil needs); required "
            "with it.",
            "provision, upgrade",
        ),
        _k(
            "gpuhost_mok_password",
            Annotated[StrictStr, Field(min_length=1, max_length=256), _matches(_ONE_LINE_RE)],
            "a one-line string of 1 to 256 characters",
            None,
            "One-time password for MOK enrollment: on a Secure Boot host whose signing "
            "certificate (gpuhost_module_signing_cert, else the key DKMS generates in "
            "/var/lib/dkms) is not enrolled, provision requests its enrollment (mokutil --import); "
            "an operator confirms it with this password in the MOK manager at the next boot. "
            "Never printed.",
            "provision, upgrade",
        ),
        _k(
            "gpuhost_cuda_repo_url",
            Annotated[NonEmpty, _matches(_HTTP_URL_RE), AfterValidator(port_in_range)],
            "an http(s) URL",
            None,
            "NVIDIA CUDA repository, for profiles whose source is nvidia-cuda-repo.",
            "provision",
        ),
        _k(
            "gpuhost_cuda_repo_key",
            NonEmpty,
            "a URL or local path of the repository key (a string)",
            None,
            "The repository's signing key.",
            "provision",
        ),
        _k(
            "gpuhost_cuda_repo_key_sha256",
            Annotated[StrictStr, _matches(_SHA256_RE)],
            "64 hexadecimal digits",
            None,
            "SHA-256 of the repository key you trust; the key is refused when it differs.",
            "provision",
        ),
        _k(
            "gpuhost_bundle",
            Annotated[_Bundle, AfterValidator(_bundle_shape)],
            "{path: DIR} or {url: URL, key_sha256: 64 hexadecimal digits}",
            None,
            "An offline bundle made by gpuhost bundle (docs/offline.md): provision and upgrade "
            "install only from it (the host's other apt sources are off for the run and back "
            "after it; on a RHEL-family host, an RPM repository that stays its only NVIDIA "
            "repository) and refuse, before any change, a bundle that lacks a package of the "
            "profile's pinned set or whose files differ from its manifest. path: the bundle "
            "directory on this machine (relative: from the current directory), copied to the "
            "host; url: where a host the operator names serves it, with the SHA-256 of its "
            "bundle-key.gpg (apt) or of its manifest.json (an RPM bundle, which lists the "
            "SHA-256 of each vendor key it carries).",
            "provision, upgrade",
        ),
        _k(
            "gpuhost_proxy",
            ProxyUrl | _Proxies,
            "an http(s) URL, e.g. 'http://proxy:3128', or {http: URL, https: URL}",
            None,
            "The site's HTTP(S) proxy: apt on the host uses it (/etc/apt/apt.conf.d/"
            "00gpuhost-proxy), dnf too (proxy= in /etc/dnf/dnf.conf), and so does the download "
            "of NVIDIA's repository key on this machine for the host (also while making a "
            "bundle). A served bundle's manifest and keys are fetched with this machine's own "
            "http_proxy/https_proxy environment.",
            "provision, upgrade",
        ),
        _k(
            "gpuhost_env",
            Annotated[
                dict[StrictStr, StrictStr | StrictInt | StrictFloat], AfterValidator(_env_names)
            ],
            "a mapping {VARIABLE: value}, e.g. {'NCCL_DEBUG': 'WARN'}",
            {},
            "Variables exported to every login shell (/etc/profile.d/gpuhost.sh).",
            "provision",
        ),
        _k(
            "gpuhost_harden",
            StrictBool,
            "true or false",
            True,
            "false: provision leaves SSH and the firewall alone and check skips their checks.",
            "provision, check, upgrade",
        ),
        # SSH hardening and firewall (docs/harden.md)
        _k(
            "gpuhost_ssh_permit_root_login",
            Literal["prohibit-password", "no"],
            "'prohibit-password' or 'no'",
            "prohibit-password",
            "sshd PermitRootLogin.",
            "harden, provision, check",
        ),
        _k(
            "gpuhost_ssh_max_auth_tries",
            Positive,
            "a positive integer",
            3,
            "sshd MaxAuthTries.",
            "harden, provision, check",
        ),
        _k(
            "gpuhost_ssh_login_grace_time",
            Positive,
            "a positive integer (seconds)",
            30,
            "sshd LoginGraceTime.",
            "harden, provision, check",
        ),
        _k(
            "gpuhost_ssh_allow_users",
            list[Word],
            _WORDS,
            [],
            "sshd AllowUsers (empty: not restricted).",
            "harden, provision, check",
        ),
        _k(
            "gpuhost_ssh_allow_groups",
            list[Word],
            _WORDS,
            [],
            "sshd AllowGroups (empty: not restricted).",
            "harden, provision, check",
        ),
        _k(
            "gpuhost_ssh_authorized_keys",
            dict[Word, list[Annotated[StrictStr, _matches(_LINE_RE)]]],
            "a mapping {user: [public key lines]}",
            {},
            "Public keys installed for each user.",
            "harden, provision",
        ),
        _k(
            "gpuhost_ssh_remove_unlisted_keys",
            StrictBool,
            "true or false",
            False,
            "Remove authorized keys not listed in gpuhost_ssh_authorized_keys.",
            "harden, provision",
        ),
        _k(
            "gpuhost_ssh_extra_config",
            list[Annotated[StrictStr, _matches(_ONE_LINE_RE)]],
            "list of sshd_config lines (one line each)",
            [],
            "Extra sshd_config lines.",
            "harden, provision",
        ),
        _k(
            "gpuhost_ssh_rate_limit",
            Annotated[StrictStr, _matches(_RATE_RE)],
            "'N/second', 'N/minute' or 'N/hour'",
            None,
            "Firewall rate limit of new SSH connections.",
            "harden, provision",
        ),
        _k(
            "gpuhost_ssh_revert_seconds",
            Positive,
            "a positive integer (seconds)",
            120,
            "The sshd change is reverted unless a new connection confirms it in this time.",
            "harden, provision",
        ),
        _k(
            "gpuhost_firewall_enabled",
            StrictBool,
            "true or false",
            True,
            "false: no nftables firewall.",
            "harden, provision, check",
        ),
        _k(
            "gpuhost_firewall_allow_tcp",
            list[Port],
            "a list of port numbers 1-65535",
            [],
            "TCP ports open to everyone besides SSH.",
            "harden, provision, check",
        ),
        _k(
            "gpuhost_firewall_allow_udp",
            list[Port],
            "a list of port numbers 1-65535",
            [],
            "UDP ports open to everyone.",
            "harden, provision",
        ),
        _k(
            "gpuhost_firewall_ssh_sources",
            list[NonEmpty],
            "a list of addresses or networks, e.g. ['10.0.0.0/8']",
            [],
            "Sources allowed to reach SSH (empty: anywhere).",
            "harden, provision",
        ),
        _k(
            "gpuhost_firewall_roles",
            list[NonEmpty],
            "a list of role names from data/firewall_roles.yaml",
            [],
            "Firewall roles whose ports are opened (checked against the roles by harden).",
            "harden, provision",
        ),
        _k(
            "gpuhost_firewall_cluster_subnets",
            list[NonEmpty],
            "a list of networks, e.g. ['10.20.0.0/16']",
            [],
            "Cluster networks that roles accepting cluster traffic open to.",
            "harden, provision",
        ),
        _k(
            "gpuhost_firewall_closed_tcp",
            list[Port],
            "a list of port numbers 1-65535",
            [],
            "TCP ports deliberately left closed although something listens on them.",
            "harden, provision",
        ),
        # audit and checks
        _k(
            "gpuhost_pythons",
            list[Annotated[StrictStr, AfterValidator(_plain_python)]],
            "a list of interpreter paths, e.g. ['/opt/venv/bin/python']",
            None,
            "Interpreters whose torch/TensorFlow are read (default python3).",
            "audit, check",
        ),
        _k(
            "gpuhost_smoke_frameworks",
            list[Literal["torch", "tensorflow"]],
            "a list of 'torch' and/or 'tensorflow'",
            [],
            "Frameworks the smoke test must find besides the profile's.",
            "check",
        ),
        _k(
            "gpuhost_smoke_image",
            NonEmpty,
            "a container image name",
            None,
            "Image for the container smoke test (docker run --gpus all).",
            "check",
        ),
        _k(
            "gpuhost_smoke_timeout",
            Seconds,
            "a positive number of seconds",
            None,
            "Time limit of one smoke run (default: the checks' own).",
            "check",
        ),
        _k(
            "gpuhost_burn_timeout",
            Seconds,
            "a positive number of seconds",
            None,
            "Time limit of the stress tier's burn test.",
            "check",
        ),
        _k(
            "gpuhost_dcgm_level",
            Literal[2, 3],
            "2 or 3",
            2,
            "dcgmi diag level of the stress tier.",
            "check",
        ),
        *COLLECTIVE_KEYS,
        *NODE_KEYS,
        # connector keys gpuhost reads itself (pyinfra's SSH connector)
        _k(
            "ssh_hostname",
            Annotated[StrictStr, _matches(_HOSTNAME_RE)],
            "a host name or address (letters, digits, '.', '_', ':', '-', '[', ']', '%')",
            None,
            "Address to connect to (default: the host's inventory name).",
            "all",
        ),
        _k("ssh_port", Port, "a port number 1-65535", 22, "SSH port.", "all"),
        _k(
            "ssh_user",
            Word,
            "a user name (no whitespace, quotes, '#', backslash or control characters)",
            None,
            "Login user (default: ssh_config or the local user).",
            "all",
        ),
        _k(
            "ssh_key",
            PathText,
            "a path to a private key (one line, no '\"')",
            None,
            "Private key file.",
            "all",
        ),
        _k(
            "ssh_password",
            Annotated[StrictStr, _matches(_LINE_RE)],
            "a password (one line of text; better: an SSH key)",
            None,
            "Login password (pyinfra's SSH connector; never printed, also not with -v).",
            "all but check",
        ),
        _k(
            "ssh_key_password",
            Annotated[StrictStr, _matches(_LINE_RE)],
            "the private key's passphrase (one line of text)",
            None,
            "Passphrase of ssh_key (never printed, also not with -v).",
            "all but check",
        ),
        _k(
            "ssh_known_hosts_file",
            PathText,
            "a path (one line, no '\"')",
            None,
            "known_hosts file to check host keys against.",
            "all",
        ),
        _k(
            "ssh_strict_host_key_checking",
            Literal["yes", "no", "off", "accept-new", "ask"],
            "'yes', 'accept-new', 'ask', 'no' or 'off'",
            None,
            "Unknown host keys: refuse (yes), record (accept-new), accept (no/off).",
            "all",
        ),
        _k(
            "ssh_connect_timeout",
            Positive,
            "a positive integer (seconds)",
            None,
            "Connection timeout (gpuhost check, upgrade).",
            "check, upgrade",
        ),
        _k(
            "ssh_connect_retries",
            Annotated[StrictInt, Field(ge=0)],
            "a non-negative integer",
            0,
            "Connection retries (pyinfra).",
            "all",
        ),
    )
}


@cache
def _adapter(name: str) -> TypeAdapter[Any]:
    if KEYS[name].type is FabricOverride:  # a TypedDict carries its own (strict) config
        return TypeAdapter(FabricOverride)
    return TypeAdapter(KEYS[name].type, config=ConfigDict(strict=True))


def _lists(value: Any) -> Any:
    """Tuples are lists in Python inventories: validate them as lists."""
    if isinstance(value, tuple):
        return [_lists(v) for v in value]
    if isinstance(value, list):
        return [_lists(v) for v in value]
    if isinstance(value, dict):
        return {k: _lists(v) for k, v in value.items()}
    return value


def shown(value: Any, limit: int = 80) -> str:
    """``value`` for a message: its repr (cut at ``limit``) and, for scalars, its type."""
    try:
        text = repr(value)
    except ValueError:  # an int beyond Python's digit limit, itself or inside
        text = "a number too long to print"
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    if isinstance(value, (str, bool, int, float)):
        return f"{text} ({type(value).__name__})"
    return text


def _is_member(item: Any) -> bool:
    """Whether a pydantic error location item names a validator or union member (``str``,
    ``dict[...]``, ``function-after[...]``), not a position in the value."""
    return isinstance(item, str) and (
        item.startswith(("function-", "[", "literal[")) or "[" in item
        or item in ("str", "int", "float", "bool")
    )


def _path(name: str, loc: tuple[Any, ...]) -> str:
    parts = [name]
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        elif isinstance(item, str) and not _is_member(item):
            parts.append(f"[{item!r}]")
    return "".join(parts)


def _at(value: Any, loc: tuple[Any, ...]) -> Any:
    for item in loc:
        if _is_member(item):
            continue
        try:
            value = value[item]
        except (KeyError, IndexError, TypeError):
            break
    return value


@cache
def _ssh_keys() -> frozenset[str]:
    """``ssh_*`` keys that mean something: pyinfra's SSH connector's and gpuhost's own."""
    from gpuhost.pyinfra_adapter import ssh_connector_keys

    return ssh_connector_keys() | {k for k in KEYS if k.startswith(SSH_PREFIX)}


def nearest_key(name: str) -> str | None:
    """The known key closest to a misspelt one (None when nothing is close)."""
    close = difflib.get_close_matches(name, list(KEYS), n=1, cutoff=0.6)
    if close:
        return close[0]
    stem = [k for k in KEYS if k.startswith(name) or name.startswith(k)]
    return stem[0] if stem else None


def key_problem(name: str, raw: Any) -> str | None:
    """One line for a bad value of a known key (None when it is valid or not set)."""
    if raw is None:
        return None
    value = _lists(raw)
    try:
        _adapter(name).validate_python(value)
    except ValidationError as exc:
        error = _telling_error(exc.errors())
        loc = tuple(error.get("loc", ()))
        where = _path(name, loc)
        found = _at(value, loc) if where != name else raw
        message = str(error.get("msg", "")).removeprefix("Value error, ").strip(" ,")
        detail = f" ({message})" if error.get("type") == "value_error" and message else ""
        if loc and loc[-1] == "[key]":  # a mapping's key it does not take: the key is found
            found, detail = error.get("input"), f" (a key it does not take: {message})"
        return _found_line(where, found, KEYS[name].expected + detail)
    except (OverflowError, ValueError):  # pydantic's finite check of an int too large for float
        return _found_line(name, raw, f"{KEYS[name].expected} (a number too large)")
    return None


def _telling_error(errors: list[Any]) -> Any:
    """The error that says what is wrong: for a union (a URL or {http: URL, https: URL}) given
    the second form, the second member's error inside the value, not the first member's
    'not a string'."""
    first = errors[0]
    if str(first.get("type", "")).endswith("_type") and len(first.get("loc", ())) == 1:
        inner = [e for e in errors[1:] if len(e.get("loc", ())) > 1]
        return inner[0] if inner else first
    return first


def _found_line(where: str, found: Any, expected: str) -> str:
    if SECRET_KEY_RE.search(where):  # never echo a secret, not even a wrong one
        return f"{where}: found a {type(found).__name__} (not shown), expected {expected}"
    return f"{where}: found {shown(found)}, expected {expected}"


def _contradictions(data: Mapping[str, Any]) -> list[str]:
    problems = []
    if data.get("gpuhost_cuda_repo_key_sha256") and not data.get("gpuhost_cuda_repo_key"):
        problems.append(
            "gpuhost_cuda_repo_key_sha256 is set but gpuhost_cuda_repo_key is not: "
            "expected both (the key and its checksum) or neither"
        )
    signing = [
        k for k in ("gpuhost_module_signing_key", "gpuhost_module_signing_cert") if data.get(k)
    ]
    if len(signing) == 1:
        other = (
            "gpuhost_module_signing_cert"
            if signing[0].endswith("_key")
            else ("gpuhost_module_signing_key")
        )
        problems.append(
            f"{signing[0]} is set but {other} is not: expected both (the key DKMS signs with "
            "and its certificate) or neither"
        )
    if data.get("gpuhost_ssh_permit_root_login") == "no" and data.get("ssh_user") == "root":
        problems.append(
            "gpuhost_ssh_permit_root_login is 'no' but ssh_user is 'root': hardening would lock "
            "gpuhost out; expected another ssh_user or 'prohibit-password'"
        )
    user = data.get("ssh_user")
    allowed = data.get("gpuhost_ssh_allow_users") or []
    if (
        isinstance(user, str)
        and allowed
        and not any(fnmatch.fnmatchcase(user, pattern.split("@")[0]) for pattern in allowed)
    ):
        problems.append(
            f"gpuhost_ssh_allow_users {allowed!r} does not admit ssh_user {user!r}: hardening "
            "would lock gpuhost out; expected the login user among them"
        )
    keys = data.get("gpuhost_ssh_authorized_keys") or {}
    remove = data.get("gpuhost_ssh_remove_unlisted_keys") is True
    if remove and isinstance(user, str) and not keys.get(user):
        problems.append(
            f"gpuhost_ssh_remove_unlisted_keys is true but gpuhost_ssh_authorized_keys lists "
            f"no key for ssh_user {user!r}: hardening would remove the key gpuhost logs in "
            "with; expected that user's public key listed"
        )
    return problems


def host_problems(data: Mapping[str, Any]) -> list[str]:
    """Every problem of one host's merged inventory data, one line each (``key: found ...,
    expected ...``); an empty list when the data keeps the contract."""
    problems = []
    for name, raw in data.items():
        if not isinstance(name, str):
            continue
        if name in KEYS:
            problem = key_problem(name, raw)
            if problem:
                problems.append(problem)
        elif name.startswith(PREFIX):
            near = nearest_key(name)
            hint = f"; did you mean {near}?" if near else "; see docs/inventory.md"
            problems.append(f"{name}: unknown gpuhost key{hint}")
        elif name.startswith(SSH_PREFIX) and name not in _ssh_keys():
            close = difflib.get_close_matches(name, sorted(_ssh_keys()), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}?" if close else "see pyinfra's SSH connector docs"
            problems.append(f"{name}: not a key pyinfra's SSH connector reads (ignored); {hint}")
    if not problems:
        conflict = override_conflict(data)
        problems += _firewall_problems(data) + _contradictions(data)
        problems += [conflict] if conflict else []
    return problems


def _firewall_problems(data: Mapping[str, Any]) -> list[str]:
    """Role names and networks checked against what harden accepts, before any host is
    contacted (a typo in a role name otherwise surfaced only once harden reached the host)."""
    from gpuhost.firewall_roles import network_problem, unknown_roles_problem

    problems = [unknown_roles_problem(data.get("gpuhost_firewall_roles") or [])]
    for key in ("gpuhost_firewall_ssh_sources", "gpuhost_firewall_cluster_subnets"):
        problems += [network_problem(key, n) for n in data.get(key) or []]
    return [p for p in problems if p]


def value(data: Mapping[str, Any], name: str) -> Any:
    """``data[name]`` with the contract's default when it is absent or None (the data is
    assumed checked by :func:`host_problems`)."""
    found = data.get(name)
    if found is None:
        default = KEYS[name].default
        return (
            list(default)
            if isinstance(default, list)
            else (dict(default) if isinstance(default, dict) else default)
        )
    return found


_PROBLEM_KEY_RE = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)")


def check_host_data(
    name: str, data: Mapping[str, Any], origin: Callable[[str], str] | None = None
) -> None:
    """ConfigError naming the host and its first problems when ``data`` breaks the contract (for
    deploys run by plain ``pyinfra``, which has no gpuhost loader in front of it). ``origin``
    gives, for the key a problem starts with, where its value was set (" (set in
    group_data/gpu.py)"; "" for the host's own line), added to that problem."""
    from gpuhost.errors import ConfigError

    problems = host_problems(data)
    if origin is not None:
        problems = [p + origin(m[1]) if (m := _PROBLEM_KEY_RE.match(p)) else p for p in problems]
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise ConfigError(f"host {name}: {'; '.join(problems[:3])}{more}")
