"""Provision the machine you are on (pyinfra's @local connector).

    sudo gpuhost provision inventories/local.py --dry     # look first
    sudo gpuhost provision inventories/local.py
"""

hosts = [
    (
        "@local",
        {
            # a profile from `gpuhost matrix` / src/gpuhost/data/profiles.yaml
            "gpuhost_profile": "debian12-nonfree-535",
            # GPUs in this machine, as nvidia-smi names them: the profile is checked against them
            "gpuhost_gpus": ["Tesla T4"],
        },
    )
]
