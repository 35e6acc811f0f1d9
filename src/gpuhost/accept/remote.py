"""Reaching each host of an acceptance run: the agent copied and run, commands, the stop.

``Remote(host, config)`` talks to one inventory host through ``ssh -F CONFIG`` (the ssh_config
written from the inventory's connection data, as ``gpuhost check`` does; one multiplexed master
per host), ``@local`` through ``sh -c`` here. ``run_agent`` copies ``accept/agent.py`` to
``AGENT_DIR`` and runs it with the host's ``python3``; its ``progress`` lines are handed to
``on_progress`` as they come; its one JSON document is the result. ``stop`` asks the agent
(its pid file) to stop: it ends its GEMM children and still prints its document.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuhost.accept.options import AcceptOptions
from gpuhost.checks_support.inventory import LOCAL, CheckHost
from gpuhost.connection import openssh_cause
from gpuhost.errors import HostError

AGENT_PATH = Path(__file__).with_name("agent.py")
AGENT_DIR = "/var/tmp/gpuhost-accept"
AGENT_PID = "/run/gpuhost-accept.pid"
SSH_FAILED = 255
#: seconds for what surrounds the soak (inventory, nvbandwidth, nccl) on top of the budget
SLACK_S = 1800.0


class Remote:
    def __init__(self, host: CheckHost, ssh_config: Path | None) -> None:
        self.host = host
        self.config = ssh_config
        self._agent: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()

    @property
    def local(self) -> bool:
        return self.host.name == LOCAL

    def argv(self, command: str) -> list[str]:
        if self.local:
            return ["sh", "-c", f"exec {command}"]  # the agent itself is the child: stop reaches it
        return [
            "ssh", "-F", str(self.config), "-o", "ControlMaster=auto", "-o",
            "ControlPersist=120", "-o", "BatchMode=yes", self.host.name, command,
        ]  # fmt: skip

    def run(self, command: str, timeout: float, stdin: str | None = None) -> tuple[int, str]:
        """(exit status, stdout+stderr); an SSH failure raises HostError with its cause."""
        try:
            proc = subprocess.run(
                self.argv(command),
                input=stdin,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                check=False,
                start_new_session=True,
            )
        except subprocess.TimeoutExpired:
            return 124, f"did not finish within {timeout:g} s"
        except OSError as exc:
            raise HostError(
                self.host.name, f"cannot start {exc.filename}: {exc.strerror}"
            ) from None
        output = proc.stdout + proc.stderr
        if proc.returncode == SSH_FAILED and not self.local:
            cause = openssh_cause(output, self.host.data, self.host.name)
            if cause:
                raise HostError(self.host.name, cause)
        return proc.returncode, output

    def agent_command(self, options: AcceptOptions, python: str, nccl_tests: str) -> str:
        folder = AGENT_DIR if not self.local else str(AGENT_PATH.parent)
        args = [
            "python3", f"{folder}/agent.py",
            "--stages", ",".join(options.agent_stages()),
            "--duration", f"{options.duration_s:g}", "--interval", f"{options.interval_s:g}",
            "--dcgm-level", str(options.dcgm_level), "--python", python,
            "--nccl-tests", nccl_tests,
        ]  # fmt: skip
        return " ".join(shlex.quote(a) for a in args)

    def copy_agent(self) -> None:
        if self.local:
            return
        rc, output = self.run(
            f"umask 077 && mkdir -p {AGENT_DIR} && cat > {AGENT_DIR}/agent.py",
            120,
            AGENT_PATH.read_text(encoding="utf-8"),
        )
        if rc != 0:
            raise HostError(self.host.name, f"cannot copy the agent: {output.strip()[:200]}")

    def run_agent(
        self,
        options: AcceptOptions,
        python: str,
        nccl_tests: str,
        on_progress: Callable[[str], None],
    ) -> dict[str, Any]:
        """The agent's document; HostError when it could not run or printed none."""
        self.copy_agent()
        command = self.agent_command(options, python, nccl_tests)
        with self._lock:
            self._agent = subprocess.Popen(
                self.argv(command),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                stdin=subprocess.DEVNULL,
                text=True,
                errors="replace",
                start_new_session=True,  # a Ctrl-C on the terminal reaches gpuhost alone
            )
        agent = self._agent
        assert agent.stderr is not None and agent.stdout is not None
        errors: list[str] = []

        def follow() -> None:  # stderr apart from stdout: neither pipe may fill up
            assert agent.stderr is not None
            for line in agent.stderr:
                if line.startswith("progress "):
                    on_progress(line.strip().removeprefix("progress "))
                else:
                    errors.append(line.rstrip())

        reader = threading.Thread(target=follow, name=f"accept-{self.host.name}", daemon=True)
        reader.start()
        out = agent.stdout.read()
        reader.join()
        agent.wait()
        for line in reversed(out.splitlines()):
            if line.startswith("{"):
                try:
                    doc: dict[str, Any] = json.loads(line)
                    return doc
                except ValueError:
                    break
        said = "; ".join(e for e in errors if e)[-300:] or f"exit {agent.returncode}"
        if agent.returncode == SSH_FAILED and not self.local:
            said = openssh_cause(said, self.host.data, self.host.name) or said
        raise HostError(self.host.name, f"the acceptance agent printed no result: {said}")

    def stop(self) -> None:
        """Ask the agent to stop (its GEMM load first); safe to call when none runs."""
        with self._lock:
            running = self._agent is not None and self._agent.poll() is None
        if not running:
            return
        if self.local:
            assert self._agent is not None
            self._agent.terminate()
            return
        command = f"[ -r {AGENT_PID} ] && kill -TERM $(cat {AGENT_PID}) 2>/dev/null; true"
        with contextlib.suppress(HostError):
            self.run(command, 30)

    def close(self) -> None:
        """End the multiplexed SSH master (nothing for this machine)."""
        if self.local:
            return
        subprocess.run(
            ["ssh", "-F", str(self.config), "-O", "exit", self.host.name],
            capture_output=True,
            check=False,
            timeout=30,
        )
