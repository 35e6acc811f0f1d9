"""Provision the machine you are on (pyinfra's @local connector).

    sudo gpuhost provision inventories/local.py --dry     # look first: the plan, nothing changed
    sudo gpuhost provision inventories/local.py

Provision hardens SSH and the firewall by default (docs/harden.md). Hardening the machine you are
logged in to is refused unless the login user has an authorized SSH key, so this example opts out
(`gpuhost_harden: False`); set it to True once you have key login, or run `gpuhost harden` alone.
"""

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
        },
    )
]
