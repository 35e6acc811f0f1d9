"""A built-in profile lists only OSes whose install path exists (package names in
data/package_sets.yaml for its source, an apt-based deploy); the Ubuntu path resolves offline."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import pytest
from pyinfra.context import ctx_host

from gpuhost.deploys.spec import supported_os
from gpuhost.errors import DeployError
from gpuhost.facts.host_facts import SecureBoot
from gpuhost.matrix.profiles import load_profiles

provision_module = importlib.import_module("gpuhost.deploys.provision")

BUILTIN = load_profiles()
#: the OSes gpuhost can install on: apt-based (apt preferences and holds) and the RHEL family
#: (dnf module streams and versionlocks, deploys/nvidia_dnf.py)
APT_OSES = {"debian-12", "ubuntu-22.04", "ubuntu-24.04"}
DNF_OSES = {f"{os_id}-{major}" for os_id in ("rhel", "rocky", "almalinux") for major in (8, 9, 10)}
UBUNTU = [(name, os_key) for name, p in sorted(BUILTIN.items()) for os_key in p.os
          if os_key.startswith("ubuntu-") and p.source == "nvidia-cuda-repo"]
ARCHIVE = [(name, os_key) for name, p in sorted(BUILTIN.items()) for os_key in p.os
           if p.source == "ubuntu-archive"]


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_profile_lists_only_oses_with_an_install_path(name: str) -> None:
    profile = BUILTIN[name]
    assert profile.os, f"{name}: lists no OS"
    no_names = [o for o in profile.os if o not in supported_os(profile.source)]
    assert not no_names, f"{name}: {no_names} have no package names for {profile.source}"
    installable = APT_OSES | DNF_OSES
    missing = set(profile.os) - installable
    assert not missing, f"{name}: {missing} has no install path"


class _Data(dict):
    def dict(self) -> dict[str, Any]:
        return dict(self)


def _fake_host(os_id: str, version: str, data: dict[str, Any]) -> SimpleNamespace:
    distro = {"name": os_id.capitalize(), "major": None,
              "release_meta": {"ID": os_id, "VERSION_ID": version}}

    def get_fact(cls: type, *args: Any, **kwargs: Any) -> Any:
        if cls.__name__ == "LinuxDistribution":
            return distro
        if cls.__name__ == "SecureBootState":
            return SecureBoot(enabled=False)
        raise AssertionError(f"unexpected fact {cls.__name__}")

    return SimpleNamespace(name="gpu1", data=_Data(data), get_fact=get_fact)


REPO_DATA = {
    "gpuhost_cuda_repo_url": "https://developer.download.nvidia.com/compute/cuda/repos/x/x86_64",
    "gpuhost_cuda_repo_key": "/dev/null",
    "gpuhost_cuda_repo_key_sha256": "0" * 64,
}


@pytest.mark.parametrize(("name", "os_key"), UBUNTU)
def test_ubuntu_host_resolves_to_ubuntu_package_names(name: str, os_key: str) -> None:
    version = os_key.split("-", 1)[1]
    fake = _fake_host("ubuntu", version, {"gpuhost_profile": name, **REPO_DATA})
    with ctx_host.use(fake):
        spec, plan = provision_module.resolve_host()
    assert spec.profile == name
    branch = BUILTIN[name].driver_branch
    if branch < 590:
        # Ubuntu's per-branch names, not debian12's Debian-style ones
        assert any(n.endswith(f"-{branch}") for n in plan.coupled), plan.coupled
        assert "nvidia-driver" not in plan.coupled
    else:
        # NVIDIA's Ubuntu names lose the branch from 590 (data/package_sets.yaml from_branch)
        assert "libnvidia-compute" in plan.coupled and "nvidia-dkms-open" in plan.driver_install
        assert not any(n.endswith(f"-{branch}") for n in plan.coupled), plan.coupled
    assert set(plan.driver_install) <= set(plan.pins[spec.driver_version])
    assert plan.cuda_toolkits and all(plan.cuda_toolkits.values())


@pytest.mark.parametrize(("name", "os_key"), ARCHIVE)
def test_ubuntu_archive_profile_resolves_to_server_packages_and_precompiled_modules(
    name: str, os_key: str
) -> None:
    """ubuntu-archive-580-server: the -server userspace without DKMS or the desktop
    metapackage, the firmware's versioned name pinned, Canonical's modules per kernel."""
    fake = _fake_host("ubuntu", os_key.split("-", 1)[1], {"gpuhost_profile": name})
    with ctx_host.use(fake):
        spec, plan = provision_module.resolve_host()
    assert ARCHIVE and spec.source == "ubuntu-archive"
    assert not any(n.startswith(("nvidia-dkms-", "nvidia-driver-")) for n in plan.driver_install)
    assert "nvidia-utils-580-server" in plan.driver_install
    assert any(n.startswith("nvidia-headless-no-dkms-580-server") for n in plan.driver_install)
    assert set(plan.driver_install) <= set(plan.pins[spec.driver_version])
    assert f"nvidia-firmware-580-server-{spec.driver_version}" in plan.coupled
    assert plan.precompiled is not None and plan.newest_only
    flavour = "-open" if spec.kernel_module == "open" else ""
    assert plan.precompiled.kernel[0] == f"linux-modules-nvidia-580-server{flavour}-{{kernel}}"
    hwe = f"linux-image-{{kernel_flavour}}-hwe-{os_key.removeprefix('ubuntu-')}"
    assert hwe in plan.precompiled.kernel_metapackages


def test_a_profile_for_an_os_the_host_is_not_is_refused_before_any_change() -> None:
    fake = _fake_host("rocky", "9.4", {"gpuhost_profile": "debian12-nonfree-535-security"})
    with ctx_host.use(fake), pytest.raises(
        DeployError, match=r"OS: rocky-9 is not supported by profile debian12-nonfree-535-securi"
    ):
        provision_module.resolve_host()


@pytest.mark.parametrize(("os_id", "version"), [("rocky", "9.4"), ("rhel", "9.6"),
                                                ("almalinux", "9.5")])
def test_a_rhel_family_host_resolves_to_the_dnf_plan(os_id: str, version: str) -> None:
    fake = _fake_host(os_id, version, {"gpuhost_profile": "nvidia-repo-580-cuda13.0", **REPO_DATA})
    with ctx_host.use(fake):
        spec, plan = provision_module.resolve_host()
    assert plan.family == "dnf" and plan.epoch == "3" and plan.repo_folder == "rhel9"
    # the open flavour named explicitly, its stream, the other flavour known (never flipped)
    assert spec.kernel_module == "open" and "kmod-nvidia-open-dkms" in plan.driver_install
    assert plan.module == ("nvidia-driver", "580-open")
    assert plan.kernel_module_other == ["kmod-nvidia-latest-dkms"]
    # every coupled name of NVIDIA's RPMs is locked together (finding 5: a partial lock breaks
    # every dnf upgrade), the companions too
    assert {"nvidia-driver-cuda", "libnvidia-ml", "nvidia-kmod-common"} <= set(plan.locked)
    assert "nvidia-persistenced" in plan.locked
    assert plan.cuda_toolkits == {"13.0": ["cuda-toolkit-13-0"], "12.9": ["cuda-toolkit-12-9"]}
    assert plan.cudnn == ["libcudnn9-cuda-13"]


def test_fabric_manager_rpm_name_by_branch() -> None:
    from gpuhost.deploys.spec import package_plan
    from gpuhost.desired import DesiredState

    def plan(branch: str):  # type: ignore[no-untyped-def]
        spec = DesiredState(profile="t", source="nvidia-cuda-repo", os=("rocky-9",),
                            driver_version=f"{branch}.95.05", driver_branch=branch,
                            kernel_module="proprietary", fabric_manager=True)
        return package_plan(spec, "rocky-9")

    assert plan("580").fabric_manager == ["nvidia-fabricmanager"]
    assert plan("570").fabric_manager == ["nvidia-fabric-manager"]
    assert plan("570").module == ("nvidia-driver", "570-dkms")
    assert package_plan(
        DesiredState(profile="t", source="nvidia-cuda-repo", os=("rhel-10",),
                     driver_version="580.95.05", driver_branch="580", kernel_module="open"),
        "rhel-10",
    ).module is None  # RHEL 10: no modules, versionlock alone


def test_a_served_bundle_on_a_dnf_host_that_does_not_answer_is_one_line_before_any_change(
) -> None:
    """A served RPM bundle's manifest is read before any change (docs/offline.md, RHEL
    family); its server on a loopback port nothing listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    bundle = {"url": f"http://127.0.0.1:{port}/b", "key_sha256": "0" * 64}
    fake = _fake_host("rocky", "9.4", {"gpuhost_profile": "nvidia-repo-580-cuda13.0",
                                       "gpuhost_bundle": bundle, **REPO_DATA})
    with ctx_host.use(fake), pytest.raises(DeployError) as info:
        provision_module.resolve_host()
    assert f"gpuhost_bundle: cannot download http://127.0.0.1:{port}/b/manifest.json" in str(
        info.value)
    assert "\n" not in str(info.value)
