"""``gpuhost bundle`` for a RHEL-family reference host: the profile's package set as an RPM
repository (``bundle.rpmrepo``) with a manifest (docs/offline.md).

On the reference host (the targets' OS image, none of the profile's packages installed), with a
private dnf state in a temporary folder (its repository files, configuration, cache and module
state are not changed): its own repositories plus the profile's (NVIDIA's, from the host's
``gpuhost_cuda_repo_*`` data, key checked here; ``module_hotfixes`` so the exact versions resolve
whatever stream the host has), then ``dnf install --downloadonly`` of what provision installs by
name at the pinned versions (the kernel module flavour named, DKMS, the running kernel's
``kernel-devel`` when offered): dnf downloads every package and dependency the host lacks,
resolved as one transaction. Those are copied here and checked against the SHA-256 the host
computed, indexed with createrepo_c, and for RHEL 8/9 the profile's module stream is taken from
the repository's own ``modules.yaml`` (its artifacts cut to the bundle's packages) and added with
modifyrepo_c. The keys the host's repositories are signed with (``/etc/pki/rpm-gpg``) and
NVIDIA's go under ``keys/``: the packages keep their vendors' signatures, which dnf checks on
the target.
"""

from __future__ import annotations

import base64
import binascii
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from gpuhost.bundle import rpmrepo
from gpuhost.bundle.aptrepo import file_hashes
from gpuhost.bundle.manifest import MANIFEST, Entry, Manifest, manifest_text
from gpuhost.bundle_resolve import (
    Resolved,
    check_covered,
    cuda_source,
    extra_packages,
    resolve_profile,
    run_checked,
)
from gpuhost.errors import ConfigError, HostError
from gpuhost.inventory.loader import InventoryHost
from gpuhost.operations.dnf_pin import install_spec
from gpuhost.parsers.marked import SECTION, split_marked
from gpuhost.pkgmgr import DNF, Dnf
from gpuhost.upgrade.connect import PyinfraRemote

SOURCE_REPO = "gpuhost-bundle-source"
CUDA_KEY = "RPM-GPG-KEY-gpuhost-cuda"
KEYS_DIR = "/etc/pki/rpm-gpg"


def dnf_specs(resolved: Resolved, extra: Sequence[str] = ()) -> list[str]:
    """What the reference host's dnf is asked for (pure): each package provision installs by
    name at its pinned version (``name-[epoch:]version``, a ``13.0.*`` series as a glob; the
    driver's packages, the persistence daemon's included, at the driver's version with their
    epoch), DKMS, and the extra packages."""
    plan = resolved.plan
    # what the driver's install names (nvidia_dnf.install_driver_dnf): at the driver's version
    driver = set(plan.driver_install + plan.fabric_manager + [plan.persistenced])
    specs = []
    for name, pattern in sorted(resolved.required.items()):
        if name in driver:
            specs.append(install_spec(name, resolved.spec.driver_version, plan.epoch))
        elif pattern is None:
            specs.append(name)
        else:
            specs.append(install_spec(name, pattern.removesuffix("-*"), None))
    specs += [p for p in [*extra_packages(resolved.data), *extra] if p not in resolved.required]
    return specs


def source_repo(url: str, key_path: str) -> str:
    """The profile's repository for the reference host's private dnf state (pure):
    ``module_hotfixes`` makes its packages visible whatever module stream the host has (the
    versions asked for are exact; the bundle's own module metadata comes from the repository)."""
    return (
        f"[{SOURCE_REPO}]\nname=gpuhost bundle source (NVIDIA CUDA repository)\n"
        f"baseurl={url.rstrip('/')}/\nenabled=1\ngpgcheck=1\ngpgkey=file://{key_path}\n"
        "module_hotfixes=1\n"
    )


def _dnf(folder: str) -> Dnf:
    return DNF.configured(*Dnf.private_options(folder))


def resolve_command(folder: str, specs: Sequence[str], cuda: tuple[str, bytes] | None) -> str:
    """The reference host's command (dnf's own output on stderr): download what ``specs``
    need into ``folder/rpms``, then the ``files`` (sha256sum), ``modules`` (the profile's
    repository's modules.yaml, uncompressed) and ``key NAME`` (base64 of each file of
    /etc/pki/rpm-gpg) sections."""
    q = shlex.quote
    dnf = _dnf(folder)
    lines = ["set -e", f"d={q(folder)}",
             'mkdir -p "$d/repos" "$d/cache" "$d/persist" "$d/rpms"']
    if cuda:
        url, key = cuda
        repo = source_repo(url, f"{folder}/cuda-key.asc").encode()
        lines += [
            f'printf %s {q(base64.b64encode(key).decode())} | base64 -d > "$d/cuda-key.asc"',
            f"printf %s {q(base64.b64encode(repo).decode())}"
            f' | base64 -d > "$d/repos/{SOURCE_REPO}.repo"',
        ]
    lines += [
        f"{dnf.refresh()} >&2",
        'h="kernel-devel-$(uname -r)"; k=""',
        f'if [ -n "$({dnf.provides_command(chr(34) + "$h" + chr(34))})" ]; then k="$h"; fi',
        f"{dnf.download_resolved([*(q(s) for s in specs), '$k'], folder + '/rpms')} >&2",
        f"echo '{SECTION}files'",
        'for f in "$d"/rpms/*.rpm; do [ ! -f "$f" ] || (cd "$d/rpms" && sha256sum -- '
        '"${f##*/}"); done',
        f"echo '{SECTION}modules'",
        f'for f in "$d"/cache/{SOURCE_REPO}-*/repodata/*modules.yaml*; do [ -f "$f" ] || continue; '
        'case "$f" in *.gz) gzip -dc "$f";; *.xz) xz -dc "$f";; *.zst) zstd -dc "$f";; '
        '*.bz2) bzip2 -dc "$f";; *) cat "$f";; esac; done',
        f'for f in {KEYS_DIR}/*; do [ -f "$f" ] || continue; '
        f'echo "{SECTION}key ${{f##*/}}"; base64 -w0 "$f"; echo; done',
    ]
    return "\n".join(lines)


@dataclass
class Downloaded:
    """What the reference host answered: {file: sha256}, its repository's modules.yaml, and
    {key file name: bytes} of its /etc/pki/rpm-gpg."""

    files: dict[str, str] = field(default_factory=dict)
    modules: str = ""
    keys: dict[str, bytes] = field(default_factory=dict)


def parse_resolved(text: str, source: str) -> Downloaded:
    """The sections of ``resolve_command``'s output (pure)."""
    found = Downloaded()
    for name, args, lines in split_marked(text.splitlines(), SECTION, 1):
        if name == "files":
            for line in filter(None, (x.strip() for x in lines)):
                digest, _, filename = line.partition("  ")
                if len(digest) != 64 or not filename.endswith(".rpm") or "/" in filename:
                    raise ConfigError(f"{source}: not a sha256sum line of a package: {line!r}")
                found.files[filename] = digest
        elif name == "modules":
            found.modules = "\n".join(lines)
        elif name == "key" and args and rpmrepo.KEY_NAME_RE.fullmatch(args[0]):
            try:
                found.keys[args[0]] = base64.b64decode("".join(lines), validate=True)
            except binascii.Error:
                raise ConfigError(f"{source}: key {args[0]} is not base64") from None
    return found


def fetch(remote: PyinfraRemote, folder: str, files: dict[str, str], pool: Path) -> None:
    """Each downloaded package copied into ``pool``, checked against the SHA-256 the host
    computed of it."""
    pool.mkdir(parents=True, exist_ok=True)
    for filename, digest in sorted(files.items()):
        local = pool / filename
        remote.get_file(f"{folder}/rpms/{filename}", local)
        if file_hashes(local)[1] != digest:
            raise HostError(remote.host, f"{filename}: its SHA-256 differs from the one the "
                                         "reference host computed (copy damaged)")


def _write_keys(out: Path, cuda: tuple[str, bytes] | None, keys: dict[str, bytes]) -> None:
    folder = out / rpmrepo.KEYS
    folder.mkdir()
    if cuda:
        (folder / CUDA_KEY).write_bytes(cuda[1])
    for name, data in sorted(keys.items()):
        if name != CUDA_KEY:
            (folder / name).write_bytes(data)


def _modules(resolved: Resolved, downloaded: Downloaded, nevras: list[str]) -> tuple[str, str]:
    """(modules.yaml text, ``module:stream``) the bundle carries; ("", "") without a stream."""
    if resolved.plan.module is None:
        return "", ""
    module, stream = resolved.plan.module
    if not downloaded.modules.strip():
        raise ConfigError(
            f"profile {resolved.spec.profile}: needs module stream {module}:{stream}, and "
            "NVIDIA's repository gave the reference host no module metadata (modules.yaml)"
        )
    text = rpmrepo.stream_modules(downloaded.modules, module, stream, nevras,
                                  "the NVIDIA repository's modules.yaml")
    return text, f"{module}:{stream}"


def make_rpm_bundle(remote: PyinfraRemote, entry: InventoryHost, profile: str, found: str,
                    out: Path, profiles_file: str | None, extra: Sequence[str]) -> Manifest:
    """The RPM bundle of ``profile`` in ``out``, resolved on ``remote`` (inventory host
    ``entry``, which runs ``found``)."""
    resolved = resolve_profile(entry, profile, found, profiles_file)
    cuda = cuda_source(entry.name, resolved)
    specs = dnf_specs(resolved, extra)
    folder = run_checked(remote, "mktemp -d /tmp/gpuhost-bundle.XXXXXX", "mktemp").strip()
    try:
        answer = run_checked(remote, resolve_command(folder, specs, cuda),
                             "resolving the package set")
        downloaded = parse_resolved(answer, f"host {entry.name}")
        fetch(remote, folder, downloaded.files, out / rpmrepo.POOL)
    finally:
        remote.run(f"rm -rf {shlex.quote(folder)}")
    rpmrepo.index(out)
    packages = rpmrepo.primary_packages(out)
    entries = tuple(Entry(p.name, p.evr, p.arch, p.location, p.sha256, p.size) for p in packages)
    listed = Manifest(profile, found, "", entries, format="rpm")
    check_covered(entry.name, listed, resolved.required, "dnf")
    modules, stream = _modules(resolved, downloaded, [p.nevra for p in packages])
    if modules:
        rpmrepo.add_modules(out, modules)
    _write_keys(out, cuda, downloaded.keys)
    keys = tuple((k.name, file_hashes(k)[1]) for k in sorted((out / rpmrepo.KEYS).iterdir()))
    created = datetime.now(timezone.utc).isoformat(timespec="seconds")
    manifest = Manifest(profile, found, created, entries, entry.name, None, "rpm",
                        (stream,) if stream else (), keys)
    (out / MANIFEST).write_text(manifest_text(manifest), encoding="utf-8")
    return manifest
