"""One OS key ("debian-12", "rocky-9") and one package-manager family for the package data, made
in one place (``gpuhost.oskey``) and reached from /etc/os-release (audit, checks, upgrade:
``OsInfo.key``/``family``), from pyinfra's LinuxDistribution (deploys) and from ``--os``."""

from __future__ import annotations

import pytest

from gpuhost import oskey, pkgmgr
from gpuhost.facts.probe_parsers import parse_os_release

# os-release files as each distribution ships them (ID, VERSION_ID, ID_LIKE; trimmed)
CASES = [
    ('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\nVERSION_ID="12"\n', "debian-12",
     "apt"),
    ('NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="22.04"\n', "ubuntu-22.04", "apt"),
    ('NAME="Ubuntu"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID="24.04"\n', "ubuntu-24.04", "apt"),
    ('NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.4"\n',
     "rocky-9", "dnf"),
    ('NAME="Rocky Linux"\nID="rocky"\nID_LIKE="rhel centos fedora"\nVERSION_ID="8.10"\n',
     "rocky-8", "dnf"),
    ('NAME="Red Hat Enterprise Linux"\nID="rhel"\nID_LIKE="fedora"\nVERSION_ID="9.6"\n',
     "rhel-9", "dnf"),
    ('NAME="Red Hat Enterprise Linux"\nID="rhel"\nID_LIKE="centos fedora"\nVERSION_ID="10.0"\n',
     "rhel-10", "dnf"),
    ('NAME="AlmaLinux"\nID="almalinux"\nID_LIKE="rhel centos fedora"\nVERSION_ID="9.5"\n',
     "almalinux-9", "dnf"),
    # a derivative gpuhost does not know: its own key (no profile names it), its parent's manager
    ('NAME="Linux Mint"\nID=linuxmint\nID_LIKE="ubuntu debian"\nVERSION_ID="22"\n',
     "linuxmint-22", "apt"),
    ("ID=Debian\n", "debian", "apt"),
    ('ID=plan9\nVERSION_ID="4"\n', "plan9-4", None),
]


def _meta(os_release: str) -> dict[str, str]:
    meta = {}
    for line in os_release.splitlines():
        key, _, value = line.partition("=")
        meta[key] = value.strip('"')
    return meta


@pytest.mark.parametrize(("os_release", "key", "family"), CASES)
def test_os_release_and_pyinfra_distro_give_the_same_key(
    os_release: str, key: str, family: str | None
) -> None:
    meta = _meta(os_release)
    distro = {"name": meta.get("NAME", ""), "major": None, "release_meta": meta}
    info = parse_os_release(os_release)
    assert info.key == key
    assert oskey.from_distro(distro) == key
    assert info.family == family
    assert oskey.from_release_meta(meta) == (key, family)


def test_the_manager_is_chosen_by_the_os_never_by_a_tool() -> None:
    assert pkgmgr.for_os("rocky", "rhel centos fedora") is pkgmgr.DNF
    assert pkgmgr.for_os("ubuntu") is pkgmgr.APT
    assert pkgmgr.for_key("almalinux-9") is pkgmgr.DNF
    assert pkgmgr.for_key("debian-12") is pkgmgr.APT
    assert pkgmgr.for_os("plan9") is None
    assert pkgmgr.for_database("rpm") is pkgmgr.DNF


@pytest.mark.parametrize(("text", "key"), [("debian12", "debian-12"), ("debian-12", "debian-12"),
                                           ("rocky-9.4", "rocky-9"), ("ubuntu-24.04",
                                                                       "ubuntu-24.04"),
                                           ("rhel10", "rhel-10"), ("nonsense", None)])
def test_a_key_as_a_user_writes_it(text: str, key: str | None) -> None:
    assert oskey.from_text(text) == key


def test_unknown_keys_are_the_ones_no_profile_may_name() -> None:
    keys = ["debian-12", "rocky-9", "rocky-9.4", "ubuntu-22.04", "centos-7", "rhel-10"]
    assert oskey.unknown_keys(keys) == ["rocky-9.4", "centos-7"]
    assert oskey.unknown_keys(["centos-7"], known=["centos-7"]) == []


def test_no_id() -> None:
    assert parse_os_release("NAME=x\n").key is None
    assert oskey.from_distro({"name": None, "major": None, "release_meta": {}}) == "unknown"


@pytest.mark.parametrize(
    ("os_id", "version_id"),
    [("debian", "12\n13"), ("ubuntu", "24.04/../../x"), ("rocky", "9" * 200), ("rocky", "9 4"),
     ("debian", "\u0661\u0662"), ("de\x1bbian", "12"), ("rocky", "9\x00"), ("../etc", "9"),
     ("ubuntu", "24.04;reboot")],
)  # fmt: skip
def test_an_os_release_value_no_os_release_has_is_an_unknown_os(os_id, version_id) -> None:
    """A hostile or broken host's os-release (os-release(5): lower-case 0-9, a-z, '.', '_' and
    '-'): before, its text became the key ('debian-12\\n13', 'ubuntu-24.04/../../x')."""
    assert oskey.os_key(os_id, version_id) is None


def test_the_os_release_rule_keeps_every_real_key() -> None:
    pairs = [("rocky", "9.4"), ("ubuntu", "24.04"), ('"debian"', '"12"'), ("ROCKY", "9"),
             ("opensuse-leap", "15.6"), ("arch", None)]  # fmt: skip
    assert [oskey.os_key(*pair) for pair in pairs] == [
        "rocky-9", "ubuntu-24.04", "debian-12", "rocky-9", "opensuse-leap-15.6", "arch"]
