"""Pin a coupled package set to one exact version and hold it (apt); versionlock it (dnf).

Three layers keep a driver where the profile put it:

1. an apt preferences file: priority 1001 for the profile's exact version of every coupled package
   (so apt installs it, and moves back to it, even when a newer one is offered), priority -1 for
   every other version of those packages and for every version of the blocked packages (so no
   dependency can pull a different driver or a "newest driver" metapackage in);
2. ``apt-mark hold`` on the installed packages (so ``apt-get upgrade`` keeps them back even if
   someone deletes the preferences file);
3. on RPM hosts, ``dnf versionlock``.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping

from pyinfra import host
from pyinfra.api import OperationError, operation
from pyinfra.facts.deb import DebPackages

from gpuhost.facts.apt_pins import (
    PACKAGE_TOOLS,
    SPACE_PATHS,
    AptHolds,
    AptInstallSpace,
    AptPolicy,
    DnfVersionLocks,
    DpkgState,
)
from gpuhost.operations._facts import fact
from gpuhost.operations._files import put_text
from gpuhost.parsers.packages import parse_versionlock_entry
from gpuhost.pkgmgr import APT, DNF
from gpuhost.versions import extends_version, upstream_of_package_version

PREFERENCES_PATH = "/etc/apt/preferences.d/gpuhost-nvidia"
SUPERSEDED = (
    "the archive serves only the newest version of a package in each pocket, so a superseded "
    "one cannot come from it: keep it with an offline bundle made while it was served, "
    "gpuhost bundle, docs/offline.md; check the sources and "
)


def version_glob(upstream_version: str) -> str:
    """The apt pin pattern matching every package revision of an upstream version.

    ``535.261.03`` → ``535.261.03-*`` (matches ``535.261.03-1`` and ``535.261.03-0ubuntu1``, never
    ``535.261.031-1``). A key that is already a release pattern (``9.5.1.*``, from
    ``spec.cudnn_pin``) is kept: apt matches a trailing ``*`` as a prefix (``9.5.1.17-1``, never
    ``9.5.10.1-1``) but not a ``*`` inside the version (``9.5.1.*-*`` matches nothing; checked
    with apt 2.6 on a lab host).
    """
    if upstream_version.endswith(".*"):
        return upstream_version
    return f"{upstream_version}-*"


def render_preferences(
    pins: dict[str, list[str]],
    blocked: Iterable[str] = (),
    blocked_patterns: Iterable[str] = (),
    label: str = "",
    exact: Mapping[str, str] | None = None,
) -> str:
    """The preferences file text for ``pins`` ({upstream version: [package, ...]}) and ``exact``
    ({package: exact Debian version}: companions, each pinned to that one version).

    apt uses the first record matching a package version, so each group's 1001 record comes before
    the -1 record for the same names."""
    lines = [
        f"# Written by gpuhost{' for profile ' + label if label else ''}; do not edit by hand:",
        "# the next `gpuhost provision` rewrites it. Remove it only together with the holds.",
    ]
    for version in sorted(pins):
        names = " ".join(sorted(set(pins[version])))
        if not names:
            continue
        lines += ["", f"Package: {names}", f"Pin: version {version_glob(version)}"]
        lines += ["Pin-Priority: 1001", "", f"Package: {names}", "Pin: version *"]
        lines += ["Pin-Priority: -1"]
    for name, version in sorted((exact or {}).items()):
        lines += ["", f"Package: {name}", f"Pin: version {version}", "Pin-Priority: 1001"]
        lines += ["", f"Package: {name}", "Pin: version *", "Pin-Priority: -1"]
    never = sorted(set(blocked))
    if never:
        lines += ["", f"Package: {' '.join(never)}", "Pin: version *", "Pin-Priority: -1"]
    for pattern in blocked_patterns:
        lines += ["", f"Package: {pattern}", "Pin: version *", "Pin-Priority: -1"]
    return "\n".join(lines) + "\n"


@operation()
def preferences(
    pins: dict[str, list[str]],
    blocked: list[str] | None = None,
    blocked_patterns: list[str] | None = None,
    label: str = "",
    path: str = PREFERENCES_PATH,
    exact: dict[str, str] | None = None,
) -> Generator:
    """Write the apt preferences file pinning each package group to its exact version.

    + pins: {upstream version: [package names]}; that version gets priority 1001, every other
      version of those packages -1 (any Debian revision of the version matches)
    + blocked: package names never installed, whatever version (priority -1)
    + blocked_patterns: apt name patterns (``/^cuda-drivers-[0-9]+$/``) blocked after the pins
    + label: profile name written into the file's header
    + path: the preferences file
    + exact: {package: exact Debian version}: that version only (priority 1001, others -1)

    **Example:**

    .. code:: python

        apt_pin.preferences(
            name="Pin the NVIDIA driver",
            pins={"535.261.03": ["nvidia-driver", "nvidia-smi", "libnvidia-ml1"]},
        )
    """
    content = render_preferences(
        pins, blocked or [], blocked_patterns or [], label=label, exact=exact
    )
    commands = list(put_text(path, content))
    if not commands:
        host.noop(f"{path} up to date")
    yield from commands


@operation()
def held(packages: list[str]) -> Generator:
    """``apt-mark hold`` every installed package of ``packages`` that is not held yet.

    Packages that are not installed are left alone (a hold on an absent package would make a later
    install of another version fail in confusing ways).

    + packages: names to hold when installed

    **Example:**

    .. code:: python

        apt_pin.held(name="Hold the driver", packages=["nvidia-driver", "nvidia-smi"])
    """
    installed = fact(DebPackages)
    held_now: list[str] = fact(AptHolds)
    holds = set(held_now)
    missing = sorted(p for p in set(packages) if p in installed and p not in holds)
    if not missing:
        host.noop("NVIDIA packages already held")
        return
    yield APT.hold(missing)


@operation()
def versionlocked(packages: list[str], version: str) -> Generator:
    """A versionlock line ``name-version-*`` for each package not locked yet (RPM hosts; the
    lock file written as ``dnf versionlock add --raw`` would, ``gpuhost.pkgmgr.dnf``).

    + packages: package names
    + version: upstream version every package is locked at

    **Example:**

    .. code:: python

        apt_pin.versionlocked(packages=["nvidia-driver"], version="550.54.15")
    """
    locked = {parse_versionlock_entry(lock) for lock in host.get_fact(DnfVersionLocks)}
    missing = [name for name in sorted(set(packages)) if (name, version) not in locked]
    if not missing:
        host.noop("NVIDIA packages already version-locked")
        return
    yield DNF.hold([DNF.lock_pattern(name, version) for name in missing])


@operation()
def lock_lines(lines: list[str]) -> Generator:
    """dnf's versionlock file holds each of ``lines`` (lock lines as a snapshot recorded them;
    lines already there are left as they are).

    + lines: lock lines (``name-[epoch:]version-release.*``)
    """
    have = set(fact(DnfVersionLocks))
    missing = [line for line in lines if line.strip() and line.strip() not in have]
    if not missing:
        host.noop("every lock line present")
        return
    yield DNF.hold(missing)


def _executing() -> bool:
    """True in pyinfra's execute stage. In the prepare stage (and ``--dry``) an operation sees
    the host as it was before the run, not as the operations before it will leave it."""
    return bool(host.state.is_executing)


PACKAGE_TOOLS_WAIT_S = 600  # then the host fails, naming what still runs
CONFIGURE_PENDING = APT.finish_command()


def wait_for_package_tools(
    timeout_s: int = PACKAGE_TOOLS_WAIT_S, poll_s: int = 2, tools: str = PACKAGE_TOOLS
) -> str:
    """Shell that returns once no apt/dpkg process runs on the host (``PACKAGE_TOOLS``), so the
    next apt command finds dpkg's lock free; after ``timeout_s`` it fails with one line on
    stderr naming what still runs (``pgrep -a``: PID and command line). Used by provision
    (``dpkg_settled``) and by the upgrade's install and rollback steps. ``tools``: the
    ``pgrep -x`` pattern (tests use a name of their own)."""
    return APT.wait_command(timeout_s, poll_s, tools)


def settle_command(timeout_s: int = PACKAGE_TOOLS_WAIT_S) -> str:
    """Wait for apt/dpkg left running, then finish what dpkg left half-done, if anything."""
    return APT.settle_command(timeout_s)


@operation()
def dpkg_settled(timeout_s: int = PACKAGE_TOOLS_WAIT_S) -> Generator:
    """Before any package is installed: wait (up to ``timeout_s``) for apt/dpkg processes still
    running on the host (a run stopped by Ctrl-C leaves its apt-get behind; apt's daily timer),
    then finish what an interrupted or failed package run left half-done (``dpkg --audit`` lists
    packages unpacked but not configured, half-installed, awaiting triggers) with ``dpkg
    --configure -a``. It fails the host when apt/dpkg still runs after ``timeout_s`` (naming the
    process) or when dpkg cannot finish them (e.g. a DKMS build that fails again), with dpkg's
    own message. Nothing to wait for and nothing unfinished: no change.

    + timeout_s: seconds to wait for running apt/dpkg processes

    **Example:**

    .. code:: python

        apt_pin.dpkg_settled(name="Finish interrupted package installs")
    """
    state = fact(DpkgState)  # one command: what runs and what dpkg left unfinished
    if state["running"]:
        # what dpkg --audit says now may change when they finish: judged after the wait
        yield settle_command(timeout_s)
        return
    if not state["unfinished"]:
        host.noop("no apt/dpkg running, dpkg has no half-installed package")
        return
    yield CONFIGURE_PENDING


SPACE_MARGIN_BYTES = 256 * 1000**2  # dpkg's temporary files, DKMS builds, logs


def space_problem(space: dict[str, object]) -> str | None:
    """Why the install cannot fit, before it starts (pure): the download lands in apt's archive
    folder, the unpacked packages under /usr; where both are one filesystem they add up. Each
    filesystem needs that plus a margin free. None when it fits or apt said nothing."""
    download, added = int(str(space.get("download", 0))), int(str(space.get("added", 0)))
    free = space.get("free")
    if not isinstance(free, dict) or (download <= 0 and added <= 0):
        return None
    need: dict[str, int] = {}
    avail: dict[str, int] = {}
    for path, amount in zip(SPACE_PATHS, (download, max(added, 0)), strict=True):
        if path not in free:
            continue
        available, mount = free[path]
        need[mount] = need.get(mount, 0) + amount
        avail[mount] = int(available)
    short = [
        f"{mount}: needs {_gb(amount + SPACE_MARGIN_BYTES)}, {_gb(avail[mount])} free"
        for mount, amount in need.items()
        if amount > 0 and amount + SPACE_MARGIN_BYTES > avail[mount]
    ]
    if not short:
        return None
    return (
        f"not enough disk space for this install (download {_gb(download)} into "
        f"/var/cache/apt/archives, {_gb(max(added, 0))} unpacked): {'; '.join(short)}; nothing "
        f"was installed; free space (e.g. {APT.clean()}, gpuhost snapshot prune) and run again"
    )


def _gb(size: int) -> str:
    return f"{size / 1000**3:.1f} GB"


def _upstream(package_version: str | None) -> str | None:
    return upstream_of_package_version(package_version) if package_version else None


def hold_kept(held: list[str], install: str) -> str:
    """``install`` run with ``held`` released for it and held again afterwards, whether it
    succeeded or not (its exit status is the command's): a held package moves to the version the
    profile names only in this command, and never stays unheld after a failed install."""
    return APT.hold_kept(held, install)


@operation()
def installed(
    packages: list[str],
    version: str | None = None,
    no_recommends: bool = True,
    exact: dict[str, str] | None = None,
    newest_only: bool = False,
) -> Generator:
    """Install ``packages`` at the version apt's pins select; with ``version`` given, name the
    exact candidate (``pkg=535.261.03-1``) once the pins make it the candidate. A package held at
    another version (a profile moving cuDNN or the container toolkit) is released for this install
    and held again right after it (``hold_kept``).

    + packages: package names
    + version: upstream version the packages must have (None: any, e.g. companions)
    + no_recommends: pass ``--no-install-recommends``
    + exact: {package: exact Debian version} installed in the same command (companions the
      driver pulls in); the host fails, naming the version, when apt cannot get it
    + newest_only: the source keeps only the newest version of a package per pocket (Ubuntu's
      archive): a version it no longer offers is named with the offline bundle as the way to
      keep it

    **Example:**

    .. code:: python

        apt_pin.installed(packages=["nvidia-driver", "nvidia-smi"], version="535.261.03")
    """
    exact = exact or {}
    policy = fact(AptPolicy, packages=sorted(set(packages) | set(exact)))
    wanted = []
    moving = []
    unavailable = []
    for name in packages:
        info = policy.get(name, {"installed": None, "candidate": None})
        have = _upstream(info["installed"])
        if have is not None and (version is None or extends_version(have, version)):
            continue
        if have is not None:
            moving.append(name)
        candidate = info["candidate"]
        if version is not None and candidate and extends_version(_upstream(candidate), version):
            wanted.append(APT.exact(name, candidate))
        elif version is not None and _executing():
            # the pins are written by now: apt cannot get this version from any source
            unavailable.append(f"{name} (candidate {candidate or 'none'})")
        else:
            wanted.append(name)
    if unavailable:
        raise OperationError(
            f"version {version} is not offered by the configured repositories for "
            f"{', '.join(unavailable)}; nothing was installed for them ("
            + (SUPERSEDED if newest_only else "check the sources and ")
            + f"{PREFERENCES_PATH}, or pick a profile whose version is available)"
        )
    missing = _exact_wanted(exact, policy, wanted, moving)
    if missing:
        raise OperationError(
            f"the profile's exact versions are not offered by the configured repositories: "
            f"{', '.join(missing)}; nothing was installed (add the source that carries them, "
            "or a profile whose companions field names versions these sources offer)"
        )
    if not wanted:
        host.noop(
            f"{len(packages) + len(exact)} packages installed"
            f"{' at ' + version if version else ''}"
        )
        return
    problem = space_problem(fact(AptInstallSpace, packages=wanted))
    if problem:
        raise OperationError(problem)
    install = APT.install(
        wanted, recommends=not no_recommends, downgrades=version is not None or bool(exact)
    )
    held_now = set(fact(AptHolds)) if moving else set()
    held = sorted(name for name in moving if name in held_now)
    yield hold_kept(held, install) if held else install


def _exact_wanted(
    exact: Mapping[str, str],
    policy: Mapping[str, Mapping[str, str | None]],
    wanted: list[str],
    moving: list[str],
) -> list[str]:
    """Adds ``name=version`` to ``wanted`` for each package of ``exact`` not installed at its
    version (and to ``moving`` when installed at another); returns "name version (candidate
    X)" for those apt cannot get (judged in the execute stage, when the pins are written)."""
    missing = []
    for name, want in sorted(exact.items()):
        info = policy.get(name, {"installed": None, "candidate": None})
        if info["installed"] == want:
            continue
        if info["installed"] is not None:
            moving.append(name)
        if info["candidate"] == want or not _executing():
            wanted.append(APT.exact(name, want))
        else:
            missing.append(f"{name} {want} (candidate {info['candidate'] or 'none'})")
    return missing


def exact_problems(exact: Mapping[str, str], installed: Mapping[str, str | None]) -> list[str]:
    """Pure: "name version (expected X)" for each installed package of ``exact`` at another
    version than the one it must have."""
    return [
        f"{name} {installed[name]} (expected {want})"
        for name, want in sorted(exact.items())
        if installed.get(name) and installed[name] != want
    ]


@operation()
def verified(packages: list[str], version: str, exact: dict[str, str] | None = None) -> Generator:
    """Fail the host unless every installed package of ``packages`` is at ``version``.

    Runs after installation as the last word on pinning: a coupled package at another version
    means the pin did not take (wrong repository, a manual install) and the host must not be
    reported as provisioned. It judges in the execute stage only: while a run is prepared (and
    in ``--dry``) the packages are as they were before the install that repairs them.

    + packages: the coupled package names
    + version: upstream version they must have
    + exact: {package: exact Debian version} each installed one must have (companions)
    """
    if not _executing():
        host.noop(f"coupled packages are checked at {version} after the install")
        return
    exact = exact or {}
    policy = fact(AptPolicy, packages=sorted(set(packages) | set(exact)))
    off = exact_problems(exact, {name: info["installed"] for name, info in policy.items()})
    if off:
        raise OperationError(
            f"packages not at the profile's exact version: {', '.join(off)}; "
            f"check {PREFERENCES_PATH} and the configured repositories"
        )
    policy = {name: info for name, info in policy.items() if name not in exact}
    wrong = sorted(
        f"{name} {info['installed']}"
        for name, info in policy.items()
        if info["installed"] and _upstream(info["installed"]) != version
    )
    if wrong:
        raise OperationError(
            f"packages not at the pinned version {version}: {', '.join(wrong)}; "
            f"check {PREFERENCES_PATH} and the configured repositories"
        )
    count = sum(1 for info in policy.values() if info["installed"])
    host.noop(f"{count} coupled packages at {version}")
    return
    yield  # pragma: no cover - makes this a generator
