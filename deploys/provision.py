"""Provision GPU hosts to their profile's pinned stack.

    pyinfra INVENTORY deploys/provision.py          (same as: gpuhost provision INVENTORY)

Each host needs ``gpuhost_profile`` in its inventory data (see inventories/ and docs/provision.md).
"""

from gpuhost.deploys.provision import provision_or_stop

provision_or_stop()
