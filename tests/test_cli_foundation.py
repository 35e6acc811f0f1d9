"""The CLI's contract: errors become one line and an exit code, never a traceback."""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys

import gpuhost.cli as cli_package
from gpuhost.cli import main


def test_unknown_subcommand_is_a_usage_error(capsys):
    assert main(["no-such-command"]) == 2
    err = capsys.readouterr().err
    assert "No such command" in err
    assert "Traceback" not in err


def test_version_exits_zero(capsys):
    assert main(["--version"]) == 0
    assert "gpuhost" in capsys.readouterr().out


def test_console_entry_point_runs_as_module():
    proc = subprocess.run(
        [sys.executable, "-m", "gpuhost", "--help"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0
    assert "Usage" in proc.stdout


def _imports_after(args: list[str]) -> tuple[int, set[str]]:
    code = (
        "import sys\n"
        "from gpuhost.cli import main\n"
        f"rc = main({args!r})\n"
        "print(rc, ' '.join(sorted(m for m in sys.modules if m.startswith('gpuhost'))))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    rc, _, modules = proc.stdout.strip().splitlines()[-1].partition(" ")
    return int(rc), set(modules.split())


def test_a_command_imports_only_its_own_module():
    rc, modules = _imports_after(["audit", "--help"])
    assert rc == 0
    assert "gpuhost.cli.audit" in modules
    assert "gpuhost.upgrade" not in modules
    assert not {"gpuhost.cli.upgrade", "gpuhost.cli.provision", "gpuhost.deploy_runner"} & modules


def test_help_lists_every_command_module_with_its_short_help(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    modules = [m.name for m in pkgutil.iter_modules(cli_package.__path__) if m.name[0] != "_"]
    assert len(modules) >= 10
    for name in modules:
        command = importlib.import_module(f"gpuhost.cli.{name}").command
        # the module's name is the command's name: that is how it is found without importing it
        assert command.name == name.replace("_", "-")
        short = command.get_short_help_str()
        assert any(line.split()[:1] == [command.name] for line in out.splitlines()), name
        assert short[:20] in out, name
