"""What a snapshot records, and the driver-coupled packages validation checks, come from the
package data (data/package_sets.yaml via gpuhost.audit.coupled), on every OS the data names."""

from __future__ import annotations

import pytest

from gpuhost.audit.coupled import is_coupled
from gpuhost.deploys.spec import package_sets, supported_os
from gpuhost.upgrade.host_state import HostState, is_stack_package
from gpuhost.upgrade.validate import Expectation, package_problems

VALUES = {"branch": "550", "cuda_major": "12", "cuda_dash": "12-4", "cudnn_major": "9",
          "version": "550.54.15"}
KEYS = (
    "install",
    "coupled",
    "companions",
    "cuda_toolkit",
    "cudnn",
    "container_toolkit",
    "fabric_manager",
)


def _names() -> list[tuple[str, str, str]]:
    out = []
    for source, entries in package_sets()["sources"].items():
        for os_key in supported_os(source):
            entry = entries[os_key]
            for key in KEYS:
                for template in entry.get(key) or []:
                    out.append((f"{source}/{os_key}", key, template.format(**VALUES)))
            for names in (entry.get("kernel_module") or {}).values():
                out += [(f"{source}/{os_key}", "kernel_module", n.format(**VALUES)) for n in names]
    return out


@pytest.mark.parametrize(("where", "key", "name"), _names())
def test_every_package_of_the_data_is_recorded_by_a_snapshot(where: str, key: str, name: str):
    assert is_stack_package(name), f"{where} {key}: a snapshot would not record {name}"


def test_ubuntu_coupled_package_at_another_version_is_a_problem() -> None:
    assert is_coupled("libnvidia-compute-550-server")
    record = {"arch": "amd64", "status": "hi"}
    state = HostState(
        packages={
            "nvidia-driver-550-server": {"version": "550.127.05-0ubuntu1", **record},
            "libnvidia-compute-550-server": {"version": "550.90.07-0ubuntu1", **record},
            "nvidia-container-toolkit": {"version": "1.17.8-1", **record},
        },
        holds=["nvidia-driver-550-server", "libnvidia-compute-550-server"],
    )
    problems = package_problems(Expectation("t", "550.127.05", profile="t"), state)
    assert problems == ["libnvidia-compute-550-server is 550.90.07-0ubuntu1, expected 550.127.05"]


def test_a_host_with_precompiled_modules_records_its_kernel_as_stack() -> None:
    """Ubuntu's archive: the kernel moves with the driver, so the snapshot records the kernel
    image, headers and metapackages with the stack (a Debian DKMS host only notes them)."""
    from gpuhost.upgrade.host_state import MARK, parse_host_state

    rows = ["linux-image-6.8.0-100-generic\t6.8.0-100.100\tamd64\tii ",
            "linux-generic\t6.8.0.100.100\tamd64\thi ", "linux-firmware\t1\tall\tii ",
            "nvidia-utils-580-server\t580.178.04-0ubuntu0.24.04.1\tamd64\thi "]
    modules = "linux-modules-nvidia-580-server-open-6.8.0-100-generic\t6.8.0-100.100+1\tamd64\tii "

    def state(lines: list[str]) -> HostState:
        return parse_host_state("\n".join([f"{MARK} packages", *lines, f"{MARK} end"]))

    paired = state([*rows, modules])
    assert {"linux-image-6.8.0-100-generic", "linux-generic"} <= set(paired.packages)
    assert "linux-firmware" not in paired.packages
    dkms = state(rows)
    assert "linux-generic" not in dkms.packages and "linux-generic" in dkms.kernel_packages


@pytest.mark.parametrize("track", ["aws", "aws-lts-22.04", "azure", "gcp", "oracle", "nvidia",
                                   "nvidia-hwe-22.04", "generic-64k", "oem-24.04"])
def test_a_snapshot_records_the_kernel_metapackage_of_any_track(track: str) -> None:
    """A cloud (or DGX, 64k, OEM) kernel's track: gpuhost upgrade moves ``linux-<track>`` with
    ``linux-image-<track>`` and ``linux-headers-<track>`` (operations/precompiled.py
    installed_track_metas). The snapshot must record all three: a rollback that put back the image
    and headers metapackages alone would leave ``linux-aws`` at the upgrade's version, whose
    Depends (``linux-image-aws (= new)``) the restored ones no longer meet, and apt removes it.
    Names that are not a track's metapackage (linux-firmware, linux-base) stay out."""
    from gpuhost.upgrade.host_state import MARK, parse_host_state

    rows = [f"linux-{track}\t6.8.0.1015.16\tamd64\thi ",
            f"linux-image-{track}\t6.8.0.1015.16\tamd64\thi ",
            f"linux-headers-{track}\t6.8.0.1015.16\tamd64\thi ",
            "linux-image-6.8.0-1015-aws\t6.8.0-1015.16\tamd64\tii ",
            "linux-firmware\t1\tall\tii ", "linux-base\t4.5ubuntu9\tall\tii ",
            "linux-modules-nvidia-580-server-open-6.8.0-1015-aws\t6.8.0-1015.16+1\tamd64\tii "]
    state = parse_host_state("\n".join([f"{MARK} packages", *rows, f"{MARK} end"]))
    assert {f"linux-{track}", f"linux-image-{track}", f"linux-headers-{track}"} <= set(
        state.packages)
    assert "linux-firmware" not in state.packages and "linux-base" not in state.packages
