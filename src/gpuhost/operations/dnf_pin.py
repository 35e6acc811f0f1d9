"""The RHEL family's driver install (dnf/rpm): NVIDIA's repository and key, the module stream,
exact versions, version locks on the whole coupled set, and the check after the install.

Where apt has a preferences file plus holds (``apt_pin``), dnf has the module stream (RHEL 8/9:
``nvidia-driver:<branch>-dkms|-open`` keeps the branch) and versionlock (the exact version, RHEL
8, 9 and 10). Every command is the package-manager seam's (``gpuhost.pkgmgr.DNF``). What the
repository offers is judged before anything is installed: a module stream or an exact version it
lacks is one line naming what it has, nothing installed.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Generator
from io import BytesIO

from pyinfra import host
from pyinfra.api import FileUploadCommand, OperationError, operation
from pyinfra.facts.files import Sha256File

from gpuhost.bundle import rpmrepo
from gpuhost.facts.apt_pins import DnfState, DnfVersionLocks
from gpuhost.facts.dnf import DnfModuleState, DnfModuleStreams, DnfOffered, RpmHas, RpmVersions
from gpuhost.facts.files import SmallFile
from gpuhost.facts.kernel import Kernels
from gpuhost.operations import offline
from gpuhost.operations._facts import fact
from gpuhost.operations._files import put_text
from gpuhost.operations.nvidia_repo import fetch_verified
from gpuhost.parsers.packages import parse_versionlock_entry
from gpuhost.pkgmgr import DNF
from gpuhost.pkgmgr.dnf import split_epoch
from gpuhost.versions import extends_version, upstream_of_package_version

REPO_PATH = "/etc/yum.repos.d/gpuhost-cuda.repo"
KEY_PATH = "/etc/pki/rpm-gpg/RPM-GPG-KEY-gpuhost-cuda"
#: an offline bundle (gpuhost_bundle) as the host's NVIDIA source, in place of REPO_PATH
BUNDLE_REPO_PATH = "/etc/yum.repos.d/gpuhost-bundle.repo"
#: a served bundle's vendor keys, checked on this machine (deploys.offline.served_keys)
BUNDLE_KEYS_DIR = "/etc/pki/rpm-gpg/gpuhost-bundle"


def _executing() -> bool:
    return bool(host.state.is_executing)


def _upstream(version: str | None) -> str | None:
    return upstream_of_package_version(version) if version else None


def render_repo(url: str, key_path: str = KEY_PATH) -> str:
    """The yum repository file for NVIDIA's repository folder ``url`` (signed packages and
    metadata checked against the imported key)."""
    return (
        "# Written by gpuhost: NVIDIA CUDA repository (versions kept by the module stream and\n"
        "# /etc/dnf/plugins/versionlock.list)\n"
        "[gpuhost-cuda]\n"
        "name=NVIDIA CUDA repository (gpuhost)\n"
        f"baseurl={url.rstrip('/')}/\n"
        "enabled=1\n"
        "gpgcheck=1\n"
        f"gpgkey=file://{key_path}\n"
    )


@operation()
def repository(
    url: str, key_src: str, key_sha256: str, proxies: dict[str, str] | None = None
) -> Generator:
    """NVIDIA's repository as a yum repository file, its key verified (SHA-256 from the
    inventory) and imported into rpm's keyring; the metadata read anew only after a change.

    + url: the repository folder (``.../compute/cuda/repos/rhel9/x86_64``)
    + key_src: URL or controller path of the repository's signing key
    + key_sha256: expected SHA-256 of the key file
    + proxies: {"http"|"https": URL} for the key's download
    """
    data = fetch_verified(key_src, key_sha256, proxies)
    changes: list = []
    if fact(Sha256File, path=KEY_PATH) != hashlib.sha256(data).hexdigest():
        changes.append(f"install -d -m 755 {shlex.quote(KEY_PATH.rsplit('/', 1)[0])}")
        changes.append(FileUploadCommand(BytesIO(data), KEY_PATH))
        changes.append(f"chmod 644 {KEY_PATH}")
        changes.append(DNF.import_key(KEY_PATH))
    changes += list(put_text(REPO_PATH, render_repo(url)))
    if fact(SmallFile, path=BUNDLE_REPO_PATH) is not None:  # one NVIDIA source
        changes.append(f"rm -f {BUNDLE_REPO_PATH}")
    if not changes:
        host.noop("CUDA repository and key in place")
        return
    yield from changes
    yield DNF.refresh()


@operation()
def bundle_repository(src: str, files: dict[str, str], label: str) -> Generator:
    """An offline bundle (an RPM repository, ``bundle.rpmrepo``) as the host's only NVIDIA
    source: the folder ``src`` copied under ``offline.REPO_DIR`` (only files whose SHA-256
    differs), its repository file (``gpgcheck=1`` against the vendor keys it carries), NVIDIA's
    online repository file removed; the metadata read anew after a change. The repository stays
    after the run, as the online one does: a re-run changes nothing.

    + src: the bundle folder on this machine
    + files: {relative path: sha256} of its files (checked against its manifest)
    + label: what the repository file's name says (profile and OS)
    """
    changes = list(offline.copy_commands(src, files))
    keys = [f"file://{offline.REPO_DIR}/{name}" for name in sorted(files)
            if name.startswith(f"{rpmrepo.KEYS}/")]
    text = rpmrepo.repo_file(f"gpuhost offline bundle: {label}", f"file://{offline.REPO_DIR}",
                             keys)
    yield from _bundle_as_only_source(
        changes, text, f"the bundle is the NVIDIA source ({len(files)} files in place)")


@operation()
def served_bundle_repository(url: str, keys: dict[str, bytes], label: str) -> Generator:
    """An offline bundle served over HTTP(S) (an RPM repository) as the host's only NVIDIA
    source: its vendor keys (already checked against its manifest, whose SHA-256 the inventory
    gives) under ``BUNDLE_KEYS_DIR``, its repository file with ``baseurl`` the URL, reached
    directly (not through dnf.conf's proxy), ``gpgcheck=1`` against those keys; NVIDIA's online
    repository file removed; the metadata read anew after a change. Kept after the run.

    + url: the served bundle folder
    + keys: {file name: bytes} of its vendor keys
    + label: what the repository file's name says (profile and OS)
    """
    changes: list = []
    for name, data in sorted(keys.items()):
        path = f"{BUNDLE_KEYS_DIR}/{name}"
        if fact(Sha256File, path=path) != hashlib.sha256(data).hexdigest():
            changes += [f"install -d -m 755 {BUNDLE_KEYS_DIR}",
                        FileUploadCommand(BytesIO(data), path), f"chmod 644 {shlex.quote(path)}"]
    gpgkeys = [f"file://{BUNDLE_KEYS_DIR}/{name}" for name in sorted(keys)]
    text = rpmrepo.repo_file(f"gpuhost offline bundle: {label}", url, gpgkeys, direct=True)
    yield from _bundle_as_only_source(
        changes, text, f"the bundle at {url} is the NVIDIA source ({len(keys)} keys in place)")


def _bundle_as_only_source(changes: list, text: str, in_place: str) -> Generator:
    """The rest of making a bundle the host's only NVIDIA repository, after ``changes`` put
    its files or keys in place: its repository file ``text``, NVIDIA's online one removed, the
    metadata read anew after any change (``in_place``: the noop's reason when none)."""
    changes = [*changes, *put_text(BUNDLE_REPO_PATH, text)]
    if fact(SmallFile, path=REPO_PATH) is not None:
        changes.append(f"rm -f {REPO_PATH}")
    if not changes:
        host.noop(in_place)
        return
    yield from changes
    yield DNF.refresh()


@operation()
def kernel_devel() -> Generator:
    """``kernel-devel`` of the running kernel (DKMS builds the module against it)."""
    running = fact(Kernels).running
    wanted = f"kernel-devel-{running}"
    if not running or running in fact(Kernels).headers or fact(RpmHas, spec=wanted):
        host.noop(f"kernel-devel for {running or 'the running kernel'} present")
        return
    yield DNF.install([wanted])


@operation()
def dkms_offered(package: str, crb: str = "", epel_release: str = "") -> Generator:
    """DKMS (``package``, from EPEL) installed or offered before the driver is installed: the
    kernel module packages need it. Where the OS ships EPEL's release package (Rocky, Alma:
    ``epel_release``) it is installed and ``crb`` enabled; elsewhere (RHEL: EPEL's URL and
    subscription-manager) the host fails with one line naming them, nothing installed.

    + package: the package DKMS comes from (``dkms``)
    + crb: the repository EPEL's packages need besides EPEL
    + epel_release: the OS's package that enables EPEL ("" where the OS has none)
    """
    if not package or package in fact(RpmVersions, packages=[package]):
        host.noop(f"{package or 'dkms'} installed")
        return
    offered = fact(DnfOffered, packages=[package])
    if package in offered:
        host.noop(f"{package} offered by the enabled repositories")
        return
    if epel_release:
        if epel_release not in fact(RpmVersions, packages=[epel_release]):
            yield DNF.install([epel_release])
        if crb:
            yield DNF.enable_repo(crb)
        yield DNF.refresh()
        return
    if not _executing():
        host.noop(f"{package}: checked once the repositories are set")
        return
    extra = f" and {crb}" if crb else ""
    raise OperationError(
        f"{package} is neither installed nor offered by any enabled repository; NVIDIA's "
        f"kernel module packages need it: enable EPEL{extra} (e.g. {DNF.epel_hint(crb)}); "
        "nothing was installed"
    )


@operation()
def dnf_settled(timeout_s: int = 600) -> Generator:
    """Before any package is installed on a dnf host: wait (up to ``timeout_s``) for dnf/rpm
    processes still running (dnf-automatic, a run stopped by Ctrl-C), then remove the duplicated
    packages a transaction cut off midway leaves (``dnf remove --duplicates``). Nothing running
    and nothing duplicated: no change.

    + timeout_s: seconds to wait for running dnf/rpm processes
    """
    state = fact(DnfState)
    if state["running"]:
        yield DNF.settle_command(timeout_s)
        return
    if not state["unfinished"]:
        host.noop("no dnf/rpm running, no duplicated package")
        return
    yield DNF.finish_command()


def stream_problem(current: dict[str, str], stream: str, offered: list[str],
                   switch: bool, module: str) -> str | None:
    """Why enabling ``module:stream`` must not happen (pure): an undecided flavour, a stream
    the repositories lack (``offered`` known), or another enabled stream (another kernel module
    flavour or branch) where no switch was asked for."""
    if not stream:
        return (
            f"module {module}: the kernel module flavour is undecided (profile kernel_module "
            "auto without the host's GPUs); set kernel_module open or proprietary"
        )
    if offered and stream not in offered:
        return (
            f"module stream {module}:{stream} is not offered by the enabled repositories "
            f"(offered: {', '.join(offered)}); nothing was installed"
        )
    enabled = current.get("stream") if current.get("state") == "enabled" else None
    if enabled and enabled != stream and not switch:
        return (
            f"module {module}: the host has stream {enabled} enabled, the profile needs "
            f"{stream} (another kernel module flavour or branch); gpuhost never switches it "
            "silently: run gpuhost upgrade --to this profile, which switches streams"
        )
    return None


@operation()
def module_stream(module: str, stream: str, switch: bool = False) -> Generator:
    """The module's stream enabled (RHEL 8/9); another enabled stream is reset first only
    with ``switch`` (the upgrade), else the host fails with one line.

    + module: the module (``nvidia-driver``)
    + stream: the profile's stream (``580-open``, ``580-dkms``)
    + switch: reset and enable when another stream is enabled
    """
    current = fact(DnfModuleState, module=module)
    if current.get("stream") == stream and current.get("state") == "enabled" and stream:
        host.noop(f"module {module}:{stream} enabled")
        return
    offered = fact(DnfModuleStreams, module=module)
    problem = stream_problem(current, stream, offered, switch, module)
    if problem is None and not offered and _executing():
        problem = stream_problem(current, stream, ["(none)"], switch, module)
    if problem:
        raise OperationError(problem)
    if current.get("state") in ("enabled", "disabled") or current.get("stream"):
        yield DNF.module_reset(module)
    yield DNF.module_enable(module, stream)


def install_spec(name: str, version: str, epoch: str | None) -> str:
    """The install argument: ``name-[epoch:]version`` (a version ending ``.*`` is a glob)."""
    return DNF.exact(name, f"{epoch}:{version}" if epoch else version)


@operation()
def installed(
    packages: list[str], version: str, pin: str | None = None, epoch: str | None = None,
    replace: list[str] | None = None,
) -> Generator:
    """Every package of ``packages`` installed at ``version`` (their upstream version extends
    it); what is not is installed in one ``dnf install`` with the locks off for it. Before
    that, in the execute stage, every one of them must be offered at that version: a version
    the repositories lack (or the module stream filters out) is one line, nothing installed.

    + packages: package names
    + version: the upstream version they must have (``580.178.04``, ``13.0``)
    + pin: the version text installed (``13.0.*``); default ``version``
    + epoch: the packages' epoch (NVIDIA's driver: 3)
    + replace: installed packages the install may remove (the other kernel module flavour,
      on a flavour switch)
    """
    have = fact(RpmVersions, packages=sorted(set(packages) | set(replace or [])))
    wanted = [n for n in packages if not (have.get(n) and
                                          extends_version(_upstream(have[n]) or "", version))]
    if not wanted:
        host.noop(f"{len(packages)} packages at {version}")
        return
    if _executing():
        offered = fact(DnfOffered, packages=sorted(wanted))
        lacking = [
            f"{n} (offered: {', '.join(offered.get(n, [])) or 'none'})"
            for n in wanted
            if not any(extends_version(_upstream(v) or "", version) for v in offered.get(n, []))
        ]
        if lacking:
            raise OperationError(
                f"version {version} is not offered by the enabled repositories (module stream "
                f"filtering included) for {'; '.join(lacking)}; nothing was installed"
            )
    erasing = any(n in have for n in replace or [])
    yield DNF.install([install_spec(n, pin or version, epoch) for n in wanted],
                      change_held=True, erasing=erasing)


def lock_lines(packages: list[str], pin: str, epoch: str | None,
               companions: dict[str, str]) -> list[str]:
    """The lock lines of a package set (pure): ``packages`` at ``pin``, each companion at its
    installed ``[epoch:]version-release``."""
    lines = [DNF.lock_pattern(n, pin, epoch) for n in packages]
    lines += [f"{n}-{v}.*" for n, v in sorted(companions.items())]
    return lines


def wanted_locks(packages: list[str], coupled: list[str], pin: str, epoch: str | None,
                 installed: dict[str, str], executing: bool) -> list[str]:
    """The lock lines at ``pin`` (pure): one for each name of ``packages`` and each installed
    name of ``coupled``, with the epoch of the installed package: a line whose epoch is not the
    package's matches no version of it, and the versionlock plugin then excludes every version
    of that name, the pinned one too (dnf 4.14, versionlock 4.3.1 in an installroot: such a
    line keeps ``dnf upgrade`` at "Nothing to do" but no version is installable). A name not
    installed gets no line once the run executes (dnf's own ``versionlock add`` writes none for
    a name the repositories lack); while the run is prepared its line at ``epoch`` stands for
    the one the install will allow."""
    lines = []
    for name in dict.fromkeys(packages + [n for n in coupled if n in installed]):
        if name in installed:
            lines.append(DNF.lock_pattern(name, pin, split_epoch(installed[name])[0]))
        elif not executing:
            lines.append(DNF.lock_pattern(name, pin, epoch))
    return lines


@operation()
def locked(packages: list[str], pin: str, epoch: str | None = None,
           companions: list[str] | None = None, coupled: list[str] | None = None) -> Generator:
    """dnf's lock file holds exactly one line for each installed name of the set: ``packages``
    and the names of ``coupled`` the host has at ``pin`` (``name-[epoch:]pin-*``, the epoch the
    installed package has), each installed companion at its installed version; no line for a
    name that is not installed (before the run, provision's guard ``nvidia_dnf.check_offered``
    refuses a package the repositories do not offer at ``pin``). A line for one of these names
    that is not wanted (another version, a package no longer installed) is dropped first; other
    lines are kept. Idempotent: a re-run finds the lines and writes nothing.

    + packages: the names the run installed, locked at ``pin``
    + pin: the version (``580.178.04``, ``13.0.*``)
    + epoch: their epoch (for a package the run is still to install)
    + companions: names locked at the version installed now
    + coupled: every name of the driver's set, locked at ``pin`` where installed (a partial
      lock makes every ``dnf upgrade`` fail under RHEL's best=True)
    """
    every = sorted(set(packages) | set(coupled or []) | set(companions or []))
    # only these names' versions (rpm lists every package when asked for none)
    installed = {n: v for n, v in fact(RpmVersions, packages=every).items() if n in every}
    companion_versions = {n: v for n, v in installed.items() if n in (companions or [])}
    wanted = wanted_locks(packages, coupled or [], pin, epoch,
                          {n: v for n, v in installed.items() if n not in companion_versions},
                          _executing())
    wanted += lock_lines([], pin, epoch, companion_versions)
    current = fact(DnfVersionLocks)
    stale = sorted({
        parse_versionlock_entry(line)[0] for line in current
        if parse_versionlock_entry(line)[0] in every and line not in wanted
    })
    missing = [line for line in wanted if line not in current]
    if not stale and not missing:
        host.noop(f"{len(wanted)} packages version-locked")
        return
    if stale:
        yield DNF.unhold(stale)
        missing = [line for line in wanted if line not in current or
                   parse_versionlock_entry(line)[0] in stale]
    if missing:
        yield DNF.hold(missing)


@operation()
def verified(packages: list[str], version: str, flavour: list[str],
             other_flavours: list[str]) -> Generator:
    """Fail the host unless every installed package of ``packages`` is at ``version``, the
    profile's kernel module package (``flavour``) is installed and the other flavour's is not:
    the last word on the install (judged in the execute stage only).

    + packages: the coupled names
    + version: the driver version
    + flavour: the kernel module package of the profile's flavour
    + other_flavours: the other flavour's package(s)
    """
    if not _executing():
        host.noop(f"coupled packages are checked at {version} after the install")
        return
    have = fact(RpmVersions, packages=sorted(set(packages) | set(flavour) | set(other_flavours)))
    wrong = sorted(f"{n} {have[n]}" for n in packages
                   if n in have and _upstream(have[n]) != version)
    if wrong:
        raise OperationError(
            f"packages not at the pinned version {version}: {', '.join(wrong)}; check "
            f"{REPO_PATH}, the module stream and /etc/dnf/plugins/versionlock.list"
        )
    absent = [n for n in flavour if n not in have]
    other = [n for n in other_flavours if n in have]
    if absent or other:
        found = f"; {', '.join(other)} (the other flavour) installed" if other else ""
        raise OperationError(
            f"kernel module flavour: {', '.join(flavour)} expected, "
            f"{', '.join(absent) + ' not installed' if absent else 'installed'}{found}"
        )
    host.noop(f"{sum(1 for n in packages if n in have)} coupled packages at {version}, "
              f"kernel module {', '.join(flavour)}")
    return
    yield  # pragma: no cover - makes this a generator
