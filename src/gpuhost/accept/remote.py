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
import math
import shlex
import signal
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpuhost import toolrun
from gpuhost.accept.options import AcceptOptions
from gpuhost.checks_support.inventory import LOCAL, CheckHost
from gpuhost.connection import openssh_cause
from gpuhost.errors import HostError

AGENT_PATH = Path(__file__).with_name("agent.py")
AGENT_DIR = "/var/tmp/gpuhost-accept"
AGENT_PID = "/run/gpuhost-accept.pid"
SSH_FAILED = 255
#: seconds for what surrounds the timed stages (inventory, the soak's start and end) on top of
#: their limits
SLACK_S = 1800.0
#: the agent's limit for ``dcgmi diag`` (level 3 or 4 can run well over an hour on a full node)
#: and for nvbandwidth and the NCCL test each: passed to it, and part of its deadline here
DCGM_TIMEOUT_S = 7200.0
TOOL_TIMEOUT_S = 900.0


#: bytes the agent's document may take per telemetry sample (a JSON-escaped nvidia-smi row is
#: about 120 bytes a GPU; room for 16 GPUs at twice that)
SAMPLE_BYTES = 16 * 256


def agent_output_cap(options: AcceptOptions) -> int:
    """Bytes of the agent's stdout kept (pure): toolrun's cap plus room for every telemetry
    sample of the soak, whose document comes as one line at the end (a 72 h soak of 8 GPUs,
    sampled every 10 s, prints about 24 MB: cut at toolrun's 16 MiB, it was 'printed no
    result' after the 72 hours)."""
    samples = math.ceil(options.duration_s / options.interval_s) + 2
    return toolrun.MAX_OUTPUT + samples * SAMPLE_BYTES


def agent_deadline(options: AcceptOptions) -> float:
    """Seconds the agent may run (pure): the soak's duration, the limits of the stages it runs
    (never a DCGM diag cut short by gpuhost before the agent's own limit) and the slack."""
    stages = options.agent_stages()
    limits = (DCGM_TIMEOUT_S if "dcgm" in stages else 0.0) + TOOL_TIMEOUT_S * sum(
        stage in stages for stage in ("nvbandwidth", "nccl"))
    return options.duration_s + limits + SLACK_S


class Remote:
    def __init__(self, host: CheckHost, ssh_config: Path | None) -> None:
        self.host = host
        self.config = ssh_config
        self._agent: toolrun.Tool | None = None
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
        data = None if stdin is None else stdin.encode("utf-8")
        try:
            proc = toolrun.run(self.argv(command), timeout, input=data)
        except OSError as exc:
            raise HostError(
                self.host.name, f"cannot start {exc.filename}: {exc.strerror}"
            ) from None
        if proc.timed_out:
            return 124, f"did not finish within {timeout:g} s"
        output = proc.text() + proc.text(proc.stderr)
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
            "--dcgm-timeout", f"{DCGM_TIMEOUT_S:g}", "--tool-timeout", f"{TOOL_TIMEOUT_S:g}",
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
        errors: deque[str] = deque(maxlen=100)  # an agent printing without end costs no more

        def follow(line: str) -> None:
            if line.startswith("progress "):
                on_progress(line.strip().removeprefix("progress "))
            else:
                errors.append(line.rstrip())

        with self._lock:  # in a group of its own: a Ctrl-C on the terminal reaches gpuhost alone
            self._agent = toolrun.Tool(self.argv(command), on_stderr_line=follow,
                                       max_output=agent_output_cap(options))
        deadline = agent_deadline(options)
        agent = self._agent.finish(deadline)
        if agent.timed_out:
            raise HostError(
                self.host.name, f"the acceptance agent did not finish within {deadline:g} s"
            )
        for line in reversed(agent.text().splitlines()):
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
            agent = self._agent
        if agent is None or not agent.running:
            return
        if self.local:
            agent.send(signal.SIGTERM)  # nothing once it has ended and been reaped
            return
        command = f"[ -r {AGENT_PID} ] && kill -TERM $(cat {AGENT_PID}) 2>/dev/null; true"
        with contextlib.suppress(HostError):
            self.run(command, 30)

    def close(self) -> None:
        """End the multiplexed SSH master (nothing for this machine)."""
        if self.local:
            return
        with contextlib.suppress(OSError):
            toolrun.run(["ssh", "-F", str(self.config), "-O", "exit", self.host.name], 30)
