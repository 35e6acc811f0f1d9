"""Provision the machine you are on (pyinfra's @local connector).

    curl -fsSL $REPO/3bf863cc.pub | sha256sum   # REPO below; compare with NVIDIA's published sum
    export GPUHOST_CUDA_KEY_SHA256=<that sum>
    sudo -E gpuhost provision inventories/local.py --dry  # look first: the plan, nothing changed
    sudo -E gpuhost provision inventories/local.py

Provision hardens SSH and the firewall by default (docs/harden.md). Hardening the machine you are
logged in to is refused unless the login user has an authorized SSH key, so this example opts out
(`gpuhost_harden: False`); set it to True once you have key login, or run `gpuhost harden` alone.
"""

import os

REPO = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"

hosts = [
    (
        "@local",
        {
            # a built-in profile (`gpuhost matrix profile list`) or one of gpuhost_profiles_file
            "gpuhost_profile": "nvidia-repo-580-cuda13.0",
            # GPUs in this machine, as nvidia-smi names them: the profile is checked against them
            "gpuhost_gpus": ["Tesla T4"],
            # the SSH and firewall hardening provision does by default: not on this machine
            "gpuhost_harden": False,
            # NVIDIA's CUDA repository; its key is checked against the SHA-256 you verified
            "gpuhost_cuda_repo_url": REPO,
            "gpuhost_cuda_repo_key": REPO + "3bf863cc.pub",
            "gpuhost_cuda_repo_key_sha256": os.environ.get("GPUHOST_CUDA_KEY_SHA256"),
        },
    )
]
