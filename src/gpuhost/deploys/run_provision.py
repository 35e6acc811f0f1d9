"""On-disk pyinfra deploy ``gpuhost upgrade`` runs on a host after its snapshot, drain and
unhold: provision with the target profile, the driver allowed to change (``gpuhost provision``
and ``deploys/provision.py`` refuse that; see docs/provision.md)."""

from gpuhost.deploys.provision import provision_or_stop

provision_or_stop(allow_driver_change=True)
