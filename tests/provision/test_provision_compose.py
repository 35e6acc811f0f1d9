"""``provision`` composes ``harden``: the order of the packaged deploys and the opt-out, with each
deploy replaced by a recorder (what each one does is tested in tests/provision and tests/harden,
the whole run on real lab hosts in tests/integration/test_provision_harden_lab.py)."""

from __future__ import annotations

import importlib
from types import SimpleNamespace
from typing import Any

import pytest
from pyinfra.context import ctx_host

from gpuhost.deploys import guards
from gpuhost.errors import DeployError

# the package re-exports the deploy function under the module's name
provision_module = importlib.import_module("gpuhost.deploys.provision")

STEPS = (
    # an operation, before harden's nftables install: apt/dpkg left running is waited for and
    # what an interrupted install left is finished first
    "dpkg_settled",
    "apt proxy",  # gpuhost_proxy's drop-in (or its removal), before any apt download
    "harden",
    "install_driver",
    "install_cuda",
    "install_cudnn",
    "install_container_toolkit",
    "refresh_cdi",
    "configure_persistence",
    "configure_fabric_manager",
    "configure_gpu_clocks",
    "configure_environment",
)


class _Data(dict):
    def dict(self) -> dict[str, Any]:
        return dict(self)


def _run(
    monkeypatch,
    data: dict[str, Any],
    harden_error: str | None = None,
    installed: dict[str, str] | None = None,
    signing: Any = None,
) -> list[str]:
    calls: list[str] = []

    def current_driver(plan: Any) -> tuple[None, dict[str, str]]:
        calls.append("driver check")
        return None, dict(installed or {})

    def recorder(step: str):
        def record(**_kwargs: Any) -> None:
            if step == "harden" and harden_error:
                raise DeployError("gpu1", harden_error)
            calls.append(step)

        return record

    spec = SimpleNamespace(
        to_marker=dict, profile="p2", driver_version="550.54.15", kernel_module="proprietary"
    )
    # DKMS (Secure Boot signing is provision's); apt: the package manager of the first steps
    plan = SimpleNamespace(precompiled=None, family="apt")
    monkeypatch.setattr(provision_module, "resolve_host", lambda profiles: (spec, plan))
    monkeypatch.setattr(provision_module, "current_driver", current_driver)
    monkeypatch.setattr(provision_module, "checked_plan", lambda name, data: signing)
    for step in (*STEPS, "configure_signing", "verify_signing"):
        if step != "apt proxy":
            monkeypatch.setattr(provision_module, step, recorder(step))
    proxy = SimpleNamespace(configured=lambda **kw: calls.append(f"apt proxy{kw['proxies'] or ''}"))
    monkeypatch.setattr(provision_module, "apt_proxy", proxy)
    offline = SimpleNamespace(
        use_bundle=lambda setting, *_args: calls.append(f"bundle {setting.where} only"),
        stop_using_bundle=lambda: calls.append("sources back"),
    )
    monkeypatch.setattr(provision_module, "offline", offline)
    marker = SimpleNamespace(written=lambda **_kw: calls.append("marker"))
    monkeypatch.setattr(provision_module, "marker", marker)
    offered = SimpleNamespace(check_offered=lambda spec, plan, data: calls.append("apt offered"))
    monkeypatch.setattr(provision_module, "apt_offered", offered)
    with ctx_host.use(SimpleNamespace(name="gpu1", data=_Data(data))):
        provision_module.provision._inner()  # type: ignore[attr-defined]
    return calls


def test_dpkg_settles_first_then_hardening_and_the_marker_last(monkeypatch) -> None:
    # the apt guard (every pinned version offered) while the run is prepared, before any step
    expected = ["driver check", "apt offered", *STEPS, "marker"]
    assert _run(monkeypatch, {}) == expected
    assert _run(monkeypatch, {"gpuhost_harden": True}) == expected


def test_secure_boot_signing_is_configured_before_the_driver_and_checked_after(
    monkeypatch,
) -> None:
    calls = _run(monkeypatch, {}, signing="a signing plan")
    driver = calls.index("install_driver")
    assert calls[driver - 1] == "configure_signing" and calls[driver + 1] == "verify_signing"
    assert calls.index("harden") < calls.index("configure_signing")


def test_a_bundle_is_the_only_source_from_before_harden_to_after_the_marker(monkeypatch) -> None:
    # no apt guard: the bundle's manifest was matched against the same versions (resolve_host)
    steps = _run(monkeypatch, {"gpuhost_bundle": {"path": "/srv/b"}})
    assert steps == [
        "driver check", "dpkg_settled", "apt proxy", "bundle /srv/b only", *STEPS[2:], "marker",
        "sources back",
    ]


def test_the_proxy_setting_reaches_the_apt_drop_in(monkeypatch) -> None:
    steps = _run(monkeypatch, {"gpuhost_proxy": "http://proxy:3128"})
    assert "apt proxy{'http': 'http://proxy:3128', 'https': 'http://proxy:3128'}" in steps


def test_gpuhost_harden_false_opts_out(monkeypatch) -> None:
    steps = [step for step in STEPS if step != "harden"]
    assert _run(monkeypatch, {"gpuhost_harden": False}) == ["driver check", "apt offered",
                                                            *steps, "marker"]


def test_a_driver_change_is_refused_before_hardening(monkeypatch) -> None:
    with pytest.raises(DeployError, match="asks for NVIDIA driver 550.54.15") as info:
        _run(monkeypatch, {}, installed={"nvidia-driver-550": "550.127.05"})
    assert str(info.value).startswith("gpu1: profile p2 asks for")


def test_a_lockout_refusal_stops_the_host_before_the_driver(monkeypatch) -> None:
    with pytest.raises(DeployError, match="refusing to harden"):
        _run(monkeypatch, {}, harden_error="refusing to harden, nothing was changed: ...")


@pytest.mark.parametrize("value", ["no", 0, "false", [False]])
def test_gpuhost_harden_must_be_a_boolean(value) -> None:
    with pytest.raises(DeployError) as info:
        guards.check_harden("gpu1", {"gpuhost_harden": value})
    assert str(info.value) == (
        f"gpu1: gpuhost_harden: {value!r} is not a boolean; accepted: true, false"
    )
