"""Is a host where it should be? The upgrade's validation until the check suite (issue 7) exists.

Checks, all from facts gpuhost reads anyway:

- every installed driver-coupled package (``gpuhost.audit.coupled``, from the package data) is
  at the expected version (a target profile: its
  upstream driver version; a snapshot: exactly the recorded versions) and nothing else;
- every installed coupled package that should be held is held;
- for a target profile: the provision marker on the host records exactly the target's desired
  state (``DesiredState.to_marker()`` for that host), so a target with the same driver but other
  settings (clocks, CUDA, toolkit, ...) is not "current" until provision has applied it;
- site validation hooks: executables in ``/etc/gpuhost/validate.d/`` on the host, run with
  ``GPUHOST_PROFILE`` and ``GPUHOST_DRIVER_VERSION`` set; any non-zero exit is a failure, its
  output the reason. (Hook for issue 7: the static and functional checks plug in here.)
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpuhost.audit.coupled import is_coupled
from gpuhost.desired import DesiredState
from gpuhost.errors import ParseError
from gpuhost.parsers.profile_marker import MARKER_PATH, parse_profile_marker
from gpuhost.upgrade.host_state import HostState, file_bytes
from gpuhost.upgrade.remote import Remote
from gpuhost.versions import upstream_of_package_version

HOOKS_DIR = "/etc/gpuhost/validate.d"


@dataclass
class Expectation:
    label: str
    driver_version: str | None = None  # upstream version all driver packages must have
    exact: dict[str, str] = field(default_factory=dict)  # package -> exact Debian version
    holds: list[str] = field(default_factory=list)  # must be held (when installed)
    profile: str | None = None
    # the provision marker the host must carry (the target's DesiredState.to_marker() for this
    # host); None: the marker is not judged (a snapshot restores its own file)
    marker: dict[str, Any] | None = None

    @classmethod
    def of_desired(cls, desired: DesiredState) -> Expectation:
        """What a host provisioned with ``desired`` shows: its coupled packages at the desired
        driver version and held, and a marker recording exactly ``desired``."""
        return cls(
            desired.profile,
            desired.driver_version,
            profile=desired.profile,
            marker=desired.to_marker(),
        )


def expectation_from_snapshot(doc: Mapping[str, Any]) -> Expectation:
    versions = {n: str(r["version"]) for n, r in doc["packages"].items()}
    return Expectation(
        label=f"snapshot {doc['id']}",
        exact=versions,
        holds=[str(h) for h in doc.get("holds", [])],
        profile=doc.get("profile"),
        driver_version=None,
    )


def package_problems(expect: Expectation, state: HostState) -> list[str]:
    """Pure: what differs between the host's packages/holds and the expectation."""
    problems = []
    installed = {n: r["version"] for n, r in state.packages.items()}
    if expect.driver_version is not None:
        present = sorted(p for p in installed if is_coupled(p))
        if not present:
            problems.append("no NVIDIA driver package installed")
        for name in present:
            have = upstream_of_package_version(installed[name])
            if have != expect.driver_version:
                problems.append(f"{name} is {installed[name]}, expected {expect.driver_version}")
        unheld = [p for p in present if p not in state.held_names]
        if unheld:
            problems.append(f"not held: {', '.join(unheld)}")
    for name, version in sorted(expect.exact.items()):
        if installed.get(name) != version:
            problems.append(f"{name} is {installed.get(name, 'not installed')}, expected {version}")
    for name in sorted(set(installed) - set(expect.exact)) if expect.exact else []:
        problems.append(f"{name} {installed[name]} is installed, the snapshot did not have it")
    missing_holds = [h for h in expect.holds if h in installed and h not in state.held_names]
    if missing_holds:
        problems.append(f"not held: {', '.join(missing_holds)}")
    if expect.marker is not None:
        problems += marker_problems(expect.marker, state)
    return problems


def marker_problems(wanted: Mapping[str, Any], state: HostState) -> list[str]:
    """Pure: how the host's provision marker differs from ``wanted`` (a ``to_marker()`` dict);
    one problem naming the differing fields, or why the marker cannot be compared."""
    record = state.files.get(MARKER_PATH)
    if record is None:
        return [f"{MARKER_PATH} is missing, expected profile {wanted.get('profile')}"]
    try:
        parsed = parse_profile_marker(file_bytes(record).decode("utf-8", "replace"))
    except ParseError as exc:
        return [f"{MARKER_PATH}: {exc}"]
    recorded = DesiredState.from_marker(parsed) if parsed is not None else None
    if recorded is None:
        name = parsed.profile if parsed is not None else "nothing"
        want = wanted.get("profile")
        return [f"{MARKER_PATH} names {name} without versions, expected profile {want}"]
    have = _flat(recorded.to_marker())
    want = _flat(wanted)
    differ = [
        f"{key} {have.get(key)!r} (expected {want.get(key)!r})"
        for key in sorted(set(have) | set(want))
        if have.get(key) != want.get(key)
    ]
    if not differ:
        return []
    return [f"{MARKER_PATH} differs from profile {wanted.get('profile')}: " + ", ".join(differ)]


def _flat(doc: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"clocks.mode": "off", ...} of a nested marker dict (pure)."""
    flat: dict[str, Any] = {}
    for key, value in doc.items():
        if isinstance(value, Mapping):
            flat.update(_flat(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = list(value) if isinstance(value, (list, tuple)) else value
    return flat


def hook_command(expect: Expectation) -> str:
    env = (
        f"GPUHOST_PROFILE={shlex.quote(expect.profile or '')} "
        f"GPUHOST_DRIVER_VERSION={shlex.quote(expect.driver_version or '')}"
    )
    return (
        f"[ -d {HOOKS_DIR} ] || exit 0; rc=0; for h in {HOOKS_DIR}/*; do "
        '[ -x "$h" ] && [ -f "$h" ] || continue; '
        f'out=$({env} "$h" 2>&1) || '
        '{ rc=1; echo "$(basename "$h"): $(echo "$out" | tail -n1)"; }; '
        "done; exit $rc"
    )


def validate_host(remote: Remote, expect: Expectation, state: HostState) -> list[str]:
    """Every problem found (empty = valid)."""
    problems = package_problems(expect, state)
    hooks = remote.run(hook_command(expect), timeout=600)
    if not hooks.ok:
        problems += [f"validation hook {line}" for line in hooks.stdout.splitlines() if line]
        if not hooks.stdout.strip():
            problems.append(f"validation hooks failed: {hooks.tail()}")
    return problems


def junit_failures(xml_text: str) -> list[tuple[str, str]]:
    """(test name, first line of the message) of every failed or errored case in a pytest
    JUnit report (pure). Skipped cases are not failures: the checks skip with a reason."""
    import xml.etree.ElementTree as ET

    failures = []
    for case in ET.fromstring(xml_text).iter("testcase"):
        for tag in ("failure", "error"):
            node = case.find(tag)
            if node is not None:
                message = (node.get("message") or node.text or tag).strip().splitlines()
                failures.append((case.get("name", "?"), message[0][:300] if message else tag))
                break
    return failures


def check_problems(failures: list[tuple[str, str]], accepted: set[str]) -> list[str]:
    """Problems from failed checks; a check whose function name (``test_x`` of
    ``test_x[ssh://h1]``) is in ``accepted`` does not count (pure)."""
    return [
        f"check {name}: {message}"
        for name, message in failures
        if name.split("[", 1)[0] not in accepted
    ]
