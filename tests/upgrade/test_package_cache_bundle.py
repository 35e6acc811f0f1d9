"""The rollback's package cache on an offline host: a package apt's archive cache no longer has
and no repository can give is taken from the host's copy of its offline bundle. The fill
command runs here, its host paths pointed into a temporary folder."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from gpuhost.upgrade import package_cache
from gpuhost.upgrade.package_cache import BUNDLE_POOL, CACHE_ROOT, parse_fill_output

pytestmark = pytest.mark.skipif(shutil.which("dpkg-deb") is None,
                                reason="dpkg-deb is not installed: it builds and checks packages")


def _deb(tmp: Path, name: str, version: str, target: Path) -> None:
    root = tmp / f"{name}-src"
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN/control").write_text(
        f"Package: {name}\nVersion: {version}\nArchitecture: amd64\n"
        "Maintainer: gpuhost tests <tests@example.invalid>\nDescription: test\n"
    )
    subprocess.run(["dpkg-deb", "--root-owner-group", "--build", str(root), str(target)],
                   check=True, capture_output=True)


def test_a_package_only_the_bundle_has_is_cached_from_it(tmp_path: Path) -> None:
    pool, cache = tmp_path / "bundle-pool", tmp_path / "cache"
    pool.mkdir()
    _deb(tmp_path, "nvidia-smi", "580.159.03-1", pool / "nvidia-smi_580.159.03-1_amd64.deb")
    command = package_cache.fill_command("s1", {
        "nvidia-smi": {"version": "580.159.03-1", "arch": "amd64"},
        "libcuda1": {"version": "580.159.03-1", "arch": "amd64"},
    })
    command = command.replace(BUNDLE_POOL, str(pool)).replace(CACHE_ROOT, str(cache))
    bin_dir = tmp_path / "bin"  # no repository: apt-get download fails as on an offline host
    bin_dir.mkdir()
    (bin_dir / "apt-get").write_text(
        "#!/bin/sh\necho 'E: Failed to fetch (offline)' >&2\nexit 100\n"
    )
    (bin_dir / "apt-get").chmod(0o755)
    proc = subprocess.run(["sh", "-c", f'PATH="{bin_dir}:$PATH"\n{command}'],
                          capture_output=True, text=True, check=False)
    report = parse_fill_output("s1", proc.stdout)
    assert report.files == {"nvidia-smi": "nvidia-smi_580.159.03-1_amd64.deb"}
    assert report.missing == {"libcuda1": "E: Failed to fetch (offline)"}
    assert (cache / "s1" / "nvidia-smi_580.159.03-1_amd64.deb").is_file()
