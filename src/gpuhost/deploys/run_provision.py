"""On-disk pyinfra deploy used by ``gpuhost provision`` (``pyinfra INVENTORY <this file>``)."""

from gpuhost.deploys.provision import provision_or_stop

provision_or_stop()
