"""Files for the tools: a pyinfra inventory, an ssh_config with multiplexing, known_hosts."""

from __future__ import annotations

import hashlib
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
    hosts = [(h["name"], {"ssh_hostname": h["address"], **data, **_host_data(h, state)})
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


def _host_data(h: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """Per-host data: ``gpuhost_profile`` (lab up --profile) with what gpuhost needs to install
    an NVIDIA-repository profile from the lab's stand-in repository (``gpuhost_cuda_repo_url``,
    ``_key``, ``_key_sha256``; unused by Debian profiles), the emulated GPU (--gpu), and
    ``gpuhost_fabric_manager: true`` where the emulated board has NVSwitches (an 8-GPU HGX
    H100), as an operator's inventory for such a server says."""
    data: dict[str, Any] = {}
    if h.get("profile"):
        data["gpuhost_profile"] = h["profile"]
        key = Path(repo_key(state, h))
        data["gpuhost_cuda_repo_url"] = repo_url(state, h)
        data["gpuhost_cuda_repo_key"] = str(key)
        if key.is_file():
            data["gpuhost_cuda_repo_key_sha256"] = hashlib.sha256(key.read_bytes()).hexdigest()
    if h.get("os"):
        data["lab_os"] = h["os"]
        data["lab_repo_url"] = repo_url(state, h)
        data["lab_repo_key_path"] = repo_key(state, h)
    if h.get("gpu"):
        from .gpu import host_model

        name, count = h["gpu"][0], int(h["gpu"][1])
        data["lab_gpu"] = f"{name}:{count}"
        if h.get("profile") and host_model(name, count)["nvswitch_bus_ids"]:
            data["gpuhost_fabric_manager"] = True
    return data


def repo_url(state: dict[str, Any], h: dict[str, Any]) -> str:
    """The stand-in NVIDIA repository for the host's OS shape (debian12's for a Debian host or a
    lab state from before OS shapes)."""
    return str(state.get("repo_urls", {}).get(h.get("os") or "", state["repo_url"]))


def repo_key(state: dict[str, Any], h: dict[str, Any]) -> str:
    """The key (on this machine) of that repository: a shape with repositories of its own signs
    them with its own key (rocky-9: the lab's RPM key), the others with the lab's apt key."""
    return str(state.get("shapes", {}).get(h.get("os") or "", {}).get(
        "key_path", state["repo_key_path"]))
