"""``gpuhost bundle PROFILE -i INVENTORY --from-host HOST -o DIR``: an offline bundle."""

from __future__ import annotations

import hashlib
from pathlib import Path

import click

from gpuhost.cli._echo import echo_lines


@click.command("bundle")
@click.argument("profile")
@click.option("-i", "--inventory", required=True, help="The inventory naming the reference host.")
@click.option("--from-host", "host", required=True, metavar="HOST",
              help="Reference host: the targets' OS image, none of the profile's packages on it.")
@click.option("-o", "--output", "out", required=True, type=click.Path(path_type=Path),
              help="A new (or empty) folder for the bundle.")
@click.option("--os", "want_os", metavar="OS",
              help="Expected OS of the reference host: debian-12.")
@click.option("--profiles", "profiles_file", type=click.Path(dir_okay=False),
              help="Extra profiles file (default: the host's gpuhost_profiles_file).")
@click.option("--with", "extra", multiple=True, metavar="PACKAGE",
              help="Another package the hosts need from the bundle (repeatable).")
@click.option("--sign-key", metavar="KEY", help="gpg key to sign with (default: a new key).")
@click.option("--gnupghome", type=click.Path(file_okay=False, path_type=Path),
              help="gpg home holding --sign-key (default: $GNUPGHOME or ~/.gnupg).")
def command(profile: str, inventory: str, host: str, out: Path, want_os: str | None,
            profiles_file: str | None, extra: tuple[str, ...], sign_key: str | None,
            gnupghome: Path | None) -> int:
    """Resolve PROFILE's complete package set on a reference host and write it to a folder as
    a signed apt repository with manifest.json (docs/offline.md). Inventory data
    gpuhost_bundle: {path: DIR} then makes provision and upgrade install only from it.

    \b
    Example:
      gpuhost bundle debian12-nonfree-535-security -i inventory.py --from-host ref1 -o bundle/
    """
    from gpuhost.bundle.manifest import MANIFEST
    from gpuhost.bundle_make import make_bundle

    manifest = make_bundle(profile, inventory, host, out, want_os, profiles_file, sign_key,
                           gnupghome, extra)
    size = sum(e.size for e in manifest.packages)
    if manifest.format == "rpm":  # served: the manifest is what key_sha256 names
        digest = hashlib.sha256((out / MANIFEST).read_bytes()).hexdigest()
        trust = f"its packages keep their vendors' signatures; served, key_sha256 {digest}"
    else:
        trust = f"signed by {manifest.signing_key}"
    echo_lines([f"bundle {out}: {len(manifest.packages)} packages ({size / 1e6:.1f} MB) for "
                f"{manifest.profile} on {manifest.os}, resolved on {host}, {trust}"])
    return 0
