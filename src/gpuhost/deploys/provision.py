"""``provision``: the whole pinned stack on one host, guards first, SSH hardened too.

Every guard runs before any operation is added for the host: profile, OS, CUDA repository
data, Secure Boot module signing (``deploys.secure_boot``: the key and certificate readable, the
certificate enrolled or its enrollment requestable), on a dnf host every package the run
installs and locks offered at its version (``nvidia_dnf.check_offered``; on an apt host
``apt_offered.check_offered``, through a private apt configuration), then (unless
inventory data ``gpuhost_harden`` is false) the SSH lockout checks of
``gpuhost.deploys.harden``. A host that fails one is refused unchanged.
"""

from __future__ import annotations

from typing import Any

from pyinfra import host
from pyinfra.api import deploy
from pyinfra.facts.deb import DebPackages
from pyinfra.facts.rpm import RpmPackages
from pyinfra.facts.server import LinuxDistribution

from gpuhost import oskey
from gpuhost.bundle.setting import bundle_setting, proxy_urls
from gpuhost.deploys import apt_offered, guards, nvidia_dnf, offline
from gpuhost.deploys.gpu import (
    configure_environment,
    configure_fabric_manager,
    configure_gpu_clocks,
    configure_persistence,
)
from gpuhost.deploys.harden import harden
from gpuhost.deploys.nvidia import (
    install_container_toolkit,
    install_cuda,
    install_cudnn,
    install_driver,
    refresh_cdi,
)
from gpuhost.deploys.secure_boot import checked_plan, configure_signing, verify_signing
from gpuhost.deploys.spec import PackagePlan, package_plan
from gpuhost.desired import DesiredState
from gpuhost.errors import ConfigError, DeployError, GpuhostError, ParseError
from gpuhost.facts.files import SmallFile
from gpuhost.inventory.profiles import install_data_problem
from gpuhost.operations import apt_proxy, dnf_proxy, marker
from gpuhost.operations._facts import fact
from gpuhost.operations.apt_pin import dpkg_settled
from gpuhost.operations.dnf_pin import dnf_settled
from gpuhost.parsers.profile_marker import MARKER_PATH, ProfileMarker, parse_profile_marker
from gpuhost.pyinfra_adapter import real_host
from gpuhost.versions import upstream_of_package_version


def _host_data() -> dict[str, Any]:
    return host.data.dict() if hasattr(host.data, "dict") else dict(host.data)


def resolve_host(profiles: dict[str, Any] | None = None) -> tuple[DesiredState, PackagePlan]:
    """Run every guard for the current host; DeployError before any change when one fails."""
    name = host.name
    data = _host_data()
    if profiles is None:
        profiles = guards.load_profile_table(data.get("gpuhost_profiles_file"))
    spec = guards.check_profile(name, data, profiles)
    distro: Any = host.get_fact(LinuxDistribution)
    found = oskey.from_distro(distro)
    guards.check_os(name, spec, found)
    problem = install_data_problem(profiles[spec.profile], data)
    if problem:
        raise DeployError(name, problem)
    try:
        plan = package_plan(spec, found)
    except ConfigError as exc:
        raise DeployError(name, str(exc)) from exc
    setting = bundle_setting(data)
    if setting is not None:  # before any operation: a bundle lacking a package is refused here
        offline.check_bundle(name, setting, spec, plan, data, found)
    return spec, plan


def current_driver(plan: PackagePlan) -> tuple[ProfileMarker | None, dict[str, str]]:
    """The host's provision marker (None when absent) and {package: upstream version} of the
    plan's coupled driver packages that are installed. A marker that cannot be read is
    DeployError: provision cannot tell which driver the host was given."""
    text = fact(SmallFile, path=MARKER_PATH)
    try:
        marker = parse_profile_marker("\n".join(text)) if text else None
    except ParseError as exc:
        raise DeployError(host.name, f"{MARKER_PATH}: {exc}") from exc
    packages = fact(DebPackages) if plan.family == "apt" else fact(RpmPackages)
    installed = {}
    for name in plan.coupled:
        versions = sorted(packages.get(name) or [])
        if versions:
            installed[name] = upstream_of_package_version(versions[-1])
    return marker, installed


@deploy("gpuhost provision")
def provision(profiles: dict[str, Any] | None = None, allow_driver_change: bool = False) -> None:
    """SSH hardening and firewall, module signing (Secure Boot), driver, CUDA, cuDNN, container
    toolkit, CDI specs, persistence, clocks, environment, marker (written last: it exists only
    after a complete run).
    With ``gpuhost_bundle`` the bundle is the only apt source from before harden until after
    the marker (deploys/offline.py; on a dnf host the only NVIDIA repository, kept);
    ``gpuhost_proxy`` is apt's proxy (operations/apt_proxy) or dnf's (operations/dnf_proxy).

    ``dpkg_settled`` comes first (it waits for apt/dpkg an interrupted run left behind, then
    finishes what dpkg left half-done), then ``harden()``: its lockout checks run while the deploy
    is prepared, so a host whose deploy user has no authorized key is taken out of the run before
    any of its operations executes, the driver untouched.
    A host that has a driver other than the profile's is refused before any change
    (``guards.check_driver_unchanged``) unless ``allow_driver_change`` (what ``gpuhost
    upgrade`` runs, after its snapshot and drain): other differences (cuDNN, toolkit, clocks,
    profile name) are converged.
    """
    spec, plan = resolve_host(profiles)
    # Secure Boot: key, certificate, enrollment; none for modules Canonical built and signed
    signing = checked_plan(host.name, _host_data()) if plan.precompiled is None else None
    if not allow_driver_change:
        recorded, installed = current_driver(plan)
        guards.check_driver_unchanged(host.name, spec, recorded, installed)
    hardened = guards.check_harden(host.name, _host_data())
    # every package the run installs and locks (holds) offered at its version, before any
    # change; not with a bundle: offline.check_bundle (resolve_host) has matched the bundle's
    # manifest against the same pinned versions, and the bundle is the run's only source
    if plan.family == "dnf" and bundle_setting(_host_data()) is None:
        nvidia_dnf.check_offered(spec, plan)
    elif bundle_setting(_host_data()) is None:
        apt_offered.check_offered(spec, plan, _host_data())
    # before the first package operation (harden installs nftables): apt/dpkg left running (a
    # run stopped by Ctrl-C) is waited for, what it left half-done finished; a host harden
    # refuses is taken out of the run before anything executes
    if plan.family == "dnf":
        dnf_settled(name="Wait for dnf/rpm, clean up what an earlier run left half-done")
        dnf_proxy.configured(name="dnf proxy (gpuhost_proxy)", proxies=proxy_urls(_host_data()))
    else:
        dpkg_settled(name="Wait for apt/dpkg, finish installs an earlier run left half-done")
        apt_proxy.configured(name="apt proxy (gpuhost_proxy)", proxies=proxy_urls(_host_data()))
    bundle = bundle_setting(_host_data())
    if bundle is not None:
        offline.use_bundle(bundle, plan.family, f"{spec.profile}")
    if hardened:
        harden()
    if signing is not None:
        configure_signing(plan=signing)
    install_driver(spec=spec, plan=plan, move_kernel=allow_driver_change)
    if signing is not None:
        verify_signing(plan=signing)
    install_cuda(spec=spec, plan=plan)
    install_cudnn(spec=spec, plan=plan)
    install_container_toolkit(spec=spec, plan=plan)
    refresh_cdi(spec=spec)
    configure_persistence(spec=spec)
    configure_fabric_manager(spec=spec)
    configure_gpu_clocks(spec=spec)
    configure_environment(spec=spec)
    marker.written(name="Provision marker /etc/gpuhost/profile", marker=spec.to_marker())
    if bundle is not None and plan.family == "apt":  # an RPM bundle stays the NVIDIA source
        offline.stop_using_bundle()


def provision_or_stop(allow_driver_change: bool = False) -> None:
    """For on-disk deploys (pyinfra CLI, ``deploys/provision.py``): a guard failure stops this
    host only, with one line; other hosts carry on."""
    try:
        provision(allow_driver_change=allow_driver_change)
    except GpuhostError as exc:  # a guard (DeployError) or bad hardening data (ConfigError)
        print(f"gpuhost: error: {exc}", flush=True)
        host.state.fail_hosts({real_host(host)})
