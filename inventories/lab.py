"""The test lab's hosts (tests/lab): `tests/lab/lab --name prov up 2` writes
.lab/<name>/inventory.py; this example gives them profiles.

    GPUHOST_LAB=prov gpuhost provision inventories/lab.py --dry
"""

import hashlib
import os
import pathlib

_lab = os.environ.get("GPUHOST_LAB", "lab")
_ns: dict = {}
exec(pathlib.Path(f".lab/{_lab}/inventory.py").read_text(), _ns)
_hosts = _ns["lab_hosts"]


def _repo(data: dict) -> dict:
    key = data["lab_repo_key_path"]
    return {
        "gpuhost_cuda_repo_url": data["lab_repo_url"],
        "gpuhost_cuda_repo_key": key,
        "gpuhost_cuda_repo_key_sha256": hashlib.sha256(pathlib.Path(key).read_bytes()).hexdigest(),
        "gpuhost_profiles_file": "tests/integration/data/lab_repo_profiles.yaml",
    }


# h1: the real Debian driver; h2..: the NVIDIA-repository layout with stand-in packages
debian_nonfree = [
    (name, dict(data, gpuhost_profile="debian12-nonfree-535-security", gpuhost_install_cuda=False))
    for name, data in _hosts[:1]
]
nvidia_repo = [
    (name, dict(data, gpuhost_profile="lab-nvidia-repo-550", **_repo(data)))
    for name, data in _hosts[1:]
]
