"""Shared helpers of the hand-run benchmarks in bench/ (not part of gpuhost, not run in CI).

A benchmark works on a running lab (``tests/lab/lab --name bench up 128``): it reads the lab's
lab.json, writes inventories for the first N hosts (pyinfra and Ansible), times commands as
subprocesses (wall clock around the whole process, so interpreter start-up counts) and records
every run in bench/results/<bench>.json, which docs/benchmarks.md and bench/plot.py read.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
WORK = BENCH / ".work"  # generated inventories, probe copies, raw outputs (gitignored)
RESULTS = BENCH / "results"
GPUHOST = REPO / ".venv" / "bin" / "gpuhost"
PYINFRA = REPO / ".venv" / "bin" / "pyinfra"
ANSIBLE_VENV = BENCH / ".venv-ansible"
ANSIBLE_DIR = BENCH / "ansible"
LAB_PROFILES = REPO / "tests" / "integration" / "data" / "lab_repo_profiles.yaml"
LAB_PROFILE = "lab-nvidia-repo-550"


class BenchError(Exception):
    """A benchmark cannot run (lab down, too few hosts, a tool missing): one line to the user."""


@dataclass(frozen=True)
class Lab:
    name: str
    state_dir: Path
    info: dict[str, Any]

    @property
    def hosts(self) -> list[dict[str, Any]]:
        return list(self.info["hosts"])

    @property
    def ssh_config(self) -> Path:
        return self.state_dir / "ssh_config"

    @property
    def key(self) -> Path:
        return self.state_dir / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        return self.state_dir / "known_hosts"


def load_lab(name: str | None, need: int) -> Lab:
    name = name or os.environ.get("GPUHOST_LAB", "bench")
    state_dir = REPO / ".lab" / name
    path = state_dir / "lab.json"
    if not path.is_file():
        raise BenchError(f"lab {name!r} is down ({path} missing): run tests/lab/lab --name {name} "
                         f"up {need}")
    info = json.loads(path.read_text())
    if len(info["hosts"]) < need:
        raise BenchError(f"lab {name!r} has {len(info['hosts'])} hosts, this run needs {need}")
    return Lab(name, state_dir, info)


def ssh_data(lab: Lab, host: dict[str, Any]) -> dict[str, Any]:
    return {
        "ssh_hostname": host["address"],
        "ssh_user": "root",
        "ssh_key": str(lab.key),
        "ssh_known_hosts_file": str(lab.known_hosts),
        "ssh_strict_host_key_checking": "yes",
    }


def provision_data(lab: Lab) -> dict[str, Any]:
    """Inventory data for the lab-repository profile (the stand-in NVIDIA repository).

    SSH hardening and the firewall (part of provision since the harden work landed) are off: the
    comparison is the pinned GPU stack, which bench/ansible/provision.yml reproduces.
    """
    key = Path(lab.info["repo_key_path"])
    return {
        "gpuhost_harden": False,
        "gpuhost_profile": LAB_PROFILE,
        "gpuhost_profiles_file": str(LAB_PROFILES),
        "gpuhost_cuda_repo_url": lab.info["repo_url"],
        "gpuhost_cuda_repo_key": str(key),
        "gpuhost_cuda_repo_key_sha256": hashlib.sha256(key.read_bytes()).hexdigest(),
    }


def pyinfra_inventory(lab: Lab, count: int, extra: dict[str, Any] | None = None) -> Path:
    """bench/.work/<lab>-<count>[-provision].py: the first ``count`` lab hosts."""
    hosts = [(h["name"], {**ssh_data(lab, h), **(extra or {})}) for h in lab.hosts[:count]]
    suffix = "-provision" if extra else ""
    path = WORK / f"{lab.name}-{count}{suffix}.py"
    WORK.mkdir(parents=True, exist_ok=True)
    path.write_text(f'"""bench inventory: first {count} hosts of lab {lab.name}."""\n\n'
                    f"hosts = {hosts!r}\n")
    return path


def ansible_inventory(lab: Lab, count: int) -> Path:
    """An INI inventory; ssh options come from the lab's ssh_config (same mux settings)."""
    lines = ["[lab]"]
    lines += [f"{h['name']} ansible_host={h['address']}" for h in lab.hosts[:count]]
    lines += ["", "[lab:vars]", "ansible_user=root", "ansible_python_interpreter=/usr/bin/python3"]
    path = WORK / f"{lab.name}-{count}.ini"
    WORK.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def ansible_env(lab: Lab, forks: int) -> dict[str, str]:
    """Environment for ansible-playbook: bench/ansible/ansible.cfg plus the lab's ssh_config.

    ssh_args carries ``-F <lab ssh_config>``: the same identity, known_hosts and ControlMaster /
    ControlPersist settings as the plain-ssh floor; forks = hosts.
    """
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": str(ANSIBLE_DIR / "ansible.cfg"),
        "ANSIBLE_FORKS": str(forks),
        "ANSIBLE_SSH_ARGS": f"-F {lab.ssh_config} -o ControlMaster=auto -o ControlPersist=600s",
        "ANSIBLE_LOCAL_TEMP": str(WORK / "ansible-tmp"),
        "ANSIBLE_HOME": str(WORK / "ansible-home"),
        "ANSIBLE_CALLBACK_TREE_DIR": str(WORK / "ansible-tree"),
        "PATH": f"{ANSIBLE_VENV / 'bin'}:{env.get('PATH', '')}",
    })
    return env


def need_ansible() -> Path:
    exe = ANSIBLE_VENV / "bin" / "ansible-playbook"
    if not exe.exists():
        raise BenchError(f"{exe} missing: python3 -m venv {ANSIBLE_VENV} && "
                         f"{ANSIBLE_VENV}/bin/pip install ansible-core matplotlib")
    return exe


@dataclass
class Sample:
    seconds: float
    rc: int
    peak_rss_mb: float | None = None  # largest single process (ru_maxrss of the direct child)
    tree_pss_mb: float | None = None  # peak of the summed PSS of the whole process tree
    load1_start: float | None = None  # 1-minute load average when the run started
    load1_end: float | None = None  # ... and when it ended (the machine is shared)


@dataclass
class Series:
    tool: str
    hosts: int
    command: str
    samples: list[Sample] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(s.seconds for s in self.samples)

    def as_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "hosts": self.hosts,
            "command": self.command,
            "median_s": round(self.median, 3),
            "min_s": round(min(s.seconds for s in self.samples), 3),
            "max_s": round(max(s.seconds for s in self.samples), 3),
            "runs": [s.__dict__ for s in self.samples],
        }


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                ppid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        todo.extend(children.get(current, []))
    return found


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


class TreeSampler(threading.Thread):
    """Samples the summed PSS of a process and all its descendants (every 0.1 s) — for tools
    that fork workers (Ansible), whose controller memory is the sum, not one process."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak_kb = 0
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            total = sum(_pss_kb(p) for p in _descendants(self.pid))
            self.peak_kb = max(self.peak_kb, total)
            self.stop.wait(0.1)


def timed(argv: Sequence[str], *, env: dict[str, str] | None = None, stdout: Path | None = None,
          memory: bool = False, timeout: float = 900) -> Sample:
    """Run argv once; wall time around the whole process. memory: also peak RSS / tree PSS."""
    import resource

    out = open(stdout, "wb") if stdout else subprocess.DEVNULL  # noqa: SIM115 - closed below
    load1_start = os.getloadavg()[0]
    try:
        start = time.perf_counter()
        proc = subprocess.Popen(list(argv), env=env, stdout=out, stderr=subprocess.PIPE,
                                cwd=REPO)
        sampler = TreeSampler(proc.pid) if memory else None
        if sampler:
            sampler.start()
        _, err = proc.communicate(timeout=timeout)
        seconds = time.perf_counter() - start
    finally:
        if stdout:
            out.close()  # type: ignore[union-attr]
    sample = Sample(round(seconds, 4), proc.returncode, load1_start=round(load1_start, 2),
                    load1_end=round(os.getloadavg()[0], 2))
    if sampler:
        sampler.stop.set()
        sampler.join()
        sample.tree_pss_mb = round(sampler.peak_kb / 1024, 1)
        # ru_maxrss of RUSAGE_CHILDREN is the largest of all children waited for so far; the
        # memory bench runs one command per fresh interpreter to keep it per command.
        sample.peak_rss_mb = round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1)
    if proc.returncode not in (0, 1) and err:
        sys.stderr.write(f"  ! rc={proc.returncode}: {err.decode(errors='replace')[-600:]}\n")
    return sample


def run_bench(main: Callable[[], int]) -> int:
    """A bench's exit code: what main returns, or 2 with one line on stderr for a BenchError."""
    try:
        return main()
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2


def machine() -> dict[str, Any]:
    """What the numbers were measured on (goes into every results file)."""
    def version(argv: list[str]) -> str:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
        except OSError:
            return "missing"

    with open("/proc/loadavg") as handle:
        load = handle.read().split()[:3]
    mem_kb = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "when": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "memory_gib": round(mem_kb / 1024 / 1024, 1),
        "cpu_model": next((line.split(":", 1)[1].strip() for line in
                           Path("/proc/cpuinfo").read_text().splitlines()
                           if line.startswith("model name")), "unknown"),
        "loadavg_at_start": load,
        "python": platform.python_version(),
        "pyinfra": version([str(PYINFRA), "--version"]),
        "gpuhost": version([str(GPUHOST), "--version"]),
        "ansible": version([str(ANSIBLE_VENV / "bin" / "ansible"), "--version"]).split("\n")[0],
        "openssh": subprocess.run(["ssh", "-V"], capture_output=True, text=True).stderr.strip(),
    }


def save(bench: str, payload: dict[str, Any]) -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"{bench}.json"
    path.write_text(json.dumps(payload, indent=1) + "\n")
    return path


def show(series: Series) -> None:
    runs = " ".join(f"{s.seconds:.2f}" for s in series.samples)
    loads = " ".join(f"{s.load1_start}" for s in series.samples)
    print(f"  {series.tool:18} {series.hosts:4} hosts  median {series.median:6.2f} s  [{runs}]"
          f"  load1 at start [{loads}]", flush=True)


def quote(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(str(a)) for a in argv).replace(str(REPO) + "/", "")
