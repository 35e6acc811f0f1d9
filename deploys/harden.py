"""pyinfra deploy: harden SSH and add the gpuhost firewall (``inet gpuhost`` nftables table).

    pyinfra -y INVENTORY deploys/harden.py        # or: gpuhost harden INVENTORY

Inventory data keys (``gpuhost_ssh_*``, ``gpuhost_firewall_*``) are described in docs/harden.md.
Every lockout check runs before anything changes; with plain pyinfra a refused host stops the
whole run before any change, ``gpuhost harden`` reports it and goes on with the other hosts.
"""

from gpuhost.deploys.harden import harden
from gpuhost.inventory.deploy_check import host_data_ok

if host_data_ok():  # docs/inventory.md: bad inventory data stops this host before anything
    harden()
