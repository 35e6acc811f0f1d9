"""Secure Boot done by provision: the guard (one line before any package is touched), DKMS's
signing drop-in, the MOK enrollment request, the module's signature checked after the install,
and the fact's shell code run for real against files and stand-in mokutil/modinfo."""

from __future__ import annotations

import base64
import os
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
from harden.fakehost import FakeHost, command_to_json
from pyinfra.api import OperationError
from pyinfra.context import ctx_host
from signing_support import certificate

from gpuhost.deploys import secure_boot
from gpuhost.errors import DeployError, ParseError
from gpuhost.facts.host_facts import SecureBoot
from gpuhost.operations import signing as ops
from gpuhost.parsers import signing
from gpuhost.probe.script import module_signing_code

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "secureboot"
SB_ON = SecureBoot(True, True, "mokutil")
SERIAL = 0x3F5EC05FE6498AF54AC7DA1B553C50189FE070C9  # the mlx5 capture's sig_key
KEY, CERT = "/root/mok/signing.key", "/root/mok/signing.der"
GIVEN = {secure_boot.KEY: KEY, secure_boot.CERT: CERT}
GOOD_CERT = signing.Certificate(f"{SERIAL:X}", der=True)


def _facts(
    enrollment: str | None = signing.ENROLLED,
    key_readable: bool | None = True,
    cert: signing.Certificate | None = GOOD_CERT,
    modinfo: str = "modinfo-mlx5-dkms-signed-debian12.txt",
    cert_path: str = CERT,
) -> signing.SigningFacts:
    return signing.SigningFacts(
        read=True,
        cert_path=cert_path,
        cert=cert,
        cert_error=None if cert else f"{cert_path}: no such file or not readable",
        key_path=KEY,
        key_readable=key_readable,
        enrollment=enrollment,
        module=signing.parse_modinfo((FIXTURES / modinfo).read_text(encoding="utf-8")),
    )


def _problem(data: dict, found: signing.SigningFacts, sb: SecureBoot = SB_ON) -> str | None:
    return secure_boot.signing_problem(secure_boot.plan_for(data, sb), found)


def test_nothing_to_do_without_secure_boot_or_a_key() -> None:
    assert secure_boot.plan_for({}, SecureBoot(False, False, "no EFI (legacy boot)")) is None
    assert secure_boot.plan_for({}, SecureBoot()) is None  # unknown: not refused
    plan = secure_boot.plan_for(GIVEN, SecureBoot(False, True, "mokutil"))
    assert plan == secure_boot.SigningPlan(KEY, CERT, secure_boot=False)


def test_a_missing_or_unreadable_key_or_certificate_is_one_line() -> None:
    unreadable = _problem(GIVEN, _facts(key_readable=False))
    assert unreadable == f"gpuhost_module_signing_key: {KEY} is missing or not readable on the host"
    # checked with Secure Boot off too: DKMS would sign with a key it cannot read
    off = SecureBoot(False, True, "mokutil")
    assert _problem(GIVEN, _facts(cert=None), off) == (
        f"gpuhost_module_signing_cert: {CERT}: no such file or not readable"
    )
    pem = _problem(GIVEN, _facts(cert=signing.Certificate("1", der=False)))
    assert pem is not None and "is PEM but mokutil needs DER" in pem


def test_enrollment_decides_on_a_secure_boot_host() -> None:
    assert _problem(GIVEN, _facts(signing.ENROLLED)) is None
    assert _problem(GIVEN, _facts(signing.IN_DB)) is None
    assert _problem(GIVEN, _facts(signing.PENDING)) is None
    assert _problem(GIVEN, _facts(None)) is None  # no mokutil yet: installed, checked after
    not_enrolled = _problem(GIVEN, _facts(signing.NOT_ENROLLED))
    assert not_enrolled is not None
    assert f"{CERT} is not enrolled in MOK" in not_enrolled
    assert "gpuhost_mok_password" in not_enrolled and f"mokutil --import {CERT}" in not_enrolled
    with_password = {**GIVEN, "gpuhost_mok_password": "one-time"}
    assert _problem(with_password, _facts(signing.NOT_ENROLLED)) is None
    assert "blocked" in (_problem(with_password, _facts(signing.BLOCKED)) or "")


def test_no_key_needs_dkms_own_key_enrolled_or_a_password() -> None:
    dkms_own = _facts(signing.NOT_ENROLLED, key_readable=None, cert_path=signing.DKMS_DEFAULT_CERT)
    refused = _problem({}, dkms_own)
    assert refused is not None and refused.startswith("Secure Boot is enabled")
    assert "gpuhost_module_signing_key" in refused and "gpuhost_mok_password" in refused
    assert _problem({"gpuhost_mok_password": "one-time"}, dkms_own) is None
    # the key happens to be DKMS's and is enrolled: nothing is missing
    enrolled = _facts(signing.ENROLLED, key_readable=None, cert_path=signing.DKMS_DEFAULT_CERT)
    assert _problem({}, enrolled) is None


def _fake(facts: dict, executing: bool = False) -> FakeHost:
    fake = FakeHost(facts)
    # current_stage None: facts are read as asked (no prepare-stage cache)
    fake.state = SimpleNamespace(is_executing=executing, current_stage=None)  # type: ignore[attr-defined]
    return fake


def test_checked_plan_refuses_with_the_host_name_before_any_change() -> None:
    fake = _fake(
        {
            "kernel.SecureBootState": SB_ON,
            "signing.ModuleSigning": {
                f"cert={CERT},key={KEY}": _facts(signing.NOT_ENROLLED, key_readable=False)
            },
        }
    )
    fake.name = "gpu7"  # type: ignore[misc]
    with ctx_host.use(fake), pytest.raises(DeployError) as info:
        secure_boot.checked_plan("gpu7", dict(GIVEN))
    assert str(info.value) == (
        f"gpu7: gpuhost_module_signing_key: {KEY} is missing or not readable on the host"
    )
    # no key given: the certificate DKMS is configured with is the one judged and enrolled
    conf_cert = "/etc/mok/dkms.der"
    fake = _fake(
        {
            "kernel.SecureBootState": SB_ON,
            "signing.ModuleSigning": {
                "cert=None,key=None": _facts(
                    signing.NOT_ENROLLED, key_readable=None, cert_path=conf_cert
                )
            },
        }
    )
    with ctx_host.use(fake):
        plan = secure_boot.checked_plan("gpu7", {"gpuhost_mok_password": "one-time"})
    assert plan == secure_boot.SigningPlan(None, conf_cert, True, "one-time")


def _run(op, facts: dict, executing: bool = False, **kwargs) -> tuple[list, list[str]]:
    fake = _fake(facts, executing)
    with ctx_host.use(fake):
        commands = [command_to_json(c) for c in op._inner(**kwargs)]
    return commands, fake.noops


def test_dkms_drop_in_is_written_once() -> None:
    text = signing.framework_conf_text(KEY, CERT)
    commands, _ = _run(
        ops.dkms_signing,
        {"files.SmallFile": {f"path={ops.DKMS_DROPIN}": None}},
        key=KEY,
        cert=CERT,
    )
    assert commands == [
        "install -d -m 755 /etc/dkms/framework.conf.d",
        {"upload": ops.DKMS_DROPIN, "content": text},
        f"chmod 644 {ops.DKMS_DROPIN}",
    ]
    # what gpuhost writes is what the parser (and DKMS) read back
    read = signing.parse_framework_conf(text)
    assert (read.key, read.cert, read.configured) == (KEY, CERT, True)
    same = {"files.SmallFile": {f"path={ops.DKMS_DROPIN}": text.splitlines()}}
    commands, noops = _run(ops.dkms_signing, same, key=KEY, cert=CERT)
    assert commands == [] and noops == [f"{ops.DKMS_DROPIN} names {KEY}"]


@pytest.mark.parametrize(
    ("state", "password", "requested"),
    [
        (signing.ENROLLED, "pw", False),
        (signing.PENDING, "pw", False),
        (signing.NOT_ENROLLED, None, False),
        (signing.NOT_ENROLLED, "pw", True),
        (signing.UNREADABLE, "pw", True),  # DKMS generates the key during the install
    ],
)
def test_enrollment_is_requested_only_when_needed(state, password, requested) -> None:
    facts = {"signing.ModuleSigning": {f"cert={CERT},key=None": _facts(state)}}
    commands, noops = _run(ops.enrollment_requested, facts, cert=CERT, password=password)
    assert bool(commands) is requested and bool(noops) is not requested
    if requested:
        assert f"mokutil --import {CERT}" in commands[0]
        assert "--test-key" in commands[0]  # decided again on the host


def test_the_password_is_masked_in_what_pyinfra_prints() -> None:
    command = ops.import_command(CERT, "s3cret one")
    assert "s3cret" not in command.get_masked_value()
    assert "'s3cret one'" in command.get_raw_value()


def test_the_module_signature_is_checked_after_the_install() -> None:
    key = f"cert={CERT},key=None"
    commands, noops = _run(ops.module_signed, {}, cert=CERT)  # prepare: not judged yet
    assert commands == [] and "after the install" in noops[0]
    good = {"signing.ModuleSigning": {key: _facts(signing.PENDING)}}
    _, noops = _run(ops.module_signed, good, executing=True, cert=CERT)
    assert "confirm the enrollment in the MOK manager" in noops[0]
    cases = {
        "modinfo-unsigned-variant.txt": "carries no signature",
        "modinfo-camblet-dkms-signed-arm64.txt": "not with /root/mok/signing.der",
        "modinfo-not-found.txt": "no nvidia module is installed",
    }
    for modinfo, said in cases.items():
        bad = {"signing.ModuleSigning": {key: _facts(modinfo=modinfo)}}
        with pytest.raises(OperationError, match=said):
            _run(ops.module_signed, bad, executing=True, cert=CERT)
    # mokutil installed by this run: the enrollment the guard could not read is judged now
    unenrolled = {"signing.ModuleSigning": {key: _facts(signing.NOT_ENROLLED)}}
    with pytest.raises(OperationError, match="says is not-enrolled: the module will not load"):
        _run(ops.module_signed, unenrolled, executing=True, cert=CERT)


def _stub(folder: Path, name: str, output: str) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}EOF\n", encoding="utf-8")
    path.chmod(0o755)


def test_the_fact_command_reads_real_files_and_tools(tmp_path: Path) -> None:
    """The shell of ModuleSigning run here: a key, a DER certificate, stand-in mokutil and
    modinfo printing mokutil's wording and a real modinfo capture."""
    (tmp_path / "mok.key").write_text("key", encoding="utf-8")
    cert = tmp_path / "mok.der"
    cert.write_bytes(certificate(SERIAL))
    tools = tmp_path / "bin"
    tools.mkdir()
    _stub(tools, "mokutil", f"{cert} is already enrolled\n")
    modinfo = (FIXTURES / "modinfo-mlx5-dkms-signed-debian12.txt").read_text(encoding="utf-8")
    _stub(
        tools,
        "modinfo",
        "filename:       /lib/modules/6.1.0-20-amd64/updates/dkms/nvidia-current.ko\n" + modinfo,
    )
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    code = module_signing_code(str(tmp_path / "mok.key"), str(cert))
    out = subprocess.run(["sh", "-c", code], capture_output=True, text=True, env=env, check=True)
    found = signing.parse_signing_output(out.stdout)
    assert found.key_readable is True and found.enrollment == signing.ENROLLED
    assert found.cert == signing.Certificate(f"{SERIAL:X}", der=True)
    assert found.module_signed_by_cert is True
    assert (
        secure_boot.signing_problem(
            secure_boot.SigningPlan(str(tmp_path / "mok.key"), str(cert), True), found
        )
        is None
    )
    missing = module_signing_code(str(tmp_path / "none.key"), str(tmp_path / "none.der"))
    out = subprocess.run(["sh", "-c", missing], capture_output=True, text=True, env=env, check=True)
    gone = signing.parse_signing_output(out.stdout)
    assert gone.key_readable is False and gone.cert is None
    assert gone.cert_error == f"{tmp_path}/none.der: no such file or not readable"
    encoded = base64.b64encode(certificate(SERIAL)).decode()
    assert signing.parse_certificate_b64(encoded, "x") == found.cert


def test_upgrade_preflight_judges_signing_as_provision_does(tmp_path: Path) -> None:
    """gpuhost upgrade refuses at preflight (before the snapshot and the drain) a host whose
    key provision's guard would refuse at the install."""
    from gpuhost.inventory.loader import InventoryHost
    from gpuhost.upgrade.hoststeps import HostSteps, StepSettings
    from tests.upgrade.fakes import ScriptedRemote, ok

    hosts = {"h1": InventoryHost("h1", dict(GIVEN), ())}
    steps = HostSteps(hosts, StepSettings(target="p", snapshots=tmp_path / "snapshots"))
    sb_on = "efi=yes\nmokutil=SecureBoot enabled\n"
    key_missing = f"##GPUHOST framework\n##GPUHOST key {KEY}\n##GPUHOST cert {CERT}\n"
    remote = ScriptedRemote("h1").on("/sys/firmware/efi", ok(sb_on))
    remote.on("##GPUHOST framework", ok(key_missing))
    steps._remotes["h1"] = remote  # type: ignore[assignment]
    problem = steps.signing_problem("h1")
    assert problem is not None
    assert problem.startswith(f"gpuhost_module_signing_key: {KEY} is missing or not readable")
    off = ScriptedRemote("h1").on("/sys/firmware/efi", ok("efi=no\n"))
    steps._remotes["h1"] = off  # type: ignore[assignment]
    hosts["h1"] = InventoryHost("h1", {}, ())
    steps.hosts = hosts
    assert steps.signing_problem("h1") is None


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ("installed=dkms-2.8.7\ncandidate=2.8.7-2ubuntu2.2", 2),  # Ubuntu 22.04
        ("candidate=3.0.11-1ubuntu13", 3),  # Ubuntu 24.04, not installed yet
        ("installed=dkms-3.0.10\ncandidate=3.0.10-8+deb12u1", 3),  # Debian 12
        ("candidate=(none)", None),
        ("", None),
    ],
)
def test_the_dkms_release_comes_from_dkms_or_apt(text: str, major: int | None) -> None:
    assert signing.parse_dkms_release(text).major == major


def test_a_dkms_version_line_that_is_not_one_is_a_parse_error() -> None:
    with pytest.raises(ParseError, match="expected 'dkms-VERSION'"):
        signing.parse_dkms_release("installed=bash: dkms: command not found")


@pytest.mark.parametrize(
    ("key", "release", "how"),
    [
        (KEY, signing.DkmsRelease(installed="2.8.7"), "dkms2"),
        (signing.UBUNTU_MOK_KEY, signing.DkmsRelease(candidate="2.8.7-2ubuntu2.2"), "ubuntu-mok"),
        (KEY, signing.DkmsRelease(candidate="3.0.11-1ubuntu13"), "dkms3"),
        (KEY, signing.DkmsRelease(), "dkms3"),
    ],
)
def test_the_signing_settings_follow_the_hosts_dkms_release(key, release, how) -> None:
    assert secure_boot.dkms_settings(key, release) == how


def test_dkms2_sign_tool_is_written_and_named_once() -> None:
    tool = signing.sign_tool_text(KEY, CERT)
    conf = signing.DKMS2_FRAMEWORK
    facts = {"files.SmallFile": {
        f"path={signing.DKMS2_SIGN_TOOL}": None,
        f"path={conf}": ["## Script to sign modules", '# sign_tool="/etc/dkms/sign_helper.sh"'],
    }}
    commands, _ = _run(ops.dkms2_sign_tool, facts, key=KEY, cert=CERT)
    assert commands == [
        "install -d -m 755 /etc/dkms",
        {"upload": signing.DKMS2_SIGN_TOOL, "content": tool},
        f"chmod 755 {signing.DKMS2_SIGN_TOOL}",
        f"touch {conf} && sed -i '/^[[:space:]]*sign_tool=/d' {conf} && "
        f"echo 'sign_tool=\"{signing.DKMS2_SIGN_TOOL}\"' >> {conf}",
    ]
    done = {"files.SmallFile": {f"path={signing.DKMS2_SIGN_TOOL}": tool.splitlines(),
                                   f"path={conf}": [signing.sign_tool_line()]}}
    commands, noops = _run(ops.dkms2_sign_tool, done, key=KEY, cert=CERT)
    assert commands == [] and noops == [f"{conf} runs {signing.DKMS2_SIGN_TOOL} ({KEY})"]


def test_the_sign_tool_signs_as_dkms_2_calls_it(tmp_path: Path) -> None:
    """DKMS 2.8.7 (dkms-project/dkms v2.8.7: ``. $dkms_frameworkconf``, then ``run_sign_tool``
    runs ``"$sign_tool" "$kernelver" <module>`` for each module it builds): the framework file's
    line, sourced by bash, names the tool, and the tool hands the key, certificate and module to
    kmodsign (a stand-in recording its arguments here)."""
    conf = tmp_path / "framework.conf"
    conf.write_text('## DKMS framework\n# sign_tool="/etc/dkms/sign_helper.sh"\n'
                    + signing.sign_tool_line() + "\n")
    named = subprocess.run(["bash", "-c", f". {conf}; echo \"$sign_tool\""], capture_output=True,
                           text=True, check=True).stdout.strip()
    assert named == signing.DKMS2_SIGN_TOOL
    tool = tmp_path / "gpuhost-sign-tool"
    tool.write_text(signing.sign_tool_text("/keys/my key.priv", "/keys/my.der"))
    tool.chmod(0o755)
    tools = tmp_path / "bin"
    tools.mkdir()
    record = tmp_path / "args"
    _stub_script(tools, "kmodsign", f'printf "%s|" "$@" > {record}\n')
    env = {**os.environ, "PATH": f"{tools}:{os.environ['PATH']}"}
    subprocess.run([str(tool), "5.15.0-91-generic", "/var/lib/dkms/nvidia/580/build/nvidia.ko"],
                   env=env, check=True)
    assert record.read_text() == (
        "sha512|/keys/my key.priv|/keys/my.der|/var/lib/dkms/nvidia/580/build/nvidia.ko|"
    )


def _stub_script(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def test_without_a_key_ubuntu_hosts_expect_ubuntus_mok_certificate(tmp_path: Path) -> None:
    """DKMS's default key: Ubuntu's shim-signed MOK on Ubuntu (dkms 2.8.7 sign_build, dkms
    3.0.11's "ubuntu*" default), DKMS's own elsewhere; the fact's shell picks by os-release."""
    code = module_signing_code(None, None)
    for release, cert in (("ID=ubuntu\n", signing.UBUNTU_MOK_CERT),
                          ("ID=debian\n", signing.DKMS_DEFAULT_CERT)):
        os_release = tmp_path / "os-release"
        os_release.write_text(release)
        out = subprocess.run(["sh", "-c", code.replace("/etc/os-release", str(os_release))],
                             capture_output=True, text=True, check=True).stdout
        assert signing.parse_signing_output(out).cert_path == cert
