"""A RHEL-family host's facts: the rpm sections are read because the OS says so (a Rocky host
with dpkg-query is still an rpm host; a Debian host with rpm is a dpkg host), and with two cuDNN
packages side by side the one of the default CUDA is the host's cuDNN."""

from __future__ import annotations

from probe_text import CLEAN_DEBIAN, probe_output

from gpuhost.facts.build import build_host_facts
from gpuhost.probe.sections import split_sections

ROCKY = {
    **CLEAN_DEBIAN,
    "os-release": 'NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\n'
    'VERSION_ID="9.6"\n',
    # the Rocky-shaped lab host's base system is Debian's: dpkg-query answers too
    "dpkg": "bash\t5.2.15-2+b7\tii \n",
    "apt-holds": "",
    "rpm": "nvidia-driver-cuda\t580.178.04-1.el9\nlibcudnn9-cuda-12\t9.10.2.21-1\n"
           "libcudnn9-cuda-13\t9.17.0.29-1\n",
    "dnf-versionlock": "# Added lock\nnvidia-driver-cuda-3:580.178.04-*\n",
    "cuda": "toolkit=/usr/local/cuda-12.9 12.9.1\ntoolkit=/usr/local/cuda-13.0 13.0.2\n"
            "default=/usr/local/cuda-13.0\n",
}


def _facts(sections: dict[str, object]):  # type: ignore[no-untyped-def]
    return build_host_facts(split_sections(probe_output(sections)))


def test_a_rocky_host_is_read_with_rpm_whatever_dpkg_says() -> None:
    facts = _facts(ROCKY)
    assert facts.os.key == "rocky-9" and facts.os.family == "dnf"
    assert facts.packages.manager == "rpm"
    assert {p.name for p in facts.packages.packages} == {
        "nvidia-driver-cuda", "libcudnn9-cuda-12", "libcudnn9-cuda-13"}
    assert facts.packages.held == ["nvidia-driver-cuda"]


def test_a_debian_host_with_rpm_installed_is_a_dpkg_host() -> None:
    facts = _facts({**CLEAN_DEBIAN, "dpkg": "nvidia-smi\t535.261.03-1\tii \n",
                    "rpm": "foo\t1-1\n"})
    assert facts.packages.manager == "dpkg"
    assert [p.name for p in facts.packages.packages] == ["nvidia-smi"]


def test_the_default_cudas_cudnn_package_is_the_hosts_cudnn() -> None:
    facts = _facts(ROCKY)
    assert facts.cudnn.version == "9.17.0.29", facts.cudnn
    cuda12 = {**ROCKY, "cuda": ROCKY["cuda"].replace("default=/usr/local/cuda-13.0",
                                                     "default=/usr/local/cuda-12.9")}
    assert _facts(cuda12).cudnn.version == "9.10.2.21"
