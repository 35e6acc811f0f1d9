"""The sysfs firmware parser (gpuhost.parsers.firmware) on the files' real formats.

Sources of the values: the kernel's formats are drivers/firmware/dmi-id.c (bios_version and
bios_date, mode 0444, one line each) and Documentation/ABI/stable/sysfs-class-infiniband
("fw_ver: (RO) Display firmware version"). The DMI lines are `grep . /sys/class/dmi/id/*` outputs
quoted in public reports (an ASUS TP412UA laptop: bios_date 07/25/2019, bios_version TP412UA.308;
a VirtualBox guest: 12/01/2006, VirtualBox). The adapter versions are the `fw_ver` that
`ibv_devinfo` shows for the same attribute in tests/fixtures/fabric/ibv-devinfo-deepep-55.txt
(mlx5_3: 28.37.1700) and -60.txt (22.38.1900, 28.39.2048).
"""

from __future__ import annotations

import pytest

from gpuhost.errors import ParseError
from gpuhost.parsers.firmware import SysfsFirmware, parse_firmware_files, sysfs_value

REAL = (
    "/sys/class/dmi/id/bios_version:TP412UA.308\n"
    "/sys/class/dmi/id/bios_date:07/25/2019\n"
    "/sys/class/infiniband/mlx5_3/fw_ver:28.37.1700\n"
    "/sys/class/infiniband/mlx5_12/fw_ver:22.38.1900\n"
)


def test_bios_and_every_adapter_are_read() -> None:
    found = parse_firmware_files(REAL)
    assert found.bios_version == "TP412UA.308"
    assert found.bios_date == "07/25/2019"
    assert found.hca == {"mlx5_12": "22.38.1900", "mlx5_3": "28.37.1700"}
    assert found.to_dict()["hca"]["mlx5_3"] == "28.37.1700"


def test_missing_files_leave_the_values_unknown() -> None:
    # a VM or container without DMI tables and without RDMA adapters: grep prints nothing
    assert parse_firmware_files("") == SysfsFirmware()
    only_hca = parse_firmware_files("/sys/class/infiniband/mlx5_0/fw_ver:28.39.2048\n")
    assert only_hca.bios_version is None and only_hca.bios_date is None
    assert only_hca.hca == {"mlx5_0": "28.39.2048"}


def test_a_value_with_a_colon_and_padding_is_kept_whole() -> None:
    found = parse_firmware_files("/sys/class/dmi/id/bios_version:VirtualBox  \n")
    assert found.bios_version == "VirtualBox"
    found = parse_firmware_files("/sys/class/dmi/id/bios_version:1.2: rev A\n")
    assert found.bios_version == "1.2: rev A"


@pytest.mark.parametrize(
    "text",
    [
        "bios_version:1.0\n",
        "/sys/class/dmi/id/product_serial:ABC\n",
        "/sys/class/infiniband/mlx5_0/ports/1/state:4: ACTIVE\n",
        "grep: /sys/class/dmi/id/bios_version: Permission denied\n",
    ],
)
def test_other_lines_are_refused_with_the_line(text: str) -> None:
    with pytest.raises(ParseError, match="fw_ver:VALUE lines, found"):
        parse_firmware_files(text)


def test_one_sysfs_file() -> None:
    assert sysfs_value("28.39.2048\n") == "28.39.2048"
    assert sysfs_value("\n") is None
    with pytest.raises(ParseError, match="found 2 lines"):
        sysfs_value("1\n2\n")
    with pytest.raises(ParseError):
        sysfs_value("\x00\x01binary")
