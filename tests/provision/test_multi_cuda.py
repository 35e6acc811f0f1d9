"""Several CUDA toolkits side by side: a profile listing CUDA 13.0 and 12.9 installs both, each
pinned to its own version (apt preferences, not only a hold), /usr/local/cuda at the default."""

from __future__ import annotations

import pytest

from gpuhost.deploys.guards import check_profile, load_profile_table
from gpuhost.deploys.spec import cuda_order, cuda_pin, package_plan
from gpuhost.desired import DesiredState
from gpuhost.errors import ConfigError
from gpuhost.operations.apt_pin import render_preferences
from gpuhost.operations.env import ALTERNATIVE_LINK, CUDA_LINK, cuda_link_commands


def _spec(source: str, versions: tuple[str, ...], default: str) -> DesiredState:
    return DesiredState(profile="t", source=source, os=("debian-12",),
                     driver_version="580.95.05", driver_branch="580", kernel_module="open",
                     cuda_versions=versions, cuda_default=default)


def test_builtin_580_cuda13_profile_plans_both_toolkits_each_pinned() -> None:
    spec = check_profile("h", {"gpuhost_profile": "nvidia-repo-580-cuda13.0"},
                         load_profile_table())
    assert spec.cuda_versions == ("13.0", "12.9") and spec.cuda_default == "13.0"
    for os_key in ("debian-12", "ubuntu-22.04", "ubuntu-24.04"):
        plan = package_plan(spec, os_key)
        assert plan.cuda_toolkits == {"13.0": ["cuda-toolkit-13-0"],
                                      "12.9": ["cuda-toolkit-12-9"]}
        assert plan.pins["13.0.*"] == ["cuda-toolkit-13-0"]
        assert plan.pins["12.9.*"] == ["cuda-toolkit-12-9"]
        assert {"cuda-toolkit-13-0", "cuda-toolkit-12-9"} <= set(plan.never_upgraded)
        # cuDNN follows the default toolkit (libcudnn9-cuda-13), not the extra one
        assert plan.cudnn == ["libcudnn9-cuda-13"]


def test_preferences_give_each_toolkit_its_own_1001_and_minus_1() -> None:
    plan = package_plan(_spec("nvidia-cuda-repo", ("12.4", "12.6"), "12.6"), "debian-12")
    text = render_preferences(plan.pins)
    for name, version in (("cuda-toolkit-12-6", "12.6.*"), ("cuda-toolkit-12-4", "12.4.*")):
        record = f"Package: {name}\nPin: version {version}\nPin-Priority: 1001"
        assert record + f"\n\nPackage: {name}\nPin: version *\nPin-Priority: -1" in text


def test_default_comes_first_whatever_the_listing_order() -> None:
    spec = _spec("nvidia-cuda-repo", ("12.4", "12.6", "12.4"), "12.6")
    assert cuda_order(spec) == ["12.6", "12.4"]
    assert list(package_plan(spec, "debian-12").cuda_toolkits) == ["12.6", "12.4"]


@pytest.mark.parametrize(("version", "key"), [("12.4", "12.4.*"), ("13.0", "13.0.*"),
                                              ("12.4.1", "12.4.1")])
def test_cuda_pin_key(version: str, key: str) -> None:
    assert cuda_pin(version) == key


def test_debian_archive_has_one_toolkit_and_refuses_two() -> None:
    one = package_plan(_spec("debian-nonfree", ("11.8",), "11.8"), "debian-12")
    assert one.cuda_toolkits == {"11.8": ["nvidia-cuda-toolkit"]}
    assert one.pins["11.8.*"] == ["nvidia-cuda-toolkit"]  # 11.8.89~11.8.0-5~deb12u1 matches
    with pytest.raises(ConfigError, match="installs one CUDA toolkit .* lists CUDA 11.8 and 12.4"):
        package_plan(_spec("debian-nonfree", ("11.8", "12.4"), "11.8"), "debian-12")


def test_no_cuda_means_no_toolkit_and_no_pin() -> None:
    plan = package_plan(_spec("nvidia-cuda-repo", (), ""), "debian-12")
    assert plan.cuda_toolkits == {} and plan.cuda_toolkit == []
    assert not [k for k in plan.pins if k.startswith(("12.", "13."))]


def test_cuda_link_through_nvidias_alternatives_group() -> None:
    target = "/usr/local/cuda-12.4"
    # NVIDIA's packages made /usr/local/cuda -> /etc/alternatives/cuda -> newest toolkit
    assert cuda_link_commands(ALTERNATIVE_LINK, "/usr/local/cuda-12.6", target) == [
        "update-alternatives --set cuda /usr/local/cuda-12.4"
    ]
    assert cuda_link_commands(ALTERNATIVE_LINK, target, target) == []


def test_cuda_link_managed_directly_without_alternatives() -> None:
    target = "/usr/local/cuda-13.0"
    assert cuda_link_commands(None, None, target) == [f"ln -sfn {target} {CUDA_LINK}"]
    assert cuda_link_commands("/usr/local/cuda-12.9", None, target) == [
        f"ln -sfn {target} {CUDA_LINK}"
    ]
    assert cuda_link_commands(target, None, target) == []
