"""apt through the site's HTTP(S) proxy (inventory data ``gpuhost_proxy``): one drop-in,
written when its text differs, removed when the setting is gone."""

from __future__ import annotations

from collections.abc import Generator, Mapping

from pyinfra import host
from pyinfra.api import operation

from gpuhost.facts.files import SmallFile
from gpuhost.operations._facts import fact
from gpuhost.operations._files import put_text

PROXY_PATH = "/etc/apt/apt.conf.d/00gpuhost-proxy"


def render_proxy(proxies: Mapping[str, str]) -> str:
    """``Acquire::http::Proxy`` / ``Acquire::https::Proxy`` lines for {"http"|"https": URL}."""
    lines = ["// Written by gpuhost from inventory data gpuhost_proxy (docs/offline.md)."]
    lines += [f'Acquire::{scheme}::Proxy "{proxies[scheme]}";' for scheme in sorted(proxies)]
    return "\n".join(lines) + "\n"


@operation()
def configured(proxies: dict[str, str]) -> Generator:
    """apt's proxy drop-in for ``proxies``; none (and the file removed) when it is empty."""
    if proxies:
        commands = list(put_text(PROXY_PATH, render_proxy(proxies)))
        if not commands:
            host.noop("apt proxy configured")
        yield from commands
        return
    if fact(SmallFile, path=PROXY_PATH) is None:
        host.noop("no apt proxy")
        return
    yield f"rm -f {PROXY_PATH}"


def query_settings(proxies: Mapping[str, str], ours_present: bool) -> list[str]:
    """apt options giving a query apt's proxy as this run leaves it: ``proxies``' (the drop-in
    the run writes), or none where an earlier run's drop-in (``ours_present``) is to be taken
    out (the empty value: apt's default, the environment's proxy); [] keeps apt's
    configuration as it is (an administrator's own proxy)."""
    if proxies:
        return [f"Acquire::{scheme}::Proxy={proxies[scheme]}" for scheme in sorted(proxies)]
    return ["Acquire::http::Proxy=", "Acquire::https::Proxy="] if ours_present else []
