"""NVSwitch presence from sysfs (no lspci needed): NVIDIA vendor 0x10de, PCI class 0x0680xx."""

from __future__ import annotations

NVIDIA_VENDOR = "0x10de"
BRIDGE_OTHER_CLASS = "0x0680"  # NVSwitches show up as "Bridge: other bridge device"
SYSFS_COMMAND = (
    'for d in /sys/bus/pci/devices/*; do [ -r "$d/class" ] || continue; '
    'printf "%s %s %s\\n" "${d##*/}" "$(cat "$d/vendor")" "$(cat "$d/class")"; done '
    "2>/dev/null; true"
)


def nvswitches(sysfs_listing: str) -> list[str]:
    """PCI addresses of NVSwitches in ``SYSFS_COMMAND`` output."""
    found = []
    for line in sysfs_listing.splitlines():
        cells = line.split()
        if len(cells) != 3:
            continue
        address, vendor, pci_class = cells
        if vendor.lower() == NVIDIA_VENDOR and pci_class.lower().startswith(BRIDGE_OTHER_CLASS):
            found.append(address)
    return found
