"""The inventory data contract for deploys run by plain ``pyinfra INVENTORY deploys/X.py``: no
gpuhost loader runs in front of them, so the deploy file checks its host first."""

from __future__ import annotations

from pyinfra import host

from gpuhost.errors import ConfigError
from gpuhost.inventory.contract import check_host_data
from gpuhost.pyinfra_adapter import real_host


def host_data_ok() -> bool:
    """True when the current host's data keeps the contract; else one ``gpuhost: error:`` line,
    this host is failed (pyinfra goes on with the others) and False."""
    try:
        check_host_data(host.name, host.data.dict())
    except ConfigError as exc:
        print(f"gpuhost: error: {exc}", flush=True)
        host.state.fail_hosts({real_host(host)})
        return False
    return True
