"""A fleet: one group per GPU generation; each group picks its profile in group_data/.

    gpuhost provision inventories/fleet.py --dry
    gpuhost provision inventories/fleet.py --limit gpu_a100

Host-level data overrides group data (pyinfra: host > group > all.py). Group data files live
in inventories/group_data/ (pass --group-data inventories/group_data to plain pyinfra).
"""

gpu_a100 = [
    "a100-01.example.internal",
    "a100-02.example.internal",
]

gpu_t4 = [
    "t4-01.example.internal",
    # one host on another profile than its group, e.g. while testing a newer driver:
    ("t4-02.example.internal", {"gpuhost_profile": "nvidia-repo-580-cuda12.9"}),
]
