"""What a smoke-test run means for the functional check (policy in docs/checks.md).

The smoke judge (``gpuhost.smoke.judge``) gives PASS, FAIL or COULD-NOT-RUN per check. On a
host gpuhost validates, a GPU is the point, so:

- a framework the profile pins (``frameworks``) or inventory data names
  (``gpuhost_smoke_frameworks``) that is not installed is a FAIL;
- an interpreter named in inventory data ``gpuhost_pythons`` with no framework at all is a FAIL;
- the default ``python3`` with no framework, where none is expected, is a skip whose reason says
  the smoke test COULD-NOT-RUN and why (nothing to test);
- for an installed framework, COULD-NOT-RUN of a gate check (nvidia-smi, CUDA available, GPUs
  listed, CUDA/driver compatibility) is a FAIL: the framework cannot use the GPU;
- other COULD-NOT-RUN verdicts (bf16 on a GPU without it, NCCL with one GPU) are shown, not failed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from gpuhost.smoke.judge import Verdict
from gpuhost.smoke.script import COULD_NOT_RUN, FAIL, FRAMEWORKS

GATE_CHECKS = frozenset({"nvidia_smi", "cuda_available", "gpus_listed", "cuda_driver_compat"})
PIN_NAME_RE = re.compile(r"^\s*([A-Za-z0-9_.-]+)")
PIP_TO_MODULE = {
    "torch": "torch",
    "tensorflow": "tensorflow",
    "tensorflow-gpu": "tensorflow",
    "tensorflow-cpu": "tensorflow",
}

PASSED, FAILED, SKIPPED = "pass", "fail", "skip"


@dataclass(frozen=True)
class SmokeOutcome:
    outcome: str  # pass | fail | skip
    lines: tuple[str, ...]

    @property
    def message(self) -> str:
        return "\n".join(self.lines)


def expected_frameworks(profile_pins: Iterable[str], data_names: Iterable[str]) -> set[str]:
    """Framework modules a host must have: from the profile's pip pins and inventory names."""
    names = set()
    for pin in list(profile_pins) + list(data_names):
        match = PIN_NAME_RE.match(pin)
        module = PIP_TO_MODULE.get(match.group(1).lower()) if match else None
        if module:
            names.add(module)
    return names


def judge_run(
    python: str, verdicts: list[Verdict], expected: set[str], explicit: bool
) -> SmokeOutcome:
    """``explicit``: the interpreter was named in inventory data (not the default)."""
    missing = {
        v.framework: v.message
        for v in verdicts
        if v.check == "import" and v.outcome == COULD_NOT_RUN and v.framework in FRAMEWORKS
    }
    installed = [
        f for f in FRAMEWORKS if f not in missing and any(v.framework == f for v in verdicts)
    ]
    lines: list[str] = []
    for name in sorted(expected):
        if name not in installed:
            lines.append(
                f"{python}: {name} is expected (profile or gpuhost_smoke_frameworks) "
                f"but cannot be used: {missing.get(name, 'not reported')}"
            )
    if not installed:
        if lines:
            return SmokeOutcome(FAILED, tuple(lines))
        if explicit:
            return SmokeOutcome(
                FAILED,
                (
                    f"{python} is named in gpuhost_pythons but has neither torch nor tensorflow: "
                    + "; ".join(missing.values()),
                ),
            )
        return SmokeOutcome(
            SKIPPED,
            (
                f"smoke test COULD-NOT-RUN: {python} has neither torch nor tensorflow and none "
                "is expected (the profile pins "
                "no framework; gpuhost_pythons and gpuhost_smoke_frameworks are not set): nothing "
                "to smoke-test",
            ),
        )
    for v in verdicts:
        if v.framework not in installed and v.framework != "host":
            continue
        if v.outcome == FAIL:
            lines.append(f"FAIL {v.id}: {v.message}")
        elif v.outcome == COULD_NOT_RUN and v.check in GATE_CHECKS:
            lines.append(f"FAIL {v.id} (could not run on a GPU host): {v.message}")
    if lines:
        return SmokeOutcome(FAILED, tuple(lines))
    shown = [f"{v.outcome} {v.id}: {v.message}" for v in verdicts]
    return SmokeOutcome(PASSED, tuple(shown))


NOT_FOUND_MARK = "#gpuhost: interpreter not found: "


def remote_command(python: str, quick: bool, timeout: float, framework: str = "all") -> str:
    """Shell command that writes the smoke script to a temporary file on the host, runs it with
    ``python`` and removes the file again (the only trace a check leaves, for its run time)."""
    import base64
    import shlex

    from gpuhost.smoke.runner import SCRIPT_PATH, script_command

    payload = base64.b64encode(SCRIPT_PATH.read_bytes()).decode()
    placeholder = "GPUHOST_SMOKE_SCRIPT"
    argv = shlex.join(script_command(python, placeholder, framework, quick, timeout))
    argv = argv.replace(placeholder, '"$gh_smoke"')
    py = shlex.quote(python)
    return (
        f"command -v {py} >/dev/null 2>&1 || {{ echo {shlex.quote(NOT_FOUND_MARK + python)}; "
        "exit 0; }; "
        "gh_smoke=$(mktemp /tmp/gpuhost-smoke-XXXXXX) || exit 90; "
        f'printf %s {payload} | base64 -d > "$gh_smoke" && {argv}; '
        'gh_rc=$?; rm -f "$gh_smoke"; exit $gh_rc'
    )
