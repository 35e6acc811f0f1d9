"""``gpuhost bundle`` given bad input that gpuhost can judge here: one line, exit 2, before the
reference host is contacted (the inventory's host listens nowhere: a contact would be exit 1
'unreachable'). Before, an unknown PROFILE, an --os the profile does not install on, a missing
--profiles file, a --gnupghome that is no folder and a --sign-key gpg does not know were found
only after connecting (the key only after the whole package set was downloaded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.robustness.conftest import assert_one_line, gpuhost

PROFILE = "nvidia-repo-580-cuda13.0"


def _bundle(tmp_path: Path, profile: str, *args: str):
    inventory = tmp_path / "inventory.py"
    inventory.write_text('hosts = [("ref1", {"ssh_hostname": "127.0.0.1", "ssh_port": 9})]\n')
    return gpuhost(
        "bundle", profile, "-i", str(inventory), "--from-host", "ref1", "-o", "out", *args,
        cwd=tmp_path,
    )


@pytest.mark.parametrize(
    ("profile", "args", "named"),
    [
        ("no-such-profile", [], ["PROFILE 'no-such-profile': not a known profile", PROFILE]),
        ("nvidia-repo-580-cuda13", [], ["'nvidia-repo-580-cuda13'", "accepted: "]),
        (PROFILE, ["--profiles", "missing.yaml"], ["missing.yaml", "cannot read"]),
        (PROFILE, ["--sign-key", "k", "--gnupghome", "no-home"], ["--gnupghome no-home"]),
        (PROFILE, ["--sign-key", "nobody@example.invalid", "--gnupghome", "."],
         ["--sign-key 'nobody@example.invalid': no secret key of that name in ."]),
        (PROFILE, ["--sign-key", "--x\nq"], ["--sign-key '--x\\nq': expected a gpg key"]),
        (PROFILE, ["--sign-key", ""], ["--sign-key '': expected a gpg key"]),
        # an OS the profile does not install on was found only on the host (or, unreachable,
        # not at all): --os is what the operator said the reference host runs
        (PROFILE, ["--os", "ubuntu-22"],
         [f"--os ubuntu-22: profile {PROFILE} installs on debian-12, ubuntu-22.04,",
          "not on ubuntu-22; expected one of them"]),
        (PROFILE, ["--os", "centos-7"], ["--os centos-7: profile", "not on centos-7"]),
        ("debian12-nonfree-535-security", ["--os", "Rocky-9.4"],
         ["--os Rocky-9.4: profile debian12-nonfree-535-security installs on debian-12, not on "
          "rocky-9"]),
    ],
)
def test_bad_bundle_input_is_one_line_before_the_host(tmp_path, profile, args, named) -> None:
    run = _bundle(tmp_path, profile, *args)
    assert_one_line(run, 2, *named)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("make", "named"),
    [
        (lambda root: None, "manifest.json: cannot read file (No such file or directory)"),
        (lambda root: root.mkdir(), "manifest.json: cannot read file (No such file or directory)"),
        (lambda root: root.write_text("x"), "manifest.json: cannot read file (Not a directory)"),
        (
            lambda root: (root.mkdir(), (root / "manifest.json").write_text('{"schema": 1}')),
            "'profile' is a required property",
        ),
        (
            lambda root: (root.mkdir(), (root / "manifest.json").write_bytes(b"\xff\x00[[[")),
            "manifest.json: binary data, not text",
        ),
    ],
    ids=["missing", "empty folder", "a file", "manifest without fields", "manifest garbage"],
)
def test_a_bad_bundle_folder_is_one_line_before_any_host(tmp_path, make, named) -> None:
    """provision found a missing or garbage bundle folder only on each host it reached (an
    unreachable host hid it: exit 1 'unreachable'); the folder is on this machine."""
    make(tmp_path / "bundle")
    host = {"ssh_hostname": "127.0.0.1", "ssh_port": 9, "gpuhost_profile": PROFILE}
    bundled = {**host, "gpuhost_bundle": {"path": "bundle"}}
    (tmp_path / "inv.py").write_text(f"gpu = [('a', {bundled!r}), ('b', {host!r})]\n")
    run = gpuhost("provision", "inv.py", "--dry", cwd=tmp_path)
    assert_one_line(run, 2, "inv.py: host a: gpuhost_bundle: bundle/manifest.json", named)
