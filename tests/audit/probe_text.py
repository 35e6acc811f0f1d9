"""Hand-made probe outputs for rule tests, in the probe's exact framing (see probe/sections.py).

``probe_output(sections)`` takes {name: stdout} or {name: (stdout, stderr, rc)}; sections not
given are absent from the output, as when a probe section is cut off.
"""

from __future__ import annotations

from pathlib import Path

from gpuhost.probe.script import MARK

CAPTURES = Path(__file__).resolve().parents[1] / "fixtures" / "captures"

CLEAN_DEBIAN = {
    "meta": "probe=1\nuid=0\nhost=h1\n",
    "os-release": 'ID=debian\nVERSION_ID="12"\nVERSION_CODENAME=bookworm\n',
    "uname": "6.1.0-56-amd64\nx86_64\n",
    "kernels": "link=boot/vmlinuz-6.1.0-56-amd64\nboot=6.1.0-56-amd64\nmodules=6.1.0-56-amd64\n",
    "secure-boot": "efi=no\n",
    "dkms": ("", "", 127),
    "pci": "",
    "modules": "",
    "proc-driver": ("", "cat: /proc/driver/nvidia/version: No such file or directory\n", 1),
    "nvidia-smi": ("", "", 127),
    "nvidia-smi-text": ("", "", 127),
    "dpkg": "",
    "rpm": ("", "", 127),
    "apt-holds": "",
    "dnf-versionlock": "",
    "apt-policy": "",
    "cuda": "",
    "nvcc": ("", "", 127),
    "cudnn": "",
    "nvidia-ctk": ("", "", 127),
    "container-runtimes": "",
    "fabricmanager": ("", "", 127),
    "services": "",
    "sshd": "passwordauthentication no\npermitrootlogin prohibit-password\nusepam yes\n"
    "kbdinteractiveauthentication no\n",
    "profile-marker": ("", "", 1),
    "firmware": "",  # no DMI tables, no RDMA adapter (a container or VM)
    "pythons": "python3\n",
    "python.0": '{"gpuhost_probe": 1, "python": "/usr/bin/python3", "python_version": "3.11.2", '
    '"torch": null, "cuda": null, "cudnn": null, "arch_list": [], "cuda_initialized": null, '
    '"error": null, "tensorflow": null, "tensorflow_error": null}\n',
}


def probe_output(sections: dict[str, object]) -> str:
    parts = []
    for name, value in sections.items():
        stdout, stderr, rc = value if isinstance(value, tuple) else (value, "", 0)
        parts.append(
            f"\n{MARK} begin {name}\n{stdout}\n{MARK} stderr {name}\n{stderr}\n{MARK} end {name} "
            f"{rc}\n"
        )
    return "".join(parts)


def host_with(**changes: object) -> str:
    """The clean Debian host with some sections replaced (keys use _ for -, e.g. nvidia_smi)."""
    sections = dict(CLEAN_DEBIAN)
    for key, value in changes.items():
        sections[key.replace("_", "-") if key != "python_0" else "python.0"] = value
    return probe_output(sections)


def capture(relative: str) -> str:
    """A real captured output (tests/fixtures/captures, sources in its INDEX.json)."""
    return (CAPTURES / relative).read_text(encoding="utf-8")
