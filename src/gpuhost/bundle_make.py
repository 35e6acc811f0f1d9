"""``gpuhost bundle``: a profile's complete package set, resolved on a reference host, as a
signed flat apt repository with a manifest (docs/offline.md).

The reference host is an inventory host in the state of the targets (the same OS image, none of
the profile's packages installed). On it, in a temporary folder and without changing its apt
configuration: its own sources plus the profile's repository (NVIDIA's, from the host's
``gpuhost_cuda_repo_*`` data, key checked here), provision's pins (``render_preferences``),
``apt-get update``, then ``apt-get install --print-uris`` of what provision installs by name:
apt lists every package and dependency the host does not have, at the pinned versions. Those
are fetched there (``apt-get download``), copied here, checked against the hashes apt gave, and
indexed and signed (``bundle.aptrepo``) with ``manifest.json`` (``bundle.manifest``).
"""

from __future__ import annotations

import base64
import contextlib
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from gpuhost import oskey
from gpuhost.bundle import aptrepo
from gpuhost.bundle.aptrepo import POOL, file_hashes
from gpuhost.bundle.manifest import (
    MANIFEST,
    Entry,
    Manifest,
    from_debs,
    manifest_text,
)
from gpuhost.bundle.printuris import Download, parse_print_uris
from gpuhost.bundle_resolve import (
    check_covered,
    cuda_source,
    extra_packages,
    resolve_profile,
    run_checked,
)
from gpuhost.bundle_rpm import make_rpm_bundle
from gpuhost.deploys import guards
from gpuhost.errors import ConfigError, HostError
from gpuhost.facts.probe_parsers import parse_os_release
from gpuhost.inventory.loader import InventoryHost, select
from gpuhost.operations.apt_pin import render_preferences
from gpuhost.operations.nvidia_repo import keyring_path
from gpuhost.parsers.packages import RPM_NAME_RE
from gpuhost.pkgmgr import APT, Apt
from gpuhost.probe.script import OS_RELEASE_CODE
from gpuhost.upgrade.connect import PyinfraRemote

_PACKAGE_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")


def _wanted_os(text: str) -> str:
    """``--os``: ``debian12`` or ``debian-12`` -> ``debian-12`` (``gpuhost.oskey``)."""
    key = oskey.from_text(text)
    if key is None:
        raise ConfigError(f"--os {text!r}: expected an OS key such as debian-12")
    return key


@dataclass(frozen=True)
class Request:
    """What to resolve: the package arguments, the pins, the extra source."""

    packages: list[str]  # name or name=version
    required: dict[str, str | None]
    preferences: str
    cuda_source: tuple[str, bytes] | None  # (repository URL, key bytes)


def plan_request(entry: InventoryHost, profile: str, os_found: str, profiles_file: str | None,
                 extra: Sequence[str] = ()) -> Request:
    """The profile resolved for the reference host's data, as provision would on a target;
    ``extra`` packages (``--with``) added."""
    resolved = resolve_profile(entry, profile, os_found, profiles_file)
    plan, required = resolved.plan, resolved.required
    packages = [f"{n}={v}" if n in plan.exact else n for n, v in sorted(required.items())]
    packages += [p for p in [*extra_packages(resolved.data), *extra] if p not in required]
    prefs = render_preferences(plan.pins, plan.blocked, plan.blocked_patterns, profile, plan.exact)
    return Request(packages, required, prefs, cuda_source(entry.name, resolved))


def _apt(folder: str) -> Apt:
    """apt with the private configuration in ``folder`` (the reference host's own apt setup
    is left as it is)."""
    return APT.configured(*Apt.private_options(folder))  # type: ignore[return-value]


def resolve_command(folder: str, request: Request) -> str:
    """The reference host's command: a private apt configuration in ``folder`` (its sources,
    the profile's repository and pins), ``apt-get update``, then ``--print-uris`` of the
    request and the running kernel's headers when apt offers them."""
    q = shlex.quote
    lines = [
        "set -e",
        f"d={q(folder)}",
        'mkdir -p "$d/parts" "$d/prefs" "$d/lists/partial" "$d/archives/partial" "$d/debs"',
        'for f in /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do '
        'if [ -f "$f" ]; then cp "$f" "$d/parts/"; fi; done',
        f"printf %s {q(base64.b64encode(request.preferences.encode()).decode())} "
        '| base64 -d > "$d/prefs/gpuhost-nvidia"',
    ]
    if request.cuda_source:
        url, key = request.cuda_source
        keyfile = f"{folder}/{keyring_path(key, 'cuda-key').rsplit('/', 1)[1]}"
        lines += [
            f"printf %s {q(base64.b64encode(key).decode())} | base64 -d > {q(keyfile)}",
            f"echo {q(f'deb [signed-by={keyfile}] {url.rstrip(chr(47))}/ /')} "
            '> "$d/parts/gpuhost-cuda.list"',
        ]
    apt = _apt(folder)
    lines += [
        f"{apt.refresh()} -qq >/dev/null",
        'h="linux-headers-$(uname -r)"; k=""',
        f'if {apt.known_command(chr(34) + "$h" + chr(34))}; then k="$h"; fi',
        apt.print_uris([*(q(p) for p in request.packages), "$k"]),
    ]
    return "\n".join(lines)


def _check_covered(host: str, downloads: list[Download], required: dict[str, str | None]
                   ) -> None:
    seen = tuple(Entry(d.package, d.version, d.architecture, d.filename, "", 0)
                 for d in downloads)
    check_covered(host, Manifest("", "", "", seen), required, "apt")


def fetch(remote: PyinfraRemote, folder: str, downloads: list[Download], pool: Path) -> None:
    """apt's download on the host, each file copied into ``pool`` and checked against
    the size and hash apt listed (MD5Sum or SHA256, whichever apt printed)."""
    specs = [APT.exact(d.package, d.version) for d in downloads]
    run_checked(remote, _apt(folder).download(specs, f"{folder}/debs"), "apt's download")
    for item in downloads:
        local = pool / item.filename
        remote.get_file(f"{folder}/debs/{item.filename}", local)
        size, sha256, md5 = file_hashes(local)
        digest = {"SHA256": sha256, "MD5SUM": md5}.get(item.hash_type.upper())
        if size != item.size or (digest is not None and digest != item.digest):
            raise HostError(remote.host, f"{item.filename}: size or {item.hash_type} differs "
                                         "from what apt listed for it (download damaged)")


def check_output(out: Path) -> None:
    """``-o`` is an empty folder or one that can be made: checked (made and removed again)
    before the reference host is contacted, not after the package set was downloaded."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"-o {out}: exists and is not an empty folder; expected a new folder")
    made = [p for p in [out, *out.parents] if not p.exists()]
    try:
        for folder in reversed(made):
            folder.mkdir()
    except OSError as exc:
        raise ConfigError(f"-o {out}: cannot make this folder ({exc.strerror}); expected a "
                          "new folder in a writable place") from None
    finally:
        for folder in made:
            with contextlib.suppress(OSError):
                folder.rmdir()


def _check_profile(profile: str, profiles_file: str | None, wanted: str | None,
                   want_os: str | None) -> None:
    """PROFILE is a profile of the built-in table or the profiles file, and ``--os`` (``wanted``,
    as the user wrote it: ``want_os``) one of its OSes: checked before the reference host is
    contacted (bad input, exit 2)."""
    table = guards.load_profile_table(profiles_file)
    if profile not in table:
        raise ConfigError(
            f"PROFILE {profile!r}: not a known profile; accepted: {', '.join(sorted(table))}"
        )
    oses = table[profile].os
    if wanted is not None and wanted not in oses:
        raise ConfigError(
            f"--os {want_os}: profile {profile} installs on {', '.join(oses)}, not on {wanted}; "
            "expected one of them"
        )


def make_bundle(profile: str, inventory: str, host: str, out: Path, want_os: str | None = None,
                profiles_file: str | None = None, key: str | None = None,
                gnupghome: Path | None = None, extra: Sequence[str] = ()) -> Manifest:
    """The bundle of ``profile`` in ``out``, resolved on inventory host ``host`` (with the
    ``extra`` packages the site also wants on its hosts)."""
    bad = [p for p in extra if not RPM_NAME_RE.fullmatch(p) or p.startswith("-")]
    if bad:  # the OS is not known yet: any name apt or dnf could take (apt's are checked below)
        raise ConfigError(f"--with {bad[0]!r}: not a package name (letters, digits, + . _ -)")
    selection = select(inventory)
    entries = [e for e in selection.entries() if e.name == host]
    if not entries:
        raise ConfigError(
            f"--from-host {host}: not a host of {inventory} (hosts: {', '.join(selection.names)})"
        )
    entry = entries[0]
    wanted = _wanted_os(want_os) if want_os is not None else None
    check_output(out)
    _check_profile(profile, profiles_file or entry.data.get("gpuhost_profiles_file"), wanted,
                   want_os)
    if key is not None:  # the signing key is found before the package set is downloaded
        aptrepo.check_signing_key(gnupghome, key)
    remote = PyinfraRemote(entry)
    try:
        found = parse_os_release(
            run_checked(remote, OS_RELEASE_CODE, "reading /etc/os-release")).key
        if wanted is not None and wanted != found:
            raise ConfigError(f"--os {want_os}: host {host} runs {found}; expected the same OS")
        if oskey.family_of_key(str(found)) == oskey.DNF:  # an RPM repository (bundle_rpm)
            if key is not None:
                raise ConfigError(
                    f"--sign-key: host {host} runs {found}, whose bundle is an RPM repository "
                    "gpuhost does not sign (each package keeps its vendor's signature, checked "
                    "by dnf with gpgcheck=1); leave --sign-key out"
                )
            return make_rpm_bundle(remote, entry, profile, str(found), out, profiles_file, extra)
        debian = [p for p in extra if not _PACKAGE_RE.fullmatch(p)]
        if debian:
            raise ConfigError(f"--with {debian[0]!r}: host {host} runs {found}, whose package "
                              "names are lower-case letters, digits and + . - (Debian policy)")
        request = plan_request(entry, profile, str(found), profiles_file, extra)
        folder = run_checked(remote, "mktemp -d /tmp/gpuhost-bundle.XXXXXX", "mktemp").strip()
        try:
            downloads = parse_print_uris(run_checked(remote, resolve_command(folder, request),
                                                     "resolving the package set"))
            _check_covered(host, downloads, request.required)
            (out / POOL).mkdir(parents=True, exist_ok=True)
            fetch(remote, folder, downloads, out / POOL)
        finally:
            remote.run(f"rm -rf {shlex.quote(folder)}")
    finally:
        remote.close()
    signer = aptrepo.build(out, f"{profile} {found}", gnupghome, key)
    debs = [aptrepo.read_deb(out, f"{POOL}/{d.filename}") for d in downloads]
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    manifest = from_debs(debs, profile, str(found), created, host, signer)
    (out / MANIFEST).write_text(manifest_text(manifest), encoding="utf-8")
    return manifest
