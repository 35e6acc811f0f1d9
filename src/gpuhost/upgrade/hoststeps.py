"""The orchestrator's steps bound to real hosts (pyinfra over SSH).

Every step is a method taking a ``HostContext`` and returning data for the journal. Decisions
that can be pure live in the modules they belong to (snapshot, package_cache, drain,
stop_users, validate); this module only sequences commands on one host.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuhost.errors import ConfigError, GpuhostError, HostError
from gpuhost.facts.cuda_link import cuda_link_code
from gpuhost.facts.probe_parsers import parse_os_release, parse_secure_boot
from gpuhost.inventory.loader import InventoryHost
from gpuhost.operations.cdi import generate_command, targets
from gpuhost.operations.env import cuda_link_restore
from gpuhost.parsers.cdi import list_specs_command, parse_cdi_specs
from gpuhost.parsers.cuda import parse_cuda_link
from gpuhost.parsers.signing import SigningFacts, parse_signing_output
from gpuhost.pkgmgr import PackageManager
from gpuhost.probe.script import OS_RELEASE_CODE, SECURE_BOOT_CODE, module_signing_code
from gpuhost.reboot import reboot_and_wait
from gpuhost.upgrade import package_cache
from gpuhost.upgrade.connect import Canceller, PyinfraRemote, run_checks
from gpuhost.upgrade.deploy_batch import DeployBatcher, DeployRequest
from gpuhost.upgrade.drain import make_drainer
from gpuhost.upgrade.host_os import host_manager
from gpuhost.upgrade.host_state import HostState, is_stack_package, parse_host_state, state_command
from gpuhost.upgrade.orchestrate import HostContext, HostIsCurrent, StepFailed, StepFn
from gpuhost.upgrade.providers import make_provider
from gpuhost.upgrade.restore import RESTORE_KEY, recorded_link, restore_plan, restored
from gpuhost.upgrade.snapshot import SnapshotStore, build_snapshot, load_snapshot, new_snapshot_id
from gpuhost.upgrade.stop_users import start_units, stop_gpu_users
from gpuhost.upgrade.validate import (
    Expectation,
    check_problems,
    expectation_from_snapshot,
    junit_failures,
    package_problems,
    validate_host,
)

if TYPE_CHECKING:
    from gpuhost.matrix.profiles import Profile

PROFILE_KEY = "gpuhost_profile"
# The upgrade moves the GPU stack only: SSH/firewall hardening (part of provision's deploy) is not
# in the snapshot, so a rollback could not undo it; ``gpuhost provision`` owns it.
HARDEN_KEY = "gpuhost_harden"
# Audit findings about the stack the host runs now that are a reason to upgrade, not to refuse
# one (a driver named in a security bulletin); validation still judges the target with them.
UPGRADE_FIXES_RULES = ("security.",)
# Files a rollback puts back exactly as the snapshot had them; files in these folders that the
# snapshot did not have and whose name says gpuhost wrote them are removed.
RESTORED_CATEGORIES = (
    "apt_preferences", "apt_sources", "modprobe", "gpuhost", "units",
    "dnf_repos", "dnf_modules", "dnf_locks",
)
REMOVABLE_NEW_FILES = (
    "/etc/apt/preferences.d/gpuhost", "/etc/modprobe.d/gpuhost", "/etc/gpuhost/",
    "/etc/yum.repos.d/gpuhost-", "/etc/dnf/modules.d/nvidia-driver.module",
)
# Before changing packages: wait (up to 10 min) until the package manager no longer runs (a
# controller killed mid-install leaves one behind on the host), then finish what it left
# half-done where it can (the seam's settle_command, as provision's apt_pin.dpkg_settled).


def resolve_target(name: str, profiles: Mapping[str, Profile], where: str = "") -> Profile:
    """The ``--to`` profile from a profile table (one ConfigError listing known names). The
    upgrade keeps only its name: what it installs, pins and expects is the host's DesiredState,
    built from this profile by the deploy, the audit and the validation."""
    profile = profiles.get(name)
    if profile is None:
        raise ConfigError(
            f"--to {name!r}: unknown profile{where}; known: {', '.join(sorted(profiles)) or 'none'}"
        )
    if not profile.driver_version:
        raise ConfigError(f"profile {name}: has no driver version")
    return profile


def target_summary(profile: Profile) -> str:
    """One line naming the ``--to`` profile (the dry run's ``target:`` line)."""
    return f"{profile.name}: driver {profile.driver_version}" + (
        f" ({profile.description})" if profile.description else ""
    )


@dataclass
class StepSettings:
    target: str  # the --to profile's name ("" for commands that move no host: rollback, snapshot)
    snapshots: Path
    provider: Mapping[str, Any] | None = None
    drain_mode: str = "none"
    drain_timeout_s: float = 3600
    stop_gpu_processes: bool = False
    restart_mode: str = "reboot"
    reboot_timeout_s: float = 900
    force: bool = False
    # audit rule ids whose error findings neither refuse a host nor fail its validation (a known
    # site condition, e.g. driver.not-loaded on a host without a GPU)
    accept_audit: tuple[str, ...] = ()
    # the check suite (checks/, issue 7) run from the controller at validation: "none", "static",
    # "functional"; failures of checks named in accept_checks (function names) do not count
    checks: str = "none"
    accept_checks: tuple[str, ...] = ()


class HostSteps:
    """Real implementations of every step, one SSH session per host."""

    def __init__(self, hosts: Mapping[str, InventoryHost], settings: StepSettings) -> None:
        self.hosts = dict(hosts)
        self.settings = settings
        self.store = SnapshotStore(settings.snapshots)
        self.drainer = make_drainer(settings.drain_mode, settings.drain_timeout_s)
        self.provider = make_provider(settings.provider)
        self._remotes: dict[str, PyinfraRemote] = {}
        self._lock = threading.Lock()
        self.canceller = Canceller()
        self._deploys: dict[Callable[[], Any], DeployBatcher] = {}
        self._managers: dict[str, PackageManager] = {}

    def as_mapping(self) -> dict[str, StepFn]:
        return {
            "preflight": self.preflight,
            "snapshot": self.snapshot,
            "drain": self.drain,
            "stop_users": self.stop_users,
            "install": self.install,
            "restart": self.restart,
            "validate": self.validate,
            "undrain": self.undrain,
            "abort": self.abort,
            "rollback": self.rollback,
            "rollback_restart": self.restart,
            "rollback_validate": self.rollback_validate,
        }

    # -- plumbing ----------------------------------------------------------------------------

    def remote(self, host: str) -> PyinfraRemote:
        with self._lock:
            if host not in self._remotes:
                self._remotes[host] = PyinfraRemote(self.hosts[host], canceller=self.canceller)
            return self._remotes[host]

    def interrupt(self) -> None:
        """The operator stops the run: end child processes, refuse new commands; each host's
        wait in flight (connecting, a command) sees it within ``connect.STOP_POLL_S`` and
        drops its own SSH session, in the thread that owns it (what a command left on a host,
        e.g. a running dpkg, is waited for when ``--resume`` redoes the step)."""
        self.canceller.cancel()

    def _data(self, host: str) -> dict[str, Any]:
        return dict(self.hosts[host].data)

    def manager(self, host: str) -> PackageManager:
        """The host's package manager, by its OS (``upgrade.host_os``, read once per host)."""
        with self._lock:
            known = self._managers.get(host)
        if known is None:
            known = host_manager(self.remote(host))
            with self._lock:
                self._managers[host] = known
        return known

    def read_state(self, host: str) -> HostState:
        result = self.remote(host).run(state_command(self.manager(host)), timeout=300)
        return parse_host_state(result.stdout)

    def _check(self, host: str, command: str, what: str, timeout: float = 1800) -> str:
        result = self.remote(host).run(command, timeout=timeout)
        if not result.ok:
            raise HostError(host, f"{what} failed (exit {result.rc}): {result.tail()}")
        return result.stdout

    def _unhold(self, host: str, packages: list[str]) -> None:
        """Release holds/locks (also of packages held but not installed)."""
        if packages:
            self._check(host, self.manager(host).unhold(packages), "unhold")

    # -- forward steps -----------------------------------------------------------------------

    def preflight(self, ctx: HostContext) -> dict[str, Any]:
        host = ctx.host
        try:
            self.remote(host).connect()
        except GpuhostError as exc:
            raise StepFailed(f"unreachable: {exc}") from exc
        manager = self.manager(host)
        broken = self.remote(host).run(manager.unfinished_command()).stdout.strip()
        if broken:
            raise StepFailed(
                f"the {manager.database} database has half-installed packages: {broken[:200]}"
            )
        state = self.read_state(host)
        problems = validate_host(self.remote(host), self.expectation(host), state)
        if not problems:
            raise HostIsCurrent(f"already on {self.settings.target}, validated")
        refused = self.signing_problem(host) or self.offered_problem(host)
        if refused:
            raise StepFailed(refused)
        errors = self._audit_errors(host)
        blocking = blocking_errors(errors, self.accepted(ctx))
        if blocking and not self.settings.force:
            raise StepFailed(
                "preflight audit has errors (pass --force to upgrade anyway, or --accept-audit "
                "RULE for a known condition): " + "; ".join(blocking)
            )
        rules = sorted({rule for rule, _ in errors})
        return {
            "summary": preflight_summary(rules, self.accepted(ctx), bool(blocking)),
            "preflight_audit_rules": rules,
        }

    def signing_problem(self, host: str) -> str | None:
        """Secure Boot module signing judged as provision's guard judges it (key and
        certificate readable, the certificate enrolled or requestable), before the snapshot and
        the drain: a host provision would refuse at the install is refused here."""
        from gpuhost.deploys.secure_boot import judged

        remote = self.remote(host)

        def read(key: str | None, cert: str | None) -> SigningFacts:
            return parse_signing_output(remote.run(module_signing_code(key, cert)).stdout)

        secure_boot = parse_secure_boot(remote.run(SECURE_BOOT_CODE).stdout)
        return judged(self._data(host), secure_boot, read)[1]

    def offered_problem(self, host: str) -> str | None:
        """On a dnf host, what provision's guard would refuse at the install (a package the
        target installs and locks that no repository offers at its version,
        ``deploys.nvidia_dnf.offered_check``), judged here with the same facts' commands and
        parsers, before the snapshot and the drain. None elsewhere, and from a bundle."""
        from gpuhost.bundle.setting import bundle_setting
        from gpuhost.deploys.guards import check_profile
        from gpuhost.deploys.nvidia_dnf import offered_check
        from gpuhost.deploys.spec import package_plan
        from gpuhost.inventory.profiles import profile_table

        data = self._data(host)
        if self.manager(host).family != "dnf" or bundle_setting(data) is not None:
            return None
        remote = self.remote(host)
        data[PROFILE_KEY] = self.settings.target
        try:
            desired = check_profile(host, data, profile_table(None, data))
            os_key = parse_os_release(remote.run(OS_RELEASE_CODE, timeout=60).stdout).key
            plan = package_plan(desired, os_key or "")
        except GpuhostError as exc:
            return str(exc)

        def read(fact: Any, **kwargs: Any) -> Any:
            found = fact()
            out = remote.run(str(found.command(**kwargs)), timeout=600).stdout.splitlines()
            if out and out[0].startswith("__pyinfra_missing_"):  # pyinfra's "no such file"
                return None
            return found.process(out)

        return offered_check(desired, plan, data, read)

    def expectation(self, host: str) -> Expectation:
        """The target as this host must end: driver packages, holds, and the provision marker
        of the target's desired state resolved with the host's data (GPUs, fabric manager), as
        provision's deploy resolves and writes it (a target that differs from the host's
        current profile only in clocks, CUDA, ... is not current)."""
        from gpuhost.deploys.guards import check_profile
        from gpuhost.inventory.profiles import profile_table

        data = self._data(host)
        data[PROFILE_KEY] = self.settings.target
        try:
            desired = check_profile(host, data, profile_table(None, data))
        except GpuhostError as exc:
            raise StepFailed(str(exc)) from exc
        return Expectation.of_desired(desired)

    def accepted(self, ctx: HostContext) -> set[str]:
        """Audit rules whose errors do not count: --accept-audit, and with --force the rules
        that already failed at preflight (the upgrade must not add new ones)."""
        rules = set(self.settings.accept_audit)
        if self.settings.force:
            rules |= {str(r) for r in ctx.data.get("preflight_audit_rules", [])}
        return rules

    def _audit_errors(self, host: str, profile: str | None = None) -> list[tuple[str, str]]:
        """(rule, message) of the audit's error findings; ``profile`` replaces the inventory's
        profile (after an upgrade the host is judged against the target)."""
        from gpuhost.audit.host import AuditSettings, audit_host
        from gpuhost.facts.build import host_facts_from_text
        from gpuhost.inventory.profiles import profile_table
        from gpuhost.probe.script import build_probe

        output = self.remote(host).run(build_probe(), timeout=600).stdout
        facts = host_facts_from_text(output)
        data = self._data(host)
        if profile is not None:
            data[PROFILE_KEY] = profile
        profiles = profile_table(None, data)  # the host's gpuhost_profiles_file, if any
        report = audit_host(host, facts, data, AuditSettings(profiles=profiles))
        # both answers: the target is judged with its security exposure too (UPGRADE_FIXES_RULES)
        return [(f.rule, f.message) for f in report.all_findings if f.severity == "error"]

    def snapshot(self, ctx: HostContext) -> dict[str, Any]:
        host = ctx.host
        return self.take_snapshot(host, require_complete_cache=not self.settings.force)

    def take_snapshot(self, host: str, require_complete_cache: bool = True) -> dict[str, Any]:
        state = self.read_state(host)
        sid = self.store.unique_id(host, new_snapshot_id())
        doc = build_snapshot(host, state, sid)
        label = f"gpuhost-{host}-{sid}"
        doc["provider"] = self.provider.snapshot(host, self._data(host), label, sid)
        fill = self.remote(host).run(
            package_cache.fill_command(sid, doc["packages"], self.manager(host)), timeout=1800
        )
        report = package_cache.parse_fill_output(sid, fill.stdout)
        doc["package_cache"] = report.as_dict()
        path = self.store.save(doc)
        if not fill.ok and fill.rc == 3:
            raise HostError(host, f"cannot create {report.path}: {fill.tail()}")
        if report.missing and require_complete_cache:
            missing = ", ".join(f"{n} ({r})" for n, r in sorted(report.missing.items()))
            raise HostError(
                host,
                f"package cache incomplete, a rollback could not restore: {missing} "
                f"(snapshot kept at {path}; --force upgrades anyway)",
            )
        size = package_cache.human_size(report.size_bytes)
        return {
            "snapshot_id": sid,
            "snapshot_path": str(path),
            "summary": f"{sid}: {len(doc['packages'])} packages, cache {size} in {report.path}",
        }

    def drain(self, ctx: HostContext) -> dict[str, Any]:
        reason = f"gpuhost upgrade to {self.settings.target}"
        data = self.drainer.drain(self.remote(ctx.host), self._data(ctx.host), reason)
        data["drained"] = True
        return data

    def stop_users(self, ctx: HostContext) -> dict[str, Any]:
        return stop_gpu_users(self.remote(ctx.host), self.settings.stop_gpu_processes)

    def install(self, ctx: HostContext) -> dict[str, Any]:
        host = ctx.host
        if ctx.resumed_step == "install":
            settle = self.manager(host).settle_command(tolerant=True)
            self._check(host, settle, "waiting for the interrupted install", 900)
        state = self.read_state(host)
        held = [p for p in state.held_names if is_stack_package(p)]
        self._unhold(host, held)
        self.provision(host, self.settings.target)
        # done only when the host shows it: every driver package at the target's version, held
        problems = package_problems(self.expectation(host), self.read_state(host))
        if problems:
            raise StepFailed("after the install: " + "; ".join(problems))
        return {"summary": f"unheld {len(held)}, installed {self.settings.target}, held"}

    def provision(self, host: str, profile: str) -> None:
        """Provision's deploy with the given profile, in this process with ``gpuhost
        provision``'s runner (hosts that reach it together are deployed together): pins,
        install, holds, marker; the driver may change. pyinfra's output for the host goes to
        ``logs/<host>-<time>-<profile>.log`` in the state dir; HostError names a guard's refusal
        or the failed operation."""
        entry = self.hosts[host]
        data = dict(entry.data)
        data[PROFILE_KEY] = profile
        data[HARDEN_KEY] = False
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        log = self.settings.snapshots.parent / "logs" / f"{host}-{stamp}-{profile}.log"
        request = DeployRequest(InventoryHost(entry.name, data, entry.groups), log)
        self.deploys().deploy(request)

    def deploys(self, deploy: Callable[[], Any] | None = None) -> DeployBatcher:
        """The batcher of ``deploy`` (default: provision's, the driver allowed to change)."""
        from gpuhost.deploys.provision import provision

        key = deploy or provision
        with self._lock:
            if key not in self._deploys:
                func = deploy or partial(provision, allow_driver_change=True)
                self._deploys[key] = DeployBatcher(func, self.canceller)
            return self._deploys[key]

    def restart(self, ctx: HostContext) -> dict[str, Any]:
        remote = self.remote(ctx.host)
        if self.settings.restart_mode == "reload" and self._reload_module(ctx.host):
            return {"summary": "kernel module reloaded"}
        before = reboot_and_wait(remote, self.settings.reboot_timeout_s)
        return {"summary": "rebooted, SSH back", "boot_token_before": before}

    def _reload_module(self, host: str) -> bool:
        """Unload and load the nvidia modules when nothing uses them; False when not possible."""
        remote = self.remote(host)
        loaded = remote.run("grep -c '^nvidia ' /proc/modules || true").stdout.strip()
        if loaded in ("", "0"):
            return False  # nothing loaded: a reboot decides what loads
        result = remote.run(
            "modprobe -r nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia"
        )
        return result.ok

    def refresh_cdi(self, host: str, expect: Expectation) -> list[str]:
        """After the restart, with the new driver's module loaded: the NVIDIA CDI specs that
        name another driver regenerated by the toolkit (``/etc/cdi/nvidia.yaml`` created where
        the target asks for CDI); the paths regenerated. Provision's own pass defers them while
        the old module is loaded (the generator reads the GPUs through NVML)."""
        if not expect.driver_version:
            return []
        listed = self.remote(host).run(list_specs_command())
        wanted = bool((expect.marker or {}).get("cdi"))
        paths = targets(parse_cdi_specs(listed.stdout), expect.driver_version, wanted)
        for path in paths:
            command = generate_command(path, expect.driver_version)
            self._check(host, command, f"regenerating the CDI spec {path}", 300)
        return paths

    def validate(self, ctx: HostContext) -> dict[str, Any]:
        expect = self.expectation(ctx.host)
        regenerated = self.refresh_cdi(ctx.host, expect)
        problems = validate_host(self.remote(ctx.host), expect, self.read_state(ctx.host))
        errors = self._audit_errors(ctx.host, self.settings.target)
        accepted = self.accepted(ctx)
        problems += [f"audit: {rule}: {msg}" for rule, msg in errors if rule not in accepted]
        problems += self._check_problems(ctx.host, self.settings.target)
        if problems:
            raise StepFailed("; ".join(problems))
        cdi = f"; CDI regenerated: {', '.join(regenerated)}" if regenerated else ""
        return {"summary": f"on {self.settings.target}, holds and pins in place{cdi}"}

    def _check_problems(self, host: str, profile: str) -> list[str]:
        if self.settings.checks == "none":
            return []
        entry = self.hosts[host]
        data = dict(entry.data)
        data[PROFILE_KEY] = profile
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        log = self.settings.snapshots.parent / "logs" / f"{host}-{stamp}-checks.log"
        xml = run_checks(
            InventoryHost(entry.name, data, entry.groups),
            self.settings.checks,
            log,
            canceller=self.canceller,
        )
        return check_problems(junit_failures(xml), set(self.settings.accept_checks))

    def undrain(self, ctx: HostContext) -> dict[str, Any]:
        self.drainer.undrain(self.remote(ctx.host), self._data(ctx.host), ctx.data)
        return {"drained": False}

    # -- failure paths -----------------------------------------------------------------------

    def abort(self, ctx: HostContext) -> dict[str, Any]:
        remote = self.remote(ctx.host)
        units = [str(u) for u in ctx.data.get("stopped_units", [])]
        start_units(remote, units)
        if ctx.data.get("drained"):
            self.drainer.undrain(remote, self._data(ctx.host), ctx.data)
        return {"summary": f"restarted {len(units)} unit(s); undrained", "drained": False}

    def _snapshot_doc(self, ctx: HostContext) -> dict[str, Any]:
        path = ctx.data.get("snapshot_path")
        if not path:
            raise StepFailed("no snapshot recorded for this host; cannot roll back")
        return load_snapshot(Path(str(path)), host=ctx.host)

    def rollback(self, ctx: HostContext) -> dict[str, Any]:
        return self.restore(ctx.host, self._snapshot_doc(ctx))

    def restore(self, host: str, doc: Mapping[str, Any]) -> dict[str, Any]:
        """Put packages (from the on-host cache), pins, holds and configs back as in ``doc``:
        the ``upgrade.restore`` deploy, in this process like the install."""
        state = self.read_state(host)
        cache = doc.get("package_cache") or {}
        files: dict[str, str] = dict(cache.get("files") or {})
        wanted = {n: r["version"] for n, r in doc["packages"].items()}
        uncached = sorted(set(wanted) - set(files))
        differs = [n for n in uncached if state.packages.get(n, {}).get("version") != wanted[n]]
        if differs:
            raise HostError(
                host, f"cannot restore {', '.join(differs)}: not in the snapshot's package cache"
            )
        plan = restore_plan(doc, state.files, RESTORED_CATEGORIES, REMOVABLE_NEW_FILES)
        plan = dataclasses.replace(plan, family=self.manager(host).family)
        entry = self.hosts[host]
        data = dict(entry.data)
        data[RESTORE_KEY] = plan
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        log = self.settings.snapshots.parent / "logs" / f"{host}-{stamp}-rollback.log"
        self.deploys(restored).deploy(
            DeployRequest(InventoryHost(entry.name, data, entry.groups), log)
        )
        restored_files = [
            path
            for path, (content, _) in sorted(plan.files.items())
            if (state.files.get(path) or {}).get("sha256") != hashlib.sha256(content).hexdigest()
        ] + list(plan.remove_files)
        moved = [n for n in files if state.packages.get(n, {}).get("version") != wanted[n]]
        added = sorted(set(state.packages) - set(wanted))
        link = self.cuda_link_note(host, plan.cuda_link)
        return {
            "summary": f"{len(moved)} package(s) from cache, {len(restored_files)} file(s) "
            f"restored, {len(added)} removed, {len(plan.holds)} held{'; ' + link if link else ''}",
            "restored_files": restored_files,
        }

    def cuda_link_note(self, host: str, recorded: Mapping[str, Any] | None) -> str | None:
        """After the rollback's deploy: the line saying why ``/usr/local/cuda`` is not as the
        snapshot recorded it (its toolkit gone), read with the link fact's command and judged
        as the deploy's operation judged it; None when it is (or nothing was recorded)."""
        if recorded is None:
            return None
        want = recorded_link(recorded)
        now = parse_cuda_link(self.remote(host).run(cuda_link_code(want.default or "")).stdout)
        return cuda_link_restore(want, now)[1]

    def rollback_validate(self, ctx: HostContext) -> dict[str, Any]:
        doc = self._snapshot_doc(ctx)
        return self.validate_against(ctx.host, doc)

    def validate_against(self, host: str, doc: Mapping[str, Any]) -> dict[str, Any]:
        expect = expectation_from_snapshot(doc)
        problems = validate_host(self.remote(host), expect, self.read_state(host))
        if problems:
            raise StepFailed("; ".join(problems))
        return {"summary": f"back on snapshot {doc['id']} ({doc.get('profile') or 'no profile'})"}

    def close(self) -> None:
        for remote in self._remotes.values():
            remote.close()


def blocking_errors(errors: list[tuple[str, str]], accepted: set[str]) -> list[str]:
    """The preflight audit errors that refuse a host: not accepted, not a reason to upgrade
    (``UPGRADE_FIXES_RULES``) (pure)."""
    return [
        f"{rule}: {message}"
        for rule, message in errors
        if rule not in accepted and not rule.startswith(UPGRADE_FIXES_RULES)
    ]


def preflight_summary(rules: list[str], accepted: set[str], forced: bool) -> str:
    """The preflight line: how many audit error rules, each with why the upgrade goes on
    (pure): the target fixes it (a security bulletin), accepted (--accept-audit), or forced."""
    if not rules:
        return "0 audit errors"

    def why(rule: str) -> str:
        if rule.startswith(UPGRADE_FIXES_RULES):
            return "which the target fixes"
        return "accepted" if rule in accepted else "forced" if forced else "accepted"

    return f"{len(rules)} audit error rule(s), going on: " + ", ".join(
        f"{rule} ({why(rule)})" for rule in rules
    )


def snapshot_summary(doc: Mapping[str, Any]) -> str:
    cache = doc.get("package_cache") or {}
    return json.dumps(
        {
            "id": doc["id"],
            "profile": doc.get("profile"),
            "packages": len(doc["packages"]),
            "cache_bytes": cache.get("size_bytes"),
        }
    )
