"""kernel.next-boot-module on Ubuntu's archive: the next boot's kernel (the newest /boot image
without a /vmlinuz link, as the lab's stand-in kernels leave it) must have a precompiled module
package of the installed driver's branch (package names as the stand-in archive and
packages.ubuntu.com give them)."""

from __future__ import annotations

from probe_text import host_with

from gpuhost.audit.host import AuditSettings, audit_host
from gpuhost.facts.build import host_facts_from_text

K100, K101 = "6.8.0-100-generic", "6.8.0-101-generic"
DRIVER = "580.178.04-0ubuntu0.24.04.1"
USERSPACE = "".join(
    f"{name}\t{DRIVER}\tii \n"
    for name in ("nvidia-utils-580-server", "libnvidia-compute-580-server",
                 "nvidia-kernel-common-580-server", "nvidia-headless-no-dkms-580-server-open")
)
MODULE_100 = (
    f"linux-modules-nvidia-580-server-open-{K100}\t6.8.0-100.100+1\thi \n"
    "linux-modules-nvidia-580-server-open-generic\t6.8.0-100.100+1\thi \n"
)
TWO_KERNELS = f"boot={K100}\nboot={K101}\nmodules={K100}\nmodules={K101}\n"


def _findings(dpkg: str, kernels: str) -> list:
    text = host_with(uname="6.18.44-fc-v657\nx86_64\n", kernels=kernels, dpkg=dpkg)
    report = audit_host("u1", host_facts_from_text(text), {}, AuditSettings())
    result = next(r for r in report.results if r.rule == "kernel.next-boot-module")
    return [result.skipped, *[f.message for f in report.findings
                              if f.rule == "kernel.next-boot-module"]]


def test_next_boot_kernel_with_its_module_package_is_clean() -> None:
    assert _findings(USERSPACE + MODULE_100, f"boot={K100}\nmodules={K100}\n") == [None]


def test_a_newer_kernel_without_its_module_package_is_an_error() -> None:
    """dist-upgrade took 6.8.0-101 and kept its module back (platforms.md section 4)."""
    skipped, message = _findings(USERSPACE + MODULE_100, TWO_KERNELS)
    assert skipped is None
    assert message == (
        f"the next-boot kernel {K101} has no precompiled NVIDIA module package for driver "
        f"580.178.04 (installed for: {K100}); the GPU will be unusable after the next reboot; "
        "fix: run gpuhost provision (it installs the next boot's kernel's module package that "
        "the pinned driver satisfies, or names the driver that kernel needs), or keep booting "
        "6.18.44-fc-v657"
    )


def test_a_module_package_of_another_branch_does_not_count() -> None:
    other = MODULE_100.replace("-580-", "-570-")
    skipped, message = _findings(USERSPACE + other, f"boot={K100}\n")
    assert skipped is None and "installed for: none" in message


def test_no_module_package_and_no_dkms_is_not_judged() -> None:
    assert _findings(USERSPACE, TWO_KERNELS) == [
        "no NVIDIA module built by DKMS or installed as a precompiled package"]


def test_a_source_without_cuda_toolkits_expects_none() -> None:
    """ubuntu-archive installs no CUDA toolkit (package_sets.yaml cuda_toolkit: []): the audit
    did report 'CUDA toolkit 13.0 is not installed' on every host provisioned with it (lab)."""
    from gpuhost.audit.expected import expected_state, installs_cuda
    from gpuhost.matrix import load_profiles

    profiles = load_profiles()
    assert not installs_cuda("ubuntu-archive") and installs_cuda("nvidia-cuda-repo")
    state = expected_state(profiles["ubuntu-archive-580-server"], {}, None)
    assert state.cuda_versions == () and state.cuda_default is None
    assert expected_state(profiles["nvidia-repo-580-cuda13.0"], {}, None).cuda_versions
