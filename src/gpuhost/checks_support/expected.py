"""What a host must have: its profile (inventory data or the provision marker) resolved with the
same code the deploys use (``gpuhost.deploys.guards`` and ``spec.package_plan``), so checks and
deploys cannot disagree."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuhost.deploys.guards import PROFILE_KEY, check_profile, load_profile_table
from gpuhost.deploys.spec import PackagePlan, package_plan
from gpuhost.desired import DesiredState
from gpuhost.errors import GpuhostError, ParseError
from gpuhost.parsers.profile_marker import MARKER_PATH, ProfileMarker, parse_profile_marker
from gpuhost.probe.script import MARKER_CODE, OS_RELEASE_CODE

# the audit probe's commands (empty output: no marker; their exit code is not read)
MARKER_COMMAND = MARKER_CODE
OS_RELEASE_COMMAND = OS_RELEASE_CODE


@dataclass(frozen=True)
class Marker:
    """``/etc/gpuhost/profile`` as read: ``profile`` None with ``problem`` when unreadable;
    ``recorded`` is everything it says (``gpuhost.parsers.profile_marker``)."""

    present: bool
    profile: str | None = None
    recorded: ProfileMarker | None = None
    problem: str | None = None


@dataclass(frozen=True)
class Expected:
    """The host's expected state, or why there is none (``problem``).

    ``origin`` says where the profile name came from; ``data`` is the host's inventory data.
    """

    host: str
    profile: str | None
    origin: str
    spec: DesiredState | None = None
    plan: PackagePlan | None = None
    os_key: str | None = None
    marker: Marker = field(default_factory=lambda: Marker(False))
    data: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None


def parse_marker(text: str) -> Marker:
    """The marker command's output (JSON schema 1, or a legacy plain profile name)."""
    try:
        recorded = parse_profile_marker(text)
    except ParseError as exc:
        return Marker(True, problem=str(exc))
    if recorded is None:
        return Marker(False)
    return Marker(True, recorded.profile, recorded)


def resolve(host: str, data: dict[str, Any], marker: Marker, os_id: str | None) -> Expected:
    """The profile from inventory data ``gpuhost_profile``, else from the marker; resolved to
    versions and package names. Never raises for a host's problem: ``problem`` explains."""
    from_data = data.get(PROFILE_KEY)
    if from_data:
        name, origin = str(from_data), f"inventory data {PROFILE_KEY}"
    elif marker.profile:
        name, origin = marker.profile, f"the provision marker {MARKER_PATH}"
    else:
        why = marker.problem or f"{MARKER_PATH} does not exist"
        return Expected(
            host,
            None,
            "none",
            os_key=os_id,
            marker=marker,
            data=data,
            problem=(
                f"no profile for {host}: inventory data {PROFILE_KEY} is not set and {why}; "
                "set gpuhost_profile or provision the host (gpuhost provision)"
            ),
        )
    try:
        profiles = load_profile_table(data.get("gpuhost_profiles_file"))
        spec = check_profile(host, {**data, PROFILE_KEY: name}, profiles)
    except GpuhostError as exc:
        return Expected(
            host,
            name,
            origin,
            os_key=os_id,
            marker=marker,
            data=data,
            problem=f"profile {name!r} (from {origin}): {exc}",
        )
    plan = None
    problem = None
    if os_id is None:
        problem = f"{host}: cannot tell the OS (/etc/os-release unreadable)"
    else:
        try:
            plan = package_plan(spec, os_id)
        except GpuhostError as exc:
            problem = f"profile {name!r} on {os_id}: {exc}"
    return Expected(host, name, origin, spec, plan, os_id, marker, data, problem)
