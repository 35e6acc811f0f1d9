"""A profiles file (``--profiles``, ``gpuhost_profiles_file``) written by hand, with the mistakes
an operator makes and text no profile has: one line naming the file and the field, exit 2,
before any host is contacted (the inventory's host listens nowhere: a contact would be exit 1).

Before, a companion's package name was never checked (``"A B\\nPin: origin *"`` became lines of
apt's pin file, ``$(...)`` a package name in the install command), a version with a final
newline passed, and an ``os`` list holding an unquoted number said only 'expected a non-empty
list' without saying which entry or what was found."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost.errors import ConfigError, ParseError
from gpuhost.matrix.profiles import load_profiles
from gpuhost.parsers.profile_marker import MARKER_SCHEMA, parse_profile_marker
from tests.robustness.conftest import assert_one_line, gpuhost

HEAD = """profiles:
  mine:
    description: "a site's own profile"
    source: debian-nonfree
    driver: {version: "535.247.01", branch: 535, kernel_module: proprietary}
    cuda: {versions: ["12.2"], default: "12.2"}
"""


def _file(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "mine.yaml"
    path.write_text(HEAD + body, encoding="utf-8")
    return path


def test_the_head_with_a_plain_companion_loads(tmp_path: Path) -> None:
    """The cases below differ from this one only in the line they break."""
    path = _file(tmp_path, '    os: [debian-12]\n    companions: {nvidia-modprobe: "535.1-1"}\n')
    assert load_profiles(str(path))["mine"].companions == {"nvidia-modprobe": "535.1-1"}


@pytest.mark.parametrize(
    ("companions", "named"),
    [
        ('{"A B\\nPin: origin *": "1.0"}', "companions.'A B\\nPin: origin *': not a package name"),
        ('{"nvidia-modprobe $(touch /tmp/x)": "1.0"}', "'nvidia-modprobe $(touch /tmp/x)': not a"),
        ('{"-o": "1.0"}', "companions.'-o': not a package name"),
        ('{nvidia-modprobe: "535.1-1\\n"}', "expected a mapping of package -> exact Debian"),
    ],
    ids=["newline", "shell", "option", "version-newline"],
)
def test_a_companion_that_is_no_package_is_refused(
    tmp_path: Path, companions: str, named: str
) -> None:
    path = _file(tmp_path, f"    os: [debian-12]\n    companions: {companions}\n")
    with pytest.raises(ConfigError) as exc:
        load_profiles(str(path))
    assert str(exc.value).startswith(f"{path}: invalid profiles: profiles.mine.companions")
    assert named in str(exc.value)


@pytest.mark.parametrize(
    ("os_list", "named"),
    [
        ("[debian-12, 9.4]", "profiles.mine.os[1]: found 9.4 (float), expected an OS key as text"),
        ("[12]", "profiles.mine.os[0]: found 12 (int)"),
        ("[~]", "profiles.mine.os[0]: found None (NoneType)"),
        ("debian-12", "profiles.mine.os: found 'debian-12', expected a non-empty list"),
        ("[]", "profiles.mine.os: found [], expected a non-empty list"),
        ("[ubuntu-22]", "'ubuntu-22' is not an OS key (did you mean ubuntu-22.04?)"),
        ("[Debian-12]", "'Debian-12' is not an OS key (did you mean debian-12?)"),
        ("[rocky-9.4]", "'rocky-9.4' is not an OS key (did you mean rocky-9?)"),
        ('[""]', "os[0]: '' is not an OS key;"),
    ],
)
def test_a_bad_os_list_names_the_entry_and_what_was_found(
    tmp_path: Path, os_list: str, named: str
) -> None:
    path = _file(tmp_path, f"    os: {os_list}\n")
    inventory = tmp_path / "inv.py"
    inventory.write_text(
        "hosts = [('h1', {'ssh_hostname': '127.0.0.1', 'ssh_port': 9, "
        "'gpuhost_profile': 'mine'})]\n"
    )
    run = gpuhost("provision", str(inventory), "--dry", "--profiles", str(path), cwd=tmp_path)
    assert_one_line(run, 2, f"{path}: invalid profiles", named)


@pytest.mark.parametrize("name", ["my profile", "mine\n[gpuhost-cuda]", "-mine", "../mine", "my#1"])
def test_a_profile_name_the_hosts_marker_cannot_hold_is_refused(tmp_path: Path,
                                                                 name: str) -> None:
    """provision writes the profile's name into the host's marker (/etc/gpuhost/profile), whose
    reader takes letters, digits and . _ + - only: a profile 'my profile' provisioned and then
    every audit, check and upgrade of that host refused its marker. (A newline also reached the
    RPM bundle's repository file, whose name line says the profile.)"""
    path = tmp_path / "p.yaml"
    key = json.dumps(name)  # a JSON string is a YAML double-quoted scalar
    path.write_text(HEAD.replace("  mine:", f"  {key}:") + "    os: [debian-12]\n", "utf-8")
    with pytest.raises(ConfigError) as exc:
        load_profiles(str(path))
    assert f"profiles.{name!r}: not a profile name (expected letters, digits" in str(exc.value)
    marker = json.dumps({"schema": MARKER_SCHEMA, "profile": name})
    with pytest.raises(ParseError, match="profile"):
        parse_profile_marker(marker)
