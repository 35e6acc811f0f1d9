"""How the check suite is started: which folder pytest runs and its command line. Used by
``gpuhost check`` (cli/check.py) and the upgrade's validation (upgrade/connect.run_checks), so
neither reaches into the other."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import gpuhost.checks
from gpuhost import toolrun
from gpuhost.errors import ConfigError

CHECKS_DIR_ENV = "GPUHOST_CHECKS_DIR"
TIERS = ("static", "functional", "stress", "fabric")


def checks_dir() -> Path:
    """The suite to run: $GPUHOST_CHECKS_DIR when set, else the checks inside the package.

    pytest gets the folder (not ``--pyargs``) so that its conftest.py, which loads the plugin,
    is read before the command line is parsed and ``--tier``/``--inventory`` are known options.
    """
    override = os.environ.get(CHECKS_DIR_ENV)
    if not override:
        return Path(gpuhost.checks.__file__).resolve().parent
    path = Path(override)
    if not (path / "conftest.py").is_file():
        raise ConfigError(
            f"checks: {CHECKS_DIR_ENV}={override}: no conftest.py in that folder (expected a "
            f"folder of checks with a conftest.py loading gpuhost.checks.plugin, like checks/ "
            f"in gpuhost's source tree); unset it to run the checks shipped with gpuhost"
        )
    return path


def pytest_argv(
    directory: Path,
    inventory: str,
    tier: str,
    limit: str | None,
    junit: Path | None,
    extra: tuple[str, ...] = (),
    profiles: str | None = None,
) -> list[str]:
    argv = [sys.executable, "-m", "pytest", str(directory), "-p", "no:cacheprovider", "-ra"]
    # "--opt=value": pytest reads an argument starting with "@" as a file of arguments
    argv += [f"--inventory={inventory}", f"--tier={tier}"]
    if limit:
        argv += [f"--limit={limit}"]
    if profiles:
        argv += [f"--profiles={profiles}"]
    if junit is not None:
        argv += [
            f"--junitxml={junit}",
            "-o",
            "junit_family=xunit1",
            "-o",
            "junit_suite_name=gpuhost-check",
        ]
    return argv + list(extra)


#: how long pytest may take to unwind after its SIGINT before it is killed
AFTER_SIGINT_S = 20.0


def run_pytest(argv: list[str], grace: float = 2.0) -> int:
    """Run pytest and return its exit code. When gpuhost is stopped (Ctrl-C, SIGTERM), pytest
    gets the chance to end as pytest does (its clean-up removes the run's ssh_config folder):
    ``grace`` seconds to end by itself (a Ctrl-C in a terminal reached it too), then a SIGINT
    and ``AFTER_SIGINT_S`` more (a loaded controller's pytest needs seconds to unwind; a second
    Ctrl-C quits at once anyway); only then is it killed."""
    # in gpuhost's process group: a terminal's Ctrl-C reaches pytest as it reaches gpuhost
    tool = toolrun.Tool(argv, stdout=toolrun.INHERIT, own_group=False)

    def unwind(tool: toolrun.Tool) -> None:
        if not tool.wait_end(grace):
            tool.send(signal.SIGINT)
            if not tool.wait_end(AFTER_SIGINT_S):
                tool.kill()

    return tool.finish(None, unwind=unwind).returncode


PYTEST_CODES = {
    2: "pytest was interrupted",
    3: "pytest had an internal error (see its output above)",
    4: "pytest refused its arguments (see above; arguments after -- go to pytest)",
    5: "no check was selected (the tier, --limit or -k selects nothing)",
}


def pytest_exit(code: int) -> int:
    """pytest's exit code as gpuhost's: 0 and 1 as they are, 2-5 (pytest's own problems) are
    exit 2 with one line; a pytest killed by a signal is 128 + the signal."""
    if code < 0:
        return 128 - code
    if code in PYTEST_CODES:
        raise ConfigError(f"check: {PYTEST_CODES[code]} (pytest exit code {code})")
    return code
