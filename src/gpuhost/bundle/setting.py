"""Inventory settings of sites without a direct route to repositories.

``gpuhost_bundle``: ``{path: DIR}`` (a bundle directory on this machine, copied to the host) or
``{url: URL, key_sha256: HEX}`` (a bundle served over HTTP(S) by a host the operator names; its
signing key ``URL/bundle-key.gpg`` must have that SHA-256; an RPM bundle's ``URL/manifest.json``,
which lists the SHA-256 of each vendor key under ``URL/keys/``).
``gpuhost_proxy``: ``http://proxy:3128`` (both schemes) or ``{http: URL, https: URL}``.
The contract (``gpuhost.inventory.contract``) checks both shapes before any host is contacted;
these readers assume checked data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

BUNDLE_KEY = "gpuhost_bundle"
PROXY_KEY = "gpuhost_proxy"


@dataclass(frozen=True)
class BundleSetting:
    path: str | None = None
    url: str | None = None
    key_sha256: str | None = None

    @property
    def where(self) -> str:
        return str(self.path or self.url)


def bundle_setting(data: Mapping[str, Any]) -> BundleSetting | None:
    raw = data.get(BUNDLE_KEY)
    if not raw:
        return None
    return BundleSetting(raw.get("path"), raw.get("url"), raw.get("key_sha256"))


@cache
def _bundle_dir(path: str) -> tuple[str | None, str | None]:
    """(the OS key of the bundle directory ``path``, why it is no bundle), one of them None."""
    from gpuhost.bundle.manifest import read_manifest
    from gpuhost.errors import ConfigError

    try:
        return read_manifest(Path(path)).os, None
    except ConfigError as exc:
        return None, str(exc)


def bundle_dir_problem(path: str) -> str | None:
    """Why the bundle directory ``path`` (``{path: DIR}``, read from the current directory) is
    no bundle: its manifest.json missing or unreadable (one line), else None. Read once per
    path and process: the hosts of a fleet share one bundle; its files are compared with the
    manifest when a deploy uses it."""
    return _bundle_dir(path)[1]


def bundle_os_problem(path: str, profile: str, oses: tuple[str, ...]) -> str | None:
    """Why the bundle directory ``path`` cannot install ``profile`` on any OS it names (``oses``):
    it was made for another OS (None when it was, or when it is no bundle at all)."""
    made_for = _bundle_dir(path)[0]
    if made_for is None or made_for in oses:
        return None
    return (f"{path} was made for {made_for}, profile {profile} installs on {', '.join(oses)}; "
            f"expected a bundle made for one of them (gpuhost bundle {profile} --os ...)")


def bundle_shape_problem(value: Mapping[str, Any]) -> str | None:
    """Why a ``gpuhost_bundle`` mapping (keys and strings already checked) is not a bundle
    setting: exactly one of path or url; url with its key's SHA-256, path without."""
    if bool(value.get("path")) == bool(value.get("url")):
        return "expected exactly one of path or url"
    if value.get("url") and not value.get("key_sha256"):
        return ("a url needs key_sha256 (the SHA-256 you trust of URL/bundle-key.gpg, or of "
                "URL/manifest.json for an RPM bundle)")
    if value.get("path") and value.get("key_sha256"):
        return "key_sha256 goes with url only (a path bundle carries its key)"
    return None


def proxy_urls(data: Mapping[str, Any]) -> dict[str, str]:
    """{"http": URL, "https": URL} of the host's proxy setting ({} when none): requests'
    ``proxies`` and the apt drop-in's two lines."""
    raw = data.get(PROXY_KEY)
    if not raw:
        return {}
    if isinstance(raw, str):
        return {"http": raw, "https": raw}
    return {scheme: str(raw[scheme]) for scheme in ("http", "https") if raw.get(scheme)}


def host_of(url: str) -> str:
    """The host name of ``url`` (apt's per-host proxy keys use it)."""
    return urlsplit(url).hostname or ""
