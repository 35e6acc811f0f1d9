"""Pure helpers for the validation checks in ``checks/`` (pytest-testinfra).

Each module turns command output or inventory data into plain results; the checks run the
commands on a host and assert on these results. Nothing here touches a host.

- ``inventory``: pyinfra inventory hosts → testinfra host specs and an ssh_config
- ``expected``: the host's profile (inventory data or the provision marker) → what it must have
- ``gpu``: nvidia-smi report → problems with persistence, clocks, ECC, pages, rows, PCIe
- ``packages``: dpkg/apt-mark output → packages off the profile's versions or not held
- ``xid``: kernel log → Xid events, judged with the codes in ``xid_codes.yaml``
- ``pci``: NVSwitch presence from sysfs
- ``smoke``: the smoke test's verdicts → what fails the functional check
- ``stress``: ``dcgmi diag --json`` and ``nvbandwidth -j`` results → failures
"""
