"""dnf through the site's HTTP(S) proxy (inventory data ``gpuhost_proxy``, RHEL family): dnf's
own ``proxy=`` setting in ``[main]`` of ``/etc/dnf/dnf.conf`` (every repository), the URL's
credentials as ``proxy_username``/``proxy_password`` (what dnf.conf(5) names for them), written
when the text differs, taken out when the setting is gone.

dnf has one proxy for both schemes: with ``{http: A, https: B}`` it is B (NVIDIA's and the
distributions' repositories are served over https). gpuhost's lines follow a marker comment; an
administrator's own ``proxy=`` is replaced only while ``gpuhost_proxy`` is set, and left alone
when it is not.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

from pyinfra import host
from pyinfra.api import operation

from gpuhost.facts.files import SmallFile
from gpuhost.operations._facts import fact
from gpuhost.operations._files import put_text, same_text

DNF_CONF = "/etc/dnf/dnf.conf"
MARK = "# gpuhost_proxy (docs/offline.md): the proxy lines below are gpuhost's"
KEYS = ("proxy", "proxy_username", "proxy_password")


def proxy_settings(proxies: Mapping[str, str]) -> dict[str, str]:
    """dnf.conf's proxy keys for {"http"|"https": URL} (pure): the https proxy (else the http
    one) without its credentials, which go to ``proxy_username``/``proxy_password``."""
    url = proxies.get("https") or proxies.get("http")
    if not url:
        return {}
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if ":" in netloc:  # an IPv6 address
        netloc = f"[{netloc}]"
    if parts.port:
        netloc += f":{parts.port}"
    out = {"proxy": urlunsplit((parts.scheme, netloc, parts.path, "", ""))}
    if parts.username:
        out["proxy_username"] = unquote(parts.username)
        out["proxy_password"] = unquote(parts.password or "")
    return out


def _key(line: str) -> str:
    return line.split("=", 1)[0].strip().lower() if "=" in line else ""


def render_conf(lines: list[str], settings: Mapping[str, str]) -> list[str]:
    """dnf.conf's lines with gpuhost's proxy lines for ``settings`` (pure): in ``[main]``, the
    marker and gpuhost's lines replace any proxy lines (``settings`` empty: gpuhost's lines
    removed where the marker says they are gpuhost's, the file otherwise unchanged)."""
    out: list[str] = []
    section = ""
    ours = MARK in lines
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1].strip()
        elif section == "main" and (stripped == MARK or (
                (settings or ours) and _key(line) in KEYS)):
            continue
        out.append(line)
        if section == "main" and stripped == "[main]" and settings:
            out += [MARK, *(f"{k}={settings[k]}" for k in KEYS if k in settings)]
    if settings and not any(line.strip() == "[main]" for line in lines):
        out = ["[main]", MARK, *(f"{k}={settings[k]}" for k in KEYS if k in settings), *out]
    return out


def run_settings(lines: list[str], proxies: Mapping[str, str]) -> list[str]:
    """dnf's proxy settings as ``key=value`` (every one of ``KEYS``, "" where unset) that a run
    with ``proxies`` leaves in ``[main]`` of a dnf.conf of ``lines`` (pure): what a query made
    before ``configured`` runs passes with ``--setopt`` to see the repositories as the run
    will (an administrator's own proxy kept, gpuhost's old one gone)."""
    section, found = "", {}
    for line in render_conf(list(lines), proxy_settings(proxies)):
        stripped = line.strip()
        if stripped.startswith("[") and stripped.endswith("]"):
            section = stripped[1:-1].strip()
        elif section == "main" and _key(line) in KEYS:
            found[_key(line)] = line.split("=", 1)[1].strip()
    return [f"{key}={found.get(key, '')}" for key in KEYS]


@operation()
def configured(proxies: dict[str, str]) -> Generator:
    """dnf's proxy (dnf.conf ``[main]``) for ``proxies``; gpuhost's lines taken out when it is
    empty.

    + proxies: {"http"|"https": URL}, inventory data gpuhost_proxy
    """
    current = fact(SmallFile, path=DNF_CONF) or []
    settings = proxy_settings(proxies)
    wanted = "\n".join(render_conf(list(current), settings)) + "\n"
    if same_text(current, wanted):
        host.noop("dnf proxy configured" if settings else "no dnf proxy of gpuhost's")
        return
    yield from put_text(DNF_CONF, wanted)
