"""RHEL-family lab hosts: the Rocky Linux 9 shape (``lab up N --os rocky-9``), test equipment.

No Rocky archive is reachable here, so the host is the lab's Debian 12 base image plus Debian's
real dnf 4.14 (libdnf 0.69, the same major code as RHEL 9's dnf), dnf-plugins-core 4.3 with the
versionlock plugin, rpm 4.18 and createrepo-c, dressed as Rocky 9:

* rpm keeps its database in /var/lib/rpm (``/etc/rpm/macros``; Debian's rpm defaults to
  ~/.rpmdb), initialised empty: the rpmdb holds only what dnf installs from the lab's stand-ins;
* RHEL 9's shipped ``/etc/dnf/dnf.conf`` (``best=True``, ``skip_if_unavailable=False``; Debian's
  defaults differ) with ``module_platform_id=platform:el9``; ``$releasever`` 9 from a
  rocky-release stand-in in the rpmdb (its ``system-release(releasever)``, as on Rocky);
* an empty ``/etc/dnf/plugins/versionlock.list`` (RHEL's python3-dnf-plugin-versionlock ships
  one; without it every dnf command fails: platforms.md section 3, finding 1);
* Rocky 9.6's ``/etc/os-release`` (``ID="rocky"``, ``PLATFORM_ID="platform:el9"``),
  ``/etc/redhat-release`` and ``/etc/rocky-release``;
* ``/etc/yum.repos.d/`` with Rocky's repository ids (baseos, appstream, extras enabled; crb
  disabled, as on a fresh Rocky 9) pointing at the lab's stand-ins (tests/lab/rpmrepo.py) on
  ``lab-gateway``; their key is the lab's per-lab RPM signing key, written per host where Rocky
  keeps its own (/etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-9) and EPEL's.

The base system stays dpkg-managed underneath (dpkg, apt and systemd are Debian's): the host is
Rocky-shaped to anything that asks the OS what it is, not to a program that looks for dpkg.
docs/testing.md ("Rocky-shaped hosts") says what this proves and what it cannot.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

from . import image, rpmrepo
from .config import REPO_PORT, LabConfigError, cache_dir
from .shapes import Shape
from .system import LabError, file_lock, run

#: Debian 12's packages that make the host RPM-shaped (dnf 4.14.0, dnf-plugins-core 4.3.1 with
#: versionlock, rpm 4.18.0, createrepo-c 0.17.3: platforms.md section 3)
PACKAGES = ["dnf", "dnf-plugins-core", "rpm", "createrepo-c"]

#: what this machine needs to build the stand-in repositories (Debian: rpm, createrepo-c)
TOOLS = ["rpmbuild", "rpmsign", "createrepo_c", "modifyrepo_c"]

ROCKY_RELEASE = "Rocky Linux release 9.6 (Blue Onyx)\n"
#: /usr/lib/os-release as Rocky Linux 9.6's rocky-release package ships it
OS_RELEASE = """\
NAME="Rocky Linux"
VERSION="9.6 (Blue Onyx)"
ID="rocky"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.6"
PLATFORM_ID="platform:el9"
PRETTY_NAME="Rocky Linux 9.6 (Blue Onyx)"
ANSI_COLOR="0;32"
LOGO="fedora-logo-icon"
CPE_NAME="cpe:/o:rocky:rocky:9::baseos"
HOME_URL="https://rockylinux.org/"
VENDOR_NAME="RESF"
VENDOR_URL="https://resf.org/"
BUG_REPORT_URL="https://bugs.rockylinux.org/"
SUPPORT_END="2032-05-31"
ROCKY_SUPPORT_PRODUCT="Rocky-Linux-9"
ROCKY_SUPPORT_PRODUCT_VERSION="9.6"
REDHAT_SUPPORT_PRODUCT="Rocky Linux"
REDHAT_SUPPORT_PRODUCT_VERSION="9.6"
"""
#: RHEL 9's shipped /etc/dnf/dnf.conf (dnf-data), plus the platform id modular filtering needs
DNF_CONF = """\
[main]
gpgcheck=1
installonly_limit=3
clean_requirements_on_remove=True
best=True
skip_if_unavailable=False
module_platform_id=platform:el9
"""
ROCKY_KEY = "/etc/pki/rpm-gpg/RPM-GPG-KEY-Rocky-9"
EPEL_KEY = "/etc/pki/rpm-gpg/RPM-GPG-KEY-EPEL-9"
GATEWAY_URL = f"http://lab-gateway:{REPO_PORT}"


def _repo(repo_id: str, name: str, path: str, enabled: bool) -> str:
    return (f"[{repo_id}]\nname={name}\nbaseurl={GATEWAY_URL}/{path}/\n"
            f"gpgcheck=1\nenabled={int(enabled)}\ncountme=1\nmetadata_expire=6h\n"
            f"gpgkey=file://{ROCKY_KEY}\n\n")


#: Rocky 9's repository ids (rocky.repo, rocky-extras.repo), served by the lab (rpmrepo.ROCKY)
ROCKY_REPOS = (
    _repo("baseos", "Rocky Linux $releasever - BaseOS", rpmrepo.ROCKY["baseos"], True)
    + _repo("appstream", "Rocky Linux $releasever - AppStream", rpmrepo.ROCKY["appstream"], True)
    + _repo("crb", "Rocky Linux $releasever - CRB", rpmrepo.ROCKY["crb"], False)
)
EXTRAS_REPO = _repo("extras", "Rocky Linux $releasever - Extras", rpmrepo.ROCKY["extras"], True)

FILES = {
    "usr/lib/os-release": OS_RELEASE,
    "etc/redhat-release": ROCKY_RELEASE,
    "etc/rocky-release": ROCKY_RELEASE,
    "etc/system-release": ROCKY_RELEASE,
    "etc/dnf/dnf.conf": DNF_CONF,
    "etc/dnf/plugins/versionlock.list": "",
    # Debian enables these two plugins; RHEL ships them in packages a fresh host does not have
    # (python3-dnf-plugin-local and -post-transaction-actions): "local" would copy every
    # installed package into an unsigned _dnf_local repository that gpgcheck then refuses
    "etc/dnf/plugins/local.conf": "[main]\nenabled = false\n",
    "etc/dnf/plugins/post-transaction-actions.conf": "[main]\nenabled = false\n",
    "etc/rpm/macros": "%_dbpath /var/lib/rpm\n",
    "etc/yum.repos.d/rocky.repo": ROCKY_REPOS,
    "etc/yum.repos.d/rocky-extras.repo": EXTRAS_REPO,
}
#: stand-ins of tests/lab/rpmrepo.py (baseos) registered in the image's rpmdb with --justdb:
#: Rocky's release package ($releasever) and bash (the /bin/sh of every RPM scriptlet)
PREINSTALLED = ["rocky-release", "bash"]
RECIPE: dict[str, Any] = {"base": image.recipe_hash(), "packages": PACKAGES, "files": FILES,
                          "preinstalled": PREINSTALLED}


def recipe_hash() -> str:
    return hashlib.sha256(json.dumps(RECIPE, sort_keys=True).encode()).hexdigest()[:16]


def root_path() -> Path:
    return cache_dir() / "roots" / f"rocky-9-{recipe_hash()}"


def ensure_root(base: Path) -> Path:
    """The Rocky-shaped image (a cached variant of the base ``base``), built once per recipe."""
    root = root_path()
    with file_lock(cache_dir() / "build.lock", "rocky-9 image build"):
        if not root.exists():
            _build(base, root)
    return root


def _build(base: Path, root: Path) -> None:
    partial = root.with_name(root.name + f".partial{os.getpid()}")
    image._log(f"building the rocky-9 image {root.name} from the base (dnf, rpm; once) ...")
    shutil.rmtree(partial, ignore_errors=True)
    try:
        run(["cp", "-a", "--reflink=auto", str(base), str(partial)], timeout=600)
        apt = ("apt-get -o Acquire::http::Proxy=false -o Acquire::Retries=3")
        run(["systemd-nspawn", "--quiet", "--register=no", "--keep-unit", "--resolv-conf=bind-host",
             "--timezone=off", "-E", "DEBIAN_FRONTEND=noninteractive", "-D", str(partial),
             "sh", "-c",
             f"{apt} -qq update && {apt} install -y -qq --no-install-recommends "
             f"{' '.join(PACKAGES)} >/dev/null && apt-get clean"], timeout=900)
        for rel, text in FILES.items():
            path = partial / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.is_symlink():
                path.unlink()
            path.write_text(text)
        os_release = partial / "etc/os-release"
        os_release.unlink(missing_ok=True)
        os_release.symlink_to("../usr/lib/os-release")
        for lists in (partial / "var/lib/apt/lists").glob("*"):
            if lists.is_file():
                lists.unlink()
        run(["chroot", str(partial), "rpm", "--initdb"])
        if not (partial / "var/lib/rpm").is_dir():
            raise LabError(f"rpm --initdb made no /var/lib/rpm in {partial}")
        _register(partial)
        partial.rename(root)
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def _register(root: Path) -> None:
    """PREINSTALLED in the image's rpmdb (their files are Debian's: --justdb)."""
    staged = root / "tmp/gpuhost-lab-rpms"
    staged.mkdir(parents=True)
    for rpm in (rpmrepo.cached_rpms() / "baseos").glob("*.rpm"):
        if rpm.name.rsplit("-", 2)[0] in PREINSTALLED:
            shutil.copyfile(rpm, staged / rpm.name)
    names = sorted(p.name for p in staged.iterdir())
    if len(names) != len(PREINSTALLED):
        raise LabError(f"stand-ins {PREINSTALLED} not all built: {names}")
    run(["chroot", str(root), "rpm", "-i", "--justdb", "--nosignature", "--nodeps",
         *(f"/tmp/gpuhost-lab-rpms/{n}" for n in names)])
    shutil.rmtree(staged)


def _prepare(state: dict[str, Any], served: Path) -> dict[str, Any]:
    """The signed stand-in RPM repositories under the lab's served folder (rpmrepo.build)."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise LabConfigError(f"--os rocky-9 needs these host tools: {', '.join(missing)} "
                             "(scripts/test installs them: rpm createrepo-c)")
    record = rpmrepo.build(served, state["gateway"])
    return {**record, "repo_url": record["cuda_rhel9_url"]}


def _host_files(state: dict[str, Any]) -> dict[str, str | bytes]:
    """The lab's RPM signing key where Rocky and EPEL keep theirs (the repo files name them)."""
    key = Path(state["shapes"]["rocky-9"]["key_path"]).read_bytes()
    return {ROCKY_KEY: key, EPEL_KEY: key}


SHAPES = [
    Shape("rocky-9", "Rocky Linux 9 (dnf 4.14, rpm, versionlock, modules) on the Debian 12 base",
          "rhel9", host_files=_host_files, image=ensure_root, apt=False, prepare=_prepare),
]
