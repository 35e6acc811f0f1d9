"""sshd's effective configuration is read with one command: the audit probe's section, provision's
SshdEffectiveConfig fact and the checks' sshd fixture run probe.script.SSHD_T_CODE (sshd from
PATH, else /usr/sbin/sshd) and parse it with parsers.sshd.parse_sshd_t."""

from __future__ import annotations

import inspect
import os
import subprocess
from pathlib import Path

import pytest

from gpuhost.checks import test_ssh as ssh_checks
from gpuhost.facts.sshd import SshdEffectiveConfig
from gpuhost.parsers.sshd import AUDIT_KEYWORDS, audit_settings, parse_sshd_t
from gpuhost.probe.script import SSHD_FOUND_CODE, SSHD_T_CODE, STATIC_SECTIONS

SSHD_SECTION = next(section for section in STATIC_SECTIONS if section.name == "sshd")

# what OpenSSH 9.2's `sshd -T` prints (a subset), plus keywords the audit does not keep
SSHD_T_OUTPUT = """\
port 2222
addressfamily any
usepam yes
permitrootlogin without-password
pubkeyauthentication yes
passwordauthentication no
kbdinteractiveauthentication no
permitemptypasswords no
ciphers chacha20-poly1305@openssh.com,aes256-gcm@openssh.com
hostkey /etc/ssh/ssh_host_ed25519_key
subsystem sftp /usr/lib/openssh/sftp-server
"""


def _sh(code: str, path: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path}
    return subprocess.run(
        ["/bin/sh", "-c", code], capture_output=True, text=True, env=env, timeout=30
    )


@pytest.fixture
def fake_sshd(tmp_path: Path) -> str:
    """A PATH whose only sshd answers -T like OpenSSH (and refuses anything else)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "output").write_text(SSHD_T_OUTPUT, encoding="utf-8")
    script = bin_dir / "sshd"
    script.write_text(f'#!/bin/sh\n[ "$1" = "-T" ] || exit 255\ncat {bin_dir / "output"}\n')
    script.chmod(0o755)
    return f"{bin_dir}:/usr/bin:/bin"


def test_the_three_readers_run_one_command() -> None:
    assert SSHD_T_CODE in SSHD_SECTION.code
    assert SshdEffectiveConfig().command().startswith(SSHD_T_CODE)
    fixture_source = inspect.getsource(ssh_checks.sshd)
    assert "SSHD_T_CODE" in fixture_source and "SSHD_FOUND_CODE" in fixture_source
    assert '"sshd -T"' not in fixture_source.replace("``sshd -T``", "")


def test_fact_probe_and_checks_read_the_same_settings(fake_sshd: str) -> None:
    fact_out = _sh(SshdEffectiveConfig().command(), fake_sshd)
    check_out = _sh(SSHD_T_CODE, fake_sshd)
    probe_out = _sh(SSHD_SECTION.code, fake_sshd)
    assert _sh(SSHD_FOUND_CODE, fake_sshd).returncode == 0
    assert (fact_out.returncode, check_out.returncode, probe_out.returncode) == (0, 0, 0)

    full = SshdEffectiveConfig().process(fact_out.stdout.splitlines())
    assert full == parse_sshd_t(check_out.stdout.splitlines())
    assert full["port"] == ["2222"] and "hostkey" in full
    # the probe keeps only the audit's keywords, with the values the fact reads
    probed = parse_sshd_t(probe_out.stdout.splitlines())
    assert set(probed) == set(AUDIT_KEYWORDS) - {"challengeresponseauthentication"}
    assert audit_settings(probed) == audit_settings(full)
    assert {key: full[key] for key in probed} == probed


@pytest.mark.skipif(Path("/usr/sbin/sshd").exists(), reason="/usr/sbin/sshd is installed here")
def test_without_sshd_every_reader_says_absent(tmp_path: Path) -> None:
    path = f"{tmp_path}:/usr/bin:/bin"
    assert _sh(SSHD_FOUND_CODE, path).returncode != 0
    assert _sh(SSHD_SECTION.code, path).returncode == 127
    fact_out = _sh(SshdEffectiveConfig().command(), path)
    assert fact_out.returncode == 0
    assert SshdEffectiveConfig().process(fact_out.stdout.splitlines()) == {}
