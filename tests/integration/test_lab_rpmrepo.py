"""The lab's stand-in RPM repositories offline (no lab; tests/lab/rpmrepo.py): NVIDIA's names,
epoch 3 and exact Requires in the built RPMs, the fabric manager's name by branch, and the
``nvidia-driver`` module's streams in the modules.yaml the lab generates.  Needs rpmbuild and
createrepo_c on this machine (scripts/test installs them: rpm createrepo-c)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from lab import rpmrepo
from lab.config import cache_dir

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("rpmbuild", "rpm", "createrepo_c", "modifyrepo_c")),
    reason="rpmbuild/createrepo_c are not installed here (scripts/test installs rpm createrepo-c)")


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The unsigned RPMs: the lab's machine cache where this process may write it (the Rocky
    lab tests then find them built), else a cache of this test's own."""
    with pytest.MonkeyPatch.context() as mp:
        if not os.access(cache_dir() if cache_dir().exists() else cache_dir().parent, os.W_OK):
            mp.setenv("GPUHOST_LAB_CACHE", str(tmp_path_factory.mktemp("rpm-cache")))
        yield rpmrepo.cached_rpms()


def _query(path: Path, tag: str) -> list[str]:
    out = subprocess.run(["rpm", "-qp", "--nosignature", tag, str(path)], capture_output=True,
                         text=True, check=True).stdout
    return [line for line in out.splitlines() if not line.startswith("rpmlib(")]


def _rpm(built: Path, repo: str, name: str, version: str) -> Path:
    (path,) = (built / repo).glob(f"{name}-{version}-1.*.rpm")
    return path


def test_driver_packages_carry_epoch_3_and_nvidias_exact_requires(built: Path) -> None:
    v = "580.178.04"
    cuda = _rpm(built, "el9", "nvidia-driver-cuda", v)
    assert _query(cuda, "--qf=%{EPOCH}") == ["3"]
    assert sorted(_query(cuda, "--requires")) == [
        f"nvidia-driver-cuda-libs = 3:{v}", f"nvidia-kmod-common = 3:{v}",
        f"nvidia-persistenced = 3:{v}"]
    assert "/usr/bin/nvidia-smi" in _query(cuda, "--list")
    libs = _rpm(built, "el9", "nvidia-driver-cuda-libs", v)
    assert sorted(_query(libs, "--requires")) == [
        f"libnvidia-cfg = 3:{v}-1.el9", f"libnvidia-ml = 3:{v}-1.el9"]
    for kmod, other in (("kmod-nvidia-latest-dkms", "kmod-nvidia-open-dkms"),
                        ("kmod-nvidia-open-dkms", "kmod-nvidia-latest-dkms")):
        path = _rpm(built, "el9", kmod, v)
        assert f"nvidia-kmod = 3:{v}" in _query(path, "--provides")
        assert sorted(_query(path, "--requires")) == ["dkms", f"nvidia-kmod-common = 3:{v}"]
        assert _query(path, "--conflicts") == [other]
    assert _query(_rpm(built, "el9", "nvidia-kmod-common", v), "--requires") == [
        f"nvidia-kmod = 3:{v}"]
    assert _query(_rpm(built, "el10", "nvidia-driver-cuda", v), "--qf=%{RELEASE}") == ["1.el10"]


def test_the_fabric_manager_is_named_by_branch(built: Path) -> None:
    names = {p.name.rsplit("-", 2)[0] for p in (built / "el9").glob("nvidia-fabric*.rpm")}
    assert names == {"nvidia-fabric-manager", "nvidia-fabricmanager"}
    assert list((built / "el9").glob("nvidia-fabric-manager-570.*"))
    assert not list((built / "el9").glob("nvidia-fabric-manager-580.*"))
    assert list((built / "el9").glob("nvidia-fabricmanager-580.178.04-*"))


def test_the_os_stand_ins_provide_what_nvidias_rpms_need(built: Path) -> None:
    uname = rpmrepo.kernel_release()
    (devel,) = (built / "appstream").glob("kernel-devel-*.rpm")
    assert f"kernel-devel-{uname}" in _query(devel, "--provides")
    assert f"/usr/lib/modules/{uname}/build" in _query(devel, "--list")
    (dkms,) = (built / "epel").glob("dkms-*.rpm")
    assert "/usr/sbin/dkms" in _query(dkms, "--list")
    (release,) = (built / "baseos").glob("rocky-release-*.rpm")
    assert "system-release(releasever) = 9" in _query(release, "--provides")


def test_streams_list_every_release_of_their_branch_and_flavour(built: Path) -> None:
    docs = list(yaml.safe_load_all(rpmrepo.modules_yaml(sorted((built / "el9").glob("*.rpm")))))
    streams = {d["data"]["stream"]: d["data"]["artifacts"]["rpms"] for d in docs
               if d["document"] == "modulemd"}
    assert sorted(streams) == ["570-dkms", "570-open", "580-dkms", "580-open", "590-dkms",
                               "590-open", "latest-dkms", "open-dkms"]
    (defaults,) = [d["data"] for d in docs if d["document"] == "modulemd-defaults"]
    assert defaults["module"] == "nvidia-driver" and defaults["stream"] == "latest-dkms"
    dkms = streams["580-dkms"]
    for v in rpmrepo.BRANCHES["580"]:
        assert f"kmod-nvidia-latest-dkms-3:{v}-1.el9.x86_64" in dkms
        assert f"libnvidia-ml-3:{v}-1.el9.x86_64" in dkms
        assert f"cuda-drivers-0:{v}-1.el9.x86_64" in dkms
    assert not [a for a in dkms if "open" in a or "590." in a or "fabric" in a]
    opened = streams["580-open"]
    assert "kmod-nvidia-open-dkms-3:580.178.04-1.el9.x86_64" in opened
    assert "nvidia-open-3:580.178.04-1.el9.x86_64" in opened
    assert not [a for a in opened if "latest-dkms" in a]
    assert any("590.48.01" in a for a in streams["latest-dkms"])
