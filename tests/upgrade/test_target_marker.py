"""An upgrade target is "current" on a host only when the host's provision marker records the
target's desired state (HQA 18:16: ``upgrade --to qa-t4`` where qa-t4 has the host's driver but
``clocks: max`` said "already on qa-t4, validated" and changed nothing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost.audit.coupled import is_coupled
from gpuhost.desired import DesiredState
from gpuhost.inventory.loader import InventoryHost
from gpuhost.matrix.profiles import load_profiles
from gpuhost.parsers.profile_marker import MARKER_PATH
from gpuhost.upgrade.host_state import HostState
from gpuhost.upgrade.hoststeps import HostSteps, StepSettings, resolve_target
from gpuhost.upgrade.orchestrate import HostContext, HostIsCurrent, UpgradeOptions
from gpuhost.upgrade.validate import Expectation, marker_problems, package_problems
from tests.upgrade.fakes import ScriptedRemote, ok

BUILT_IN = "debian12-nonfree-535-security"
DEB_VERSION = "535.309.01-1~deb12u1"

# the user's profile of the report: the built-in's driver, clocks at their maximum
QA_PROFILES = """\
schema: 1
profiles:
  qa-t4:
    description: "same driver as debian12-nonfree-535-security, clocks at max"
    os: [debian-12]
    source: debian-nonfree
    driver: {version: "535.309.01", branch: 535, kernel_module: proprietary}
    cuda: {versions: ["11.8"], default: "11.8"}
    fabric_manager: false
    clocks: {policy: max}
    persistence: true
    packages: {driver: nvidia-driver, cuda: nvidia-cuda-toolkit, persistence: nvidia-persistenced}
"""


def _marker_of(profile: str, profiles_file: str | None = None) -> dict:
    return DesiredState.from_profile(load_profiles(profiles_file)[profile], []).to_marker()


def _state(marker: dict | str | None) -> HostState:
    """A host on driver 535.309.01 (coupled packages installed and held) with ``marker``."""
    names = ["nvidia-driver", "nvidia-kernel-dkms", "libcuda1", "nvidia-smi"]
    packages = {n: {"version": DEB_VERSION, "arch": "amd64"} for n in names}
    assert any(is_coupled(n) for n in names)
    files = {}
    if marker is not None:
        text = marker if isinstance(marker, str) else json.dumps(marker, indent=2) + "\n"
        files[MARKER_PATH] = {"category": "gpuhost", "mode": "644", "content": text}
    return HostState(packages=packages, holds=list(names), files=files)


@pytest.fixture()
def qa_file(tmp_path: Path) -> str:
    path = tmp_path / "qa-profiles.yaml"
    path.write_text(QA_PROFILES, encoding="utf-8")
    return str(path)


def test_same_marker_is_current_other_settings_are_not(qa_file: str) -> None:
    built_in = _marker_of(BUILT_IN)
    qa = _marker_of("qa-t4", qa_file)
    assert marker_problems(built_in, _state(built_in)) == []
    problems = marker_problems(qa, _state(built_in))
    assert len(problems) == 1
    assert problems[0].startswith(f"{MARKER_PATH} differs from profile qa-t4: ")
    assert "clocks.mode 'off' (expected 'auto')" in problems[0]
    assert f"profile '{BUILT_IN}' (expected 'qa-t4')" in problems[0]
    # the driver packages alone do not tell the two apart
    target = Expectation("qa-t4", "535.309.01", profile="qa-t4")
    assert package_problems(target, _state(built_in)) == []
    with_marker = Expectation("qa-t4", "535.309.01", profile="qa-t4", marker=qa)
    assert package_problems(with_marker, _state(built_in)) == problems


def test_missing_legacy_or_unreadable_marker_is_not_current() -> None:
    wanted = _marker_of(BUILT_IN)
    assert marker_problems(wanted, _state(None)) == [
        f"{MARKER_PATH} is missing, expected profile {BUILT_IN}"
    ]
    assert marker_problems(wanted, _state(BUILT_IN + "\n")) == [
        f"{MARKER_PATH} names {BUILT_IN} without versions, expected profile {BUILT_IN}"
    ]
    (problem,) = marker_problems(wanted, _state('{"schema": 1, "profile": '))
    assert problem.startswith(f"{MARKER_PATH}: ")


class _Remote(ScriptedRemote):
    def connect(self) -> None:
        pass


def _preflight(qa_file: str, marker: dict, tmp_path: Path) -> tuple[dict, ScriptedRemote]:
    data = {"gpuhost_profile": BUILT_IN, "gpuhost_profiles_file": qa_file}
    hosts = {"h1": InventoryHost("h1", data, ())}
    target = resolve_target("qa-t4", load_profiles(qa_file))
    steps = HostSteps(hosts, StepSettings(target=target.name, snapshots=tmp_path / "snapshots"))
    remote = _Remote("h1").on("dpkg --audit", ok()).on("validate.d", ok())
    remote.on("/etc/os-release", ok("ID=debian\nVERSION_ID=\"12\"\n"))
    remote.on("/sys/firmware/efi", ok("efi=no\n"))  # no Secure Boot: no signing to judge
    steps._remotes["h1"] = remote  # type: ignore[assignment]
    steps.read_state = lambda host: _state(marker)  # type: ignore[method-assign]
    steps._audit_errors = lambda host, profile=None: []  # type: ignore[method-assign]
    ctx = HostContext("h1", "t", UpgradeOptions(), {})
    return steps.preflight(ctx), remote


def test_preflight_upgrades_a_host_whose_marker_names_another_profile(
    qa_file: str, tmp_path: Path
) -> None:
    result, _ = _preflight(qa_file, _marker_of(BUILT_IN), tmp_path)
    assert result["preflight_audit_rules"] == []


def test_preflight_calls_a_host_current_only_with_the_targets_marker(
    qa_file: str, tmp_path: Path
) -> None:
    with pytest.raises(HostIsCurrent, match="already on qa-t4, validated"):
        _preflight(qa_file, _marker_of("qa-t4", qa_file), tmp_path)
