"""A profile may list only OSes its package source has package names for
(``data/package_sets.yaml``): ``os: [ubuntu-22.04]`` with ``source: debian-nonfree`` used to load
and verify, and provision then refused every host with "accepted: none". Now the profile file is
refused at load, naming the field path, for every command that reads it (exit 2)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.cli import main
from gpuhost.datafiles import package_sets, supported_os
from gpuhost.errors import ConfigError
from gpuhost.matrix.profiles import SOURCES, load_profiles

PROFILE = """\
schema: 1
profiles:
  site:
    description: "site profile"
    os: {os}
    source: {source}
    driver: {{version: "535.309.01", branch: 535, kernel_module: proprietary}}
    cuda: {{versions: ["11.8"], default: "11.8"}}
"""


def _file(tmp_path: Path, os_list: str, source: str) -> str:
    path = tmp_path / "profiles.yaml"
    path.write_text(PROFILE.format(os=os_list, source=source), encoding="utf-8")
    return str(path)


def test_the_sources_oses_come_from_the_package_sets() -> None:
    sets = package_sets()["sources"]
    for source in SOURCES:
        assert supported_os(source) == sorted(k for k in sets[source] if not k.startswith("_"))
    assert supported_os("debian-nonfree") == ["debian-12"]
    assert supported_os("no-such-source") == []


@pytest.mark.parametrize(
    ("os_list", "source", "field", "found"),
    [
        ("[ubuntu-22.04]", "debian-nonfree", "profiles.site.os[0]", "'ubuntu-22.04'"),
        ("[debian-12, ubuntu-24.04]", "debian-nonfree", "profiles.site.os[1]", "'ubuntu-24.04'"),
        ("[debian-12]", "ubuntu-archive", "profiles.site.os[0]", "'debian-12'"),
        ("[rhel-9]", "debian-nonfree", "profiles.site.os[0]", "'rhel-9'"),
    ],
)
def test_an_os_without_a_package_set_for_the_source_is_refused(
    tmp_path: Path, os_list: str, source: str, field: str, found: str
) -> None:
    path = _file(tmp_path, os_list, source)
    with pytest.raises(ConfigError) as info:
        load_profiles(path)
    message = str(info.value)
    assert message.startswith(f"{path}: invalid profiles: {field}: {found}"), message
    assert f"source {source} has no package set" in message
    assert f"expected one of: {', '.join(supported_os(source))}" in message


@pytest.mark.parametrize(
    ("os_list", "source"),
    [
        ("[debian-12]", "debian-nonfree"),
        ("[debian-12, ubuntu-22.04, ubuntu-24.04]", "nvidia-cuda-repo"),
    ],
)
def test_oses_the_source_supports_load(tmp_path: Path, os_list: str, source: str) -> None:
    profile = load_profiles(_file(tmp_path, os_list, source))["site"]
    assert profile.source == source and set(profile.os) <= set(supported_os(source))


def test_every_built_in_profile_passes_the_check() -> None:
    for name, profile in load_profiles().items():
        assert set(profile.os) <= set(supported_os(profile.source)), name


def test_matrix_profile_verify_refuses_it_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, "[ubuntu-22.04]", "debian-nonfree")
    code = main(["matrix", "profile", "verify", "site", "--profiles", path])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1, err
    assert "profiles.site.os[0]: 'ubuntu-22.04'" in lines[0] and "Traceback" not in err


@pytest.mark.parametrize(
    ("os_list", "found"),
    [
        ("[rocky-9.4]", "'rocky-9.4' is not an OS key (did you mean rocky-9?)"),
        ("[debian12]", "'debian12' is not an OS key (did you mean debian-12?)"),
        ("[centos-7]", "'centos-7' is not an OS key;"),
    ],
)
def test_an_unknown_os_key_is_one_line_naming_the_keys(
    tmp_path: Path, os_list: str, found: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _file(tmp_path, os_list, "debian-nonfree")
    with pytest.raises(ConfigError) as info:
        load_profiles(path)
    message = str(info.value)
    assert message.startswith(f"{path}: invalid profiles: profiles.site.os[0]: {found}"), message
    assert "Ubuntu by release (ubuntu-24.04)" in message and "\n" not in message
    assert main(["matrix", "profile", "verify", "site", "--profiles", path]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and found in err[0], err
