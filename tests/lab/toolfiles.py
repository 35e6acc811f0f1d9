"""Files for the tools: a pyinfra inventory, an ssh_config with multiplexing, known_hosts."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def ssh_config(state: dict[str, Any]) -> str:
    sd = Path(state["state_dir"])
    lines = [
        f"# gpuhost lab {state['name']!r}: use with  ssh -F {sd / 'ssh_config'} h1",
        "",
    ]
    for host in state["hosts"]:
        lines += [f"Host {host['name']} {host['address']}", f"    HostName {host['address']}", ""]
    patterns = " ".join(f"{h['name']} {h['address']}" for h in state["hosts"])
    lines += [
        f"Host {patterns}",
        "    User root",
        f"    IdentityFile {sd / 'id_ed25519'}",
        "    IdentitiesOnly yes",
        f"    UserKnownHostsFile {sd / 'known_hosts'}",
        "    StrictHostKeyChecking yes",
        "    GlobalKnownHostsFile /dev/null",
        "    BatchMode yes",
        "    ConnectTimeout 5",
        "    ServerAliveInterval 5",
        "    ServerAliveCountMax 2",
        "    LogLevel ERROR",
        "    ControlMaster auto",
        f"    ControlPath {sd / 'mux'}/%C",
        "    ControlPersist 120",
        "",
    ]
    return "\n".join(lines)


def known_hosts(state: dict[str, Any]) -> str:
    return "".join(f"{h['name']},{h['address']} {h['host_key']}\n" for h in state["hosts"])


def inventory(state: dict[str, Any]) -> str:
    sd = Path(state["state_dir"])
    data = {
        "ssh_user": "root",
        "ssh_key": str(sd / "id_ed25519"),
        "ssh_known_hosts_file": str(sd / "known_hosts"),
        "ssh_strict_host_key_checking": "yes",
        "lab_name": state["name"],
        "lab_proxy_url": state["proxy_url"],
        "lab_repo_url": state["repo_url"],
        "lab_repo_key_path": state["repo_key_path"],
        "lab_repo_key_path_on_host": state["repo_key_path_on_host"],
    }
    hosts = [(h["name"], {"ssh_hostname": h["address"], **data, **_host_data(h)})
             for h in state["hosts"]]
    head, workers = hosts[:1], hosts[1:]
    return (
        f'"""pyinfra inventory of gpuhost lab {state["name"]!r} (written by tests/lab/lab up).\n\n'
        "Groups: lab_hosts (all), head (h1), workers (h2..hN).\n"
        '"""\n\n'
        f"lab_hosts = {hosts!r}\n"
        f"head = {head!r}\n"
        f"workers = {workers!r}\n"
    )


def _host_data(h: dict[str, Any]) -> dict[str, Any]:
    """Per-host data: ``gpuhost_profile`` (lab up --profile) and the emulated GPU (--gpu)."""
    data: dict[str, Any] = {}
    if h.get("profile"):
        data["gpuhost_profile"] = h["profile"]
    if h.get("gpu"):
        data["lab_gpu"] = f"{h['gpu'][0]}:{h['gpu'][1]}"
    return data
