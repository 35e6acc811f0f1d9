"""Run ``gpuhost.deploys.provision`` on lab hosts through pyinfra's API and report, per host,
which operations changed something (the assertions read pyinfra's own results)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pyinfra.api import Config, Inventory, State
from pyinfra.api.connect import connect_all
from pyinfra.api.deploy import add_deploy
from pyinfra.api.operations import run_ops

from gpuhost.deploys import provision
from gpuhost.pyinfra_adapter import forget_cached_host_keys

LAB_PROFILES = str(Path(__file__).parent / "data" / "lab_repo_profiles.yaml")


def ssh_data(lab: Any, host: Any) -> dict[str, Any]:
    return {
        "ssh_hostname": host.address,
        "ssh_user": "root",
        "ssh_key": str(lab.key_path),
        "ssh_known_hosts_file": str(lab.known_hosts_path),
        "ssh_strict_host_key_checking": "yes",
    }


def repo_data(lab: Any) -> dict[str, Any]:
    key = lab.repo_key_path
    return {
        "gpuhost_profiles_file": LAB_PROFILES,
        "gpuhost_cuda_repo_url": lab.repo_url,
        "gpuhost_cuda_repo_key": str(key),
        "gpuhost_cuda_repo_key_sha256": hashlib.sha256(key.read_bytes()).hexdigest(),
    }


def run_provision(hosts: list[tuple[str, dict[str, Any]]]) -> dict[str, dict[str, bool]]:
    """{host: {operation name: changed}} after one provision run; raises on a failed host."""
    forget_cached_host_keys()  # lab hosts are re-keyed by resets during this test session
    state = State(Inventory((hosts, {})), Config())
    connect_all(state)
    add_deploy(state, provision)
    run_ops(state)
    if state.failed_hosts:
        raise AssertionError(f"failed hosts: {sorted(h.name for h in state.failed_hosts)}")
    results: dict[str, dict[str, bool]] = {}
    for host in state.inventory:
        changes = {}
        for op_hash, op_data in state.ops[host].items():
            name = ", ".join(sorted(state.op_meta[op_hash].names))
            changes[name] = op_data.operation_meta.did_change()
        results[host.name] = changes
    return results


def write_inventory(path: Path, hosts: list[tuple[str, dict[str, Any]]]) -> Path:
    """A pyinfra inventory file (for ``gpuhost provision`` / ``run_deploy``) with these hosts."""
    path.write_text(f'"""lab hosts for a provision test."""\n\nhosts = {hosts!r}\n')
    return path


def lab_profiles_with(path: Path, extra: dict[str, dict[str, Any]]) -> Path:
    """The lab profiles file plus ``extra`` profiles ({name: profile}), written to ``path``."""
    import yaml

    data = yaml.safe_load(Path(LAB_PROFILES).read_text())
    data["profiles"].update(extra)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
