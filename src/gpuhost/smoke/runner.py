"""Run the smoke script with a Python interpreter on this machine.

Remote runs (checks/) copy ``SCRIPT_PATH`` to the host and run ``script_command(...)`` there;
the same ``parse_result_text`` reads what it prints.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from gpuhost import toolrun
from gpuhost.errors import ConfigError, HostError
from gpuhost.smoke.result import SmokeResult, parse_result_text

SCRIPT_PATH = Path(__file__).with_name("script.py")
FRAMEWORK_CHOICES = ("torch", "tensorflow", "all")
# Seconds allowed on top of the script's own --timeout for start-up and printing.
GRACE_S = 30


def script_command(
    python: str,
    script: str | Path = SCRIPT_PATH,
    framework: str = "all",
    quick: bool = False,
    timeout: float = 600.0,
) -> list[str]:
    """The argv that runs the smoke script (``script`` is its path on the target)."""
    if framework not in FRAMEWORK_CHOICES:
        raise ConfigError(
            f"framework: found {framework!r}, expected one of {', '.join(FRAMEWORK_CHOICES)}"
        )
    if not timeout > 0:
        raise ConfigError(f"timeout: found {timeout!r}, expected a positive number of seconds")
    command = [python, str(script), "--framework", framework, "--timeout", f"{timeout:g}"]
    if quick:
        command.append("--quick")
    return command


def run_local(
    python: str, framework: str = "all", quick: bool = False, timeout: float = 600.0
) -> SmokeResult:
    """Run the script with ``python`` here; HostError when it cannot run, ParseError on junk."""
    text, source = run_local_text(python, framework, quick, timeout)
    return parse_result_text(text, source)


def run_local_text(
    python: str, framework: str = "all", quick: bool = False, timeout: float = 600.0
) -> tuple[str, str]:
    """The script's stdout and a label naming the interpreter (for error messages)."""
    found = shutil.which(python)
    if found is None:
        raise ConfigError(f"python: {python!r} is not an executable on PATH or a path")
    command = script_command(found, SCRIPT_PATH, framework, quick, timeout)
    try:
        proc = toolrun.run(command, timeout + GRACE_S)
    except OSError as exc:
        raise HostError("localhost", f"cannot run {found}: {exc}") from None
    if proc.timed_out:
        raise HostError(
            "localhost", f"smoke script with {found} did not exit within {timeout + GRACE_S:g} s"
        )
    if proc.returncode != 0:
        tail = proc.text(proc.stderr).strip()[-500:] or "(no stderr)"
        raise HostError("localhost", f"smoke script with {found} exited {proc.returncode}: {tail}")
    return proc.text(), f"smoke script output ({found})"
