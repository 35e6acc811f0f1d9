"""Provision GPU hosts to their profile's pinned stack.

    pyinfra INVENTORY deploys/provision.py          (same as: gpuhost provision INVENTORY)

Each host needs ``gpuhost_profile`` in its inventory data (see inventories/ and docs/provision.md).
SSH and the firewall are hardened too (``deploys/harden.py``'s deploy, run first) unless the host's
data says ``gpuhost_harden: false``.
"""

from gpuhost.deploys.provision import provision_or_stop
from gpuhost.inventory.deploy_check import host_data_ok

if host_data_ok():  # docs/inventory.md: bad inventory data stops this host before anything
    provision_or_stop()
