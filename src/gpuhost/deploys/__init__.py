"""Packaged pyinfra deploys: call them from your own deploy files.

``provision`` composes them all (and ``gpuhost.deploys.harden.harden``, first, unless
``gpuhost_harden: false``); each takes the host's resolved ``DesiredState`` and ``PackagePlan``
(``gpuhost.deploys.provision.resolve_host()``).
"""

from gpuhost.deploys.gpu import configure_environment, configure_gpu_clocks, configure_persistence
from gpuhost.deploys.nvidia import (
    install_container_toolkit,
    install_cuda,
    install_cudnn,
    install_driver,
)
from gpuhost.deploys.provision import provision, provision_or_stop, resolve_host

__all__ = [
    "configure_environment",
    "configure_gpu_clocks",
    "configure_persistence",
    "install_container_toolkit",
    "install_cuda",
    "install_cudnn",
    "install_driver",
    "provision",
    "provision_or_stop",
    "resolve_host",
]
