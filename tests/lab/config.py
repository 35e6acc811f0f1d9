"""Names, paths and environment variables of one lab.

Everything a lab creates on the machine is derived from its name here, so that several labs can run
at once and a crashed lab can be found and removed again from its name alone.
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_NAME = "lab"
NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,31}$")

#: machine-wide network range of all labs; a blackhole route keeps it on this machine
LAB_NET = "10.123.0.0/16"
LAB_NET_PREFIX = "10.123"
MAX_HOSTS = 200  # host i gets .10+i in its lab's /24
PROXY_PORT = 3142
REPO_PORT = 8088
#: where machine-wide lab state lives (subnet registry, saved sysctl, its lock)
RUN_DIR = Path(os.environ.get("GPUHOST_LAB_RUN", "/run/gpuhost-lab"))


class LabConfigError(Exception):
    """Bad lab name, host count or environment: one message, no traceback."""


def cache_dir() -> Path:
    """Cache that survives between runs on one machine (base image, apt-cacher-ng cache)."""
    return Path(os.environ.get("GPUHOST_LAB_CACHE", "/var/cache/gpuhost-lab"))


def state_root() -> Path:
    return Path(os.environ.get("GPUHOST_LAB_STATE", str(REPO_ROOT / ".lab")))


def default_name() -> str:
    return os.environ.get("GPUHOST_LAB", DEFAULT_NAME)


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise LabConfigError(
            f"lab name {name!r} is invalid: expected 1-32 characters of a-z, 0-9 and '-', "
            "starting with a letter or digit"
        )
    return name


@dataclass(frozen=True)
class LabNames:
    """Every name and path one lab uses on this machine."""

    name: str

    @property
    def tag(self) -> str:
        """Six hex digits of the name's hash: keeps interface names within 15 characters."""
        return hashlib.sha256(self.name.encode()).hexdigest()[:6]

    @property
    def bridge(self) -> str:
        return f"glb{self.tag}"  # 9 characters

    def veth(self, index: int) -> str:
        return f"glv{self.tag}{index}"  # at most 12 characters

    @property
    def netns_prefix(self) -> str:
        return f"gpuhost-{self.name}-"

    def netns(self, index: int) -> str:
        return f"{self.netns_prefix}h{index}"

    @property
    def cgroup(self) -> str:
        """Cgroup directory name under each hierarchy the lab uses."""
        return f"gpuhost-lab-{self.name}"

    @property
    def state_dir(self) -> Path:
        return state_root() / self.name

    @property
    def lock_path(self) -> Path:
        # machine-wide, like the netns/bridge/cgroup names: two checkouts of the repository
        # (e.g. /work/main and a CI clone) must never drive the same lab name at once
        return RUN_DIR / "locks" / f"{self.name}.lock"

    @property
    def hosts_dir(self) -> Path:
        return self.state_dir / "hosts"

    def host_dir(self, index: int) -> Path:
        return self.hosts_dir / f"h{index}"

    @property
    def acng_cache(self) -> Path:
        # apt-cacher-ng does not coordinate between processes, so each lab has its own cache
        return cache_dir() / "acng" / self.name


def host_name(index: int) -> str:
    return f"h{index}"


def subnet_address(index: int, host: int) -> str:
    """Address ``host`` (1 = the bridge, 10+i = host hi) in the lab subnet number ``index``."""
    return f"{LAB_NET_PREFIX}.{index}.{host}"
