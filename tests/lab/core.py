"""Bring a lab up, tear it down, report its health and reset single hosts.

A lab named NAME owns, and only ever touches:
  state dir   <GPUHOST_LAB_STATE or repo/.lab>/NAME/  (the hosts' overlay uppers inside, on disk;
              on a tmpfs only where that file system cannot hold them, see hosts_storage)
  network     bridge glb<tag>, veths glv<tag><i>, netns gpuhost-NAME-h<i>, subnet 10.123.<k>.0/24
  cgroups     gpuhost-lab-NAME/ in each cgroup hierarchy nspawn uses (hosts and services)
  processes   systemd-nspawn per host, apt-cacher-ng and the repository's http.server, all inside
              those cgroups; ssh multiplexing masters using its ssh_config
The only machine-wide things (blackhole route for 10.123.0.0/16, fs.inotify.max_user_instances)
are shared through registry.py.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from . import aptrepo, image, registry, shapes, toolfiles
from .config import (
    DEFAULT_NAME,
    MAX_HOSTS,
    PROXY_PORT,
    REPO_PORT,
    LabConfigError,
    LabNames,
    check_name,
    host_name,
    state_root,
    subnet_address,
)
from .system import (
    LabError,
    cgroup_enter,
    cgroup_exists,
    cgroup_pids,
    cgroup_remove,
    fs_type,
    link_exists,
    links_with_prefix,
    mounts_under,
    netns_list,
    pid_alive,
    read_pid,
    run,
    signal_pids,
    unmount_all,
    wait_gone,
)

REQUIRED_TOOLS = ["systemd-nspawn", "debootstrap", "apt-cacher-ng", "zstd", "ip", "ssh",
                  "ssh-keygen", "dpkg-deb", "apt-ftparchive", "gpg", "nsenter"]
REPO_KEY_ON_HOST = "/usr/share/keyrings/gpuhost-lab-repo.gpg"
BOOT_TIMEOUT_S = 60.0
# Debian 12's apt (2.6.x) can wait forever after a transient download failure: the retry is
# re-queued with a delay behind index files that were queued meanwhile, and apt's main loop only
# looks at the head of a host's queue, so nothing is ever sent again (the http method idles on
# stdin, no timeout applies).  Upstream fixed it in apt 3.0.3/3.1.3 ("Fix stuck acquire queues on
# partial server errors", LP: #2003851); bookworm's 2.6.y has no fix.  Retrying at once keeps the
# retried item dispatchable.  apt-cacher-ng 3.7.4 produces such transient failures: it cuts a
# response after its headers when concurrent clients make it replace a cached index file.
# docs/testing.md ("apt in lab hosts") has the evidence.
APT_RETRY_NOW = 'Acquire::Retries::Delay "false";\n'
# Runs systemd-nspawn again while it exits 133 (the container rebooted), as systemd-nspawn@.service
# does with RestartForceExitStatus=133: same overlay root, same netns.  nspawn.pid always holds
# the current nspawn's PID, so stopping a host (SIGTERM to it, exit != 133) ends the loop too.
# $1 pid file, $2 machine name (its nspawn runtime dirs are removed between boots), $3... nspawn.
NSPAWN_LOOP = (
    'pidfile=$1 machine=$2; shift 2; '
    'while :; do "$@" & echo $! > "$pidfile"; wait $!; rc=$?; '
    '[ $rc -eq 133 ] || exit $rc; echo "lab: container rebooted (nspawn exit 133), booting again"; '
    'rm -rf "/run/systemd/nspawn/propagate/$machine" "/run/systemd/nspawn/unix-export/$machine"; '
    'done'
)


def log(msg: str) -> None:
    print(f"lab: {msg}", file=sys.stderr, flush=True)


def preflight() -> None:
    """Raise LabConfigError unless this process can run a lab (root, Linux, tools present)."""
    if platform.system() != "Linux":
        raise LabConfigError(f"the lab needs Linux (this is {platform.system()})")
    if os.geteuid() != 0:
        raise LabConfigError("the lab needs root (systemd-nspawn, network namespaces, mounts)")
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None
               and not Path("/usr/sbin", t).exists()]
    if missing:
        raise LabConfigError(
            "the lab needs these host tools: " + ", ".join(missing)
            + " (scripts/test installs them: debootstrap systemd-container apt-cacher-ng zstd "
            "iproute2 openssh-client gnupg dpkg-dev apt-utils)"
        )


# ------------------------------------------------------------------ per-lab lock (re-entrant)

_held: dict[str, tuple[int, int]] = {}  # lock path -> (fd, depth)


@contextlib.contextmanager
def lab_lock(names: LabNames, timeout: float = 600, wait: bool = True) -> Iterator[None]:
    """Exclusive lock of one lab; re-entrant within a process (the pytest session holds it)."""
    key = str(names.lock_path)
    if key in _held:
        fd, depth = _held[key]
        _held[key] = (fd, depth + 1)
        try:
            yield
        finally:
            fd, depth = _held[key]
            _held[key] = (fd, depth - 1)
        return
    names.lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(names.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if not wait or time.monotonic() > deadline:
                os.close(fd)
                raise LabError(
                    f"lab {names.name!r} is busy: another lab command or pytest session holds "
                    f"{names.lock_path}; use another name (GPUHOST_LAB=<name> or --name)"
                ) from None
            time.sleep(0.2)
    _held[key] = (fd, 1)
    try:
        yield
    finally:
        fd, depth = _held.pop(key)
        os.close(fd)


# ------------------------------------------------------------------ the lab


class LabManager:
    """Operations on the lab ``name`` (see the module docstring for what it owns)."""

    def __init__(self, name: str = DEFAULT_NAME) -> None:
        self.names = LabNames(check_name(name))
        self.name = name
        self.sd = self.names.state_dir

    # ---------------------------------------------------------------- state file

    @property
    def state_path(self) -> Path:
        return self.sd / "lab.json"

    def load(self) -> dict[str, Any] | None:
        try:
            data: dict[str, Any] = json.loads(self.state_path.read_text())
            return data
        except (OSError, ValueError):
            return None

    def _save(self, state: dict[str, Any]) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2) + "\n")
        tmp.rename(self.state_path)
        files = {
            "inventory.py": toolfiles.inventory(state),
            "ssh_config": toolfiles.ssh_config(state),
            "known_hosts": toolfiles.known_hosts(state),
        }
        for fname, text in files.items():
            (self.sd / fname).write_text(text)
            if self.name == DEFAULT_NAME and self.sd.parent == state_root():
                # the default lab's files also live at .lab/<file> (what the issue names)
                (state_root() / fname).write_text(text)

    # ---------------------------------------------------------------- up

    def up(self, count: int, gpu: list[tuple[str, int]] | None = None,
           profile: str | None = None, os_key: str | None = None) -> dict[str, Any]:
        """Make the lab run exactly hosts h1..h<count>; returns the state (see lab.json).

        ``gpu``: emulated GPUs (model, count) for every host (one entry) or per host (one entry
        a host); ``profile``: inventory data ``gpuhost_profile`` of every host; ``os_key``: the OS
        shape of every host (tests/lab/shapes.py).  A running host whose GPU, profile or OS
        differs from the one asked is re-created (tests/lab/gpu)."""
        if gpu and len(gpu) not in (1, count):
            raise LabConfigError(f"--gpu given {len(gpu)} times: expected once or {count} times")
        if not 1 <= count <= MAX_HOSTS:
            raise LabConfigError(f"host count {count} is out of range: expected 1..{MAX_HOSTS}")
        if os_key is not None:
            shapes.get(os_key)
        preflight()
        with lab_lock(self.names):
            t0 = time.monotonic()
            base = image.ensure_base()
            state = self.load()
            if state is None or not self._infra_alive(state):
                if state is not None or self._leftovers():
                    log(f"lab {self.name!r}: cleaning leftovers of an earlier run first")
                self.down()
                state = self._infra_up()
            running = {h["index"] for h in state["hosts"] if self._host_alive(h)}
            shape = {i: self._shape(state, i, gpu, profile, os_key) for i in range(1, count + 1)}
            shapes.prepare({s["os"] for s in shape.values()}, state, self.sd / "repo")
            running -= {h["index"] for h in state["hosts"]
                        if h["index"] in shape and _host_shape(h) != shape[h["index"]]}
            for h in [h for h in state["hosts"] if h["index"] > count]:
                self._host_stop(h)
            state["hosts"] = [h for h in state["hosts"] if h["index"] <= count]
            wanted = [i for i in range(1, count + 1) if i not in running]
            by_index = {h["index"]: h for h in state["hosts"]}
            for i in wanted:
                if i in by_index:
                    self._host_stop(by_index[i])
                by_index[i] = self._host_record(state, i)
                by_index[i].update(shape[i])
            state["hosts"] = [by_index[i] for i in sorted(by_index)]
            self._save(state)
            for i in wanted:
                self._host_start(state, by_index[i], base)
            self._wait_ready(state, [by_index[i] for i in wanted])
            self._attach_gpus([by_index[i] for i in wanted])
            log(f"lab {self.name!r}: {count} hosts up in {time.monotonic() - t0:.1f} s; "
                f"inventory {self.sd / 'inventory.py'}")
            return state

    def _leftovers(self) -> list[str]:
        """Everything of this lab that exists on the machine (empty when fully down)."""
        n = self.names
        found = [f"mount {m}" for m in mounts_under(self.sd)]
        found += [f"netns {ns}" for ns in netns_list() if ns.startswith(n.netns_prefix)]
        found += [f"link {ln}" for ln in links_with_prefix(f"glv{n.tag}")]
        if link_exists(n.bridge):
            found.append(f"bridge {n.bridge}")
        found += [f"process {p}" for p in cgroup_pids(n.cgroup)]
        found += [f"process {p} (ssh master)" for p in self._ssh_master_pids()]
        found += [f"cgroup {c}" for c in cgroup_exists(n.cgroup)]
        return found

    def _infra_alive(self, state: dict[str, Any]) -> bool:
        return (
            link_exists(self.names.bridge)
            and all(pid_alive(p) for p in (state.get("proxy_pid", 0), state.get("repo_pid", 0)))
            and (bool(mounts_under(self.names.hosts_dir))
                 if state.get("hosts_storage", "tmpfs") == "tmpfs"
                 else self.names.hosts_dir.is_dir())
        )

    def _spawn_service(self, cmd: list[str], logname: str, cwd: Path | None = None) -> int:
        cg = f"{self.names.cgroup}/services"
        with open(self.sd / logname, "ab") as out:
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, cwd=cwd,
                start_new_session=True, preexec_fn=lambda: cgroup_enter(cg),
            )
        return proc.pid

    def _spawn_proxy(self) -> int:
        acng_bin = shutil.which("apt-cacher-ng") or "/usr/sbin/apt-cacher-ng"
        return self._spawn_service([acng_bin, "-c", str(self.sd / "acng")], "acng.log")

    def restart_proxy(self) -> None:
        """Restart the lab's apt-cacher-ng: it forgets which indexes it checked recently, as a
        new lab's proxy on an old cache does (tests/lab/aptstress.py uses it)."""
        with lab_lock(self.names):
            state = self.load()
            if state is None:
                raise LabError(f"lab {self.name!r} is not up")
            old = [p for p in [state["proxy_pid"]] if pid_alive(p) and _comm(p) == "apt-cacher-ng"]
            signal_pids(old, signal.SIGTERM)
            wait_gone(old, 10)
            state["proxy_pid"] = self._spawn_proxy()
            _wait_port(state["gateway"], PROXY_PORT, 10, lambda: (self.sd / "acng.log",))
            self._save(state)

    def _infra_up(self) -> dict[str, Any]:
        sd, n = self.sd, self.names
        index = registry.acquire(self.name, sd)
        gw = subnet_address(index, 1)
        sd.mkdir(parents=True, exist_ok=True)
        (sd / "mux").mkdir(exist_ok=True)
        n.hosts_dir.mkdir(exist_ok=True)
        storage = hosts_storage(n.hosts_dir)
        if storage == "tmpfs":
            run(["mount", "-t", "tmpfs", "-o", "mode=0755", f"gpuhost-lab-{self.name}",
                 str(n.hosts_dir)])
        key = sd / "id_ed25519"
        if not key.exists():
            run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"gpuhost-lab-{self.name}",
                 "-f", str(key)])
        run(["ip", "link", "add", n.bridge, "type", "bridge"])
        run(["ip", "addr", "add", f"{gw}/24", "dev", n.bridge])
        run(["ip", "link", "set", n.bridge, "up"])
        # apt-cacher-ng, bound to the bridge address only, with its own cache for this lab
        acng = sd / "acng"
        acng.mkdir(exist_ok=True)
        n.acng_cache.mkdir(parents=True, exist_ok=True)
        (acng / "acng.conf").write_text(
            f"CacheDir: {n.acng_cache}\nLogDir: {sd / 'acng'}\n"
            "SupportDir: /usr/lib/apt-cacher-ng\n"
            f"BindAddress: {gw}\nPort: {PROXY_PORT}\nSocketPath: {acng / 'socket'}\n"
            f"PidFile: {acng / 'pid'}\nForeGround: 1\nExThreshold: 4\n"
            # index files younger than this are served without asking upstream: fewer refreshes
            # racing each other when many hosts run apt update at once
            "FreshIndexMaxAge: 300\n"
            "Remap-secdeb: security.debian.org deb.debian.org/debian-security ; "
            "deb.debian.org/debian-security\n"
        )
        proxy_pid = self._spawn_proxy()
        # the NVIDIA-layout repository of empty stand-ins, served by http.server on the bridge
        arch = run(["dpkg", "--print-architecture"]).stdout.strip()
        repo_root = sd / "repo"
        repos = shapes.build_repos(repo_root, arch)  # NVIDIA's repository for each OS shape
        repo_dir = repos[shapes.DEFAULT]
        repo_pid = self._spawn_service(
            [sys.executable, "-m", "http.server", "--bind", gw, str(REPO_PORT)], "repo.log",
            cwd=repo_root,
        )
        for port in (PROXY_PORT, REPO_PORT):
            _wait_port(gw, port, 10, lambda: (self.sd / "acng.log", self.sd / "repo.log"))
        rel = repo_dir.relative_to(repo_root)
        return {
            "name": self.name,
            "state_dir": str(sd),
            "subnet_index": index,
            "gateway": gw,
            "proxy_url": f"http://{gw}:{PROXY_PORT}",
            "repo_url": f"http://{gw}:{REPO_PORT}/{rel}/",
            "repo_urls": {key: f"http://{gw}:{REPO_PORT}/{path.relative_to(repo_root)}/"
                          for key, path in repos.items()},
            "repo_key_url": f"http://{gw}:{REPO_PORT}/{aptrepo.KEY_NAME}.gpg",
            "repo_key_path": str(repo_root / f"{aptrepo.KEY_NAME}.gpg"),
            "repo_key_path_on_host": REPO_KEY_ON_HOST,
            "hosts_storage": storage,
            "proxy_pid": proxy_pid,
            "repo_pid": repo_pid,
            "hosts": [],
        }

    # ---------------------------------------------------------------- hosts

    def _host_record(self, state: dict[str, Any], i: int) -> dict[str, Any]:
        hd = self.names.host_dir(i)
        shutil.rmtree(hd, ignore_errors=True)
        (hd / "key").mkdir(parents=True)
        keyfile = hd / "key" / "ssh_host_ed25519_key"
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"root@{host_name(i)}",
             "-f", str(keyfile)])
        pub = keyfile.with_suffix(".pub").read_text().split()
        return {
            "index": i,
            "name": host_name(i),
            "address": subnet_address(state["subnet_index"], 10 + i),
            "netns": self.names.netns(i),
            "veth": self.names.veth(i),
            "machine": f"gl-{self.name}-{host_name(i)}",
            "machine_id": uuid.uuid4().hex,
            "host_key": f"{pub[0]} {pub[1]}",
        }

    def _host_start(self, state: dict[str, Any], h: dict[str, Any], base: Path) -> None:
        hd = self.names.host_dir(h["index"])
        upper, work, root = hd / "upper", hd / "work", hd / "root"
        for d in (upper, work, root):
            shutil.rmtree(d, ignore_errors=True)
            d.mkdir()
        lower = shapes.get(h.get("os")).root(base)
        run(["mount", "-t", "overlay", "overlay", "-o",
             f"lowerdir={lower},upperdir={upper},workdir={work}", str(root)])
        self._write_host_files(state, h, root)
        ns, veth = h["netns"], h["veth"]
        if ns in netns_list():
            run(["ip", "netns", "del", ns], check=False)
        if link_exists(veth):
            run(["ip", "link", "del", veth], check=False)
        run(["ip", "netns", "add", ns])
        # a stable MAC per host: a re-created host keeps its address and MAC, so the machine's
        # neighbour cache stays right (otherwise SSH hangs until the stale entry expires)
        run(["ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns,
             "address", _mac(self.names.tag, h["index"])])
        run(["ip", "neigh", "flush", "to", h["address"], "dev", self.names.bridge], check=False)
        run(["ip", "link", "set", veth, "master", self.names.bridge, "up"])
        run(["ip", "-n", ns, "addr", "add", f"{h['address']}/24", "dev", "eth0"])
        run(["ip", "-n", ns, "link", "set", "eth0", "up"])
        run(["ip", "-n", ns, "link", "set", "lo", "up"])
        cg = f"{self.names.cgroup}/{h['name']}"
        pidfile = hd / "nspawn.pid"
        pidfile.unlink(missing_ok=True)
        with open(hd / "console.log", "wb") as out:
            subprocess.Popen(
                ["sh", "-c", NSPAWN_LOOP, "nspawn-loop", str(pidfile), h["machine"],
                 "systemd-nspawn", "--boot", "--quiet", "-D", str(root), "-M", h["machine"],
                 f"--hostname={h['name']}", f"--uuid={h['machine_id']}", "--register=no",
                 "--keep-unit", "--console=pipe", "--resolv-conf=off", "--timezone=off",
                 "--link-journal=no", f"--network-namespace-path=/run/netns/{ns}",
                 "--capability=CAP_NET_ADMIN"],  # nftables, inside the host's own netns
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=lambda: cgroup_enter(cg),
            )
        deadline = time.monotonic() + 10
        while read_pid(pidfile) is None and time.monotonic() < deadline:
            time.sleep(0.01)

    def _write_host_files(self, state: dict[str, Any], h: dict[str, Any], root: Path) -> None:
        hd = self.names.host_dir(h["index"])
        (root / "etc/hostname").write_text(h["name"] + "\n")
        (root / "etc/machine-id").write_text(h["machine_id"] + "\n")
        others = "".join(f"{x['address']}\t{x['name']}\n" for x in state["hosts"])
        (root / "etc/hosts").write_text(
            f"127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
            f"{state['gateway']}\tlab-gateway\n{others}"
        )
        for suffix in ("", ".pub"):
            src = hd / "key" / f"ssh_host_ed25519_key{suffix}"
            dst = root / "etc/ssh" / src.name
            shutil.copyfile(src, dst)
            dst.chmod(0o600 if not suffix else 0o644)
        ssh_dir = root / "root/.ssh"
        ssh_dir.mkdir(mode=0o700, exist_ok=True)
        auth = ssh_dir / "authorized_keys"
        shutil.copyfile(self.sd / "id_ed25519.pub", auth)
        auth.chmod(0o600)
        # the key of the stand-in repository, where a cuda-keyring package would put it
        shutil.copyfile(state["repo_key_path"], root / REPO_KEY_ON_HOST.lstrip("/"))
        (root / "etc/apt/apt.conf.d/01lab-proxy").write_text(
            f'Acquire::http::Proxy "{state["proxy_url"]}";\n'
            f'Acquire::http::Proxy::{state["gateway"]} "DIRECT";\n'
            'Acquire::http::Proxy::lab-gateway "DIRECT";\n'
            # a stuck proxy connection becomes a retry instead of a hung deploy
            'Acquire::http::Timeout "30";\nAcquire::Retries "5";\n'
            + APT_RETRY_NOW
        )
        shapes.get(h.get("os")).apply(root, state)

    def _host_alive(self, h: dict[str, Any]) -> bool:
        pid = read_pid(self.names.host_dir(h["index"]) / "nspawn.pid")
        return pid is not None and pid_alive(pid) and h["netns"] in netns_list()

    def _host_stop(self, h: dict[str, Any]) -> None:
        """Power a host off (SIGTERM to nspawn), then remove its mounts, netns and cgroup."""
        hd = self.names.host_dir(h["index"])
        cg = f"{self.names.cgroup}/{h['name']}"
        pid = read_pid(hd / "nspawn.pid")
        if pid is not None and pid_alive(pid):
            signal_pids([pid], signal.SIGTERM)
            wait_gone([pid], 10)
        _kill_cgroup(cg)
        unmount_all(hd)
        if h["netns"] in netns_list():
            run(["ip", "netns", "del", h["netns"]], check=False)
        if link_exists(h["veth"]):
            run(["ip", "link", "del", h["veth"]], check=False)
        cgroup_remove(cg)
        _remove_nspawn_runtime(h["machine"])

    def _wait_ready(self, state: dict[str, Any], hosts: list[dict[str, Any]]) -> None:
        if not hosts:
            return
        deadline = time.monotonic() + BOOT_TIMEOUT_S + len(hosts)
        with ThreadPoolExecutor(max_workers=min(32, len(hosts))) as pool:
            results = list(pool.map(lambda h: self._wait_host(h, deadline), hosts))
        failed = [msg for msg in results if msg]
        if failed:
            raise LabError("\n\n".join(failed))

    def _wait_host(self, h: dict[str, Any], deadline: float) -> str | None:
        """Wait until the host's systemd finished booting and sshd answers; else explain."""
        pid = read_pid(self.names.host_dir(h["index"]) / "nspawn.pid") or 0
        last = ""
        while time.monotonic() < deadline:
            if not pid_alive(pid):
                return self.boot_failure(h, "systemd-nspawn exited")
            proc = self.ssh(h, "systemctl is-system-running --wait", timeout=30, mux=False)
            last = (proc.stdout + proc.stderr).strip()
            if last in ("running", "degraded"):
                return None
            time.sleep(0.2)
        return self.boot_failure(h, f"not ready after {BOOT_TIMEOUT_S:.0f} s (last: {last!r})")

    def boot_failure(self, h: dict[str, Any], why: str) -> str:
        hd = self.names.host_dir(h["index"])
        console = _tail(hd / "console.log", 25)
        journal = ""
        jdir = hd / "root/var/log/journal"
        if jdir.is_dir():
            journal = run(["journalctl", "-D", str(jdir), "-n", "25", "--no-pager"],
                          check=False).stdout
        return (f"host {h['name']} ({h['address']}) of lab {self.name!r} failed to boot: {why}\n"
                f"--- console ({hd / 'console.log'}) ---\n{console}\n"
                f"--- journal tail ---\n{journal.strip() or '(no journal)'}")

    # ---------------------------------------------------------------- commands on hosts

    def ssh(self, h: dict[str, Any], command: str, timeout: float = 120,
            mux: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = ["ssh", "-F", str(self.sd / "ssh_config")]
        if not mux:
            cmd += ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
        try:
            return subprocess.run([*cmd, h["name"], command], capture_output=True, text=True,
                                  timeout=timeout, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(exc.cmd, 255, "", f"timeout after {timeout} s")

    def host_leader(self, h: dict[str, Any]) -> int | None:
        """PID (on this machine) of the host's systemd, PID 1 inside the container."""
        pid = read_pid(self.names.host_dir(h["index"]) / "nspawn.pid")
        if pid is None:
            return None
        for task in Path(f"/proc/{pid}/task").glob("*"):
            with contextlib.suppress(OSError):
                for child in (task / "children").read_text().split():
                    return int(child)
        return None

    def set_link(self, h: dict[str, Any], up: bool) -> None:
        """Cut (or restore) a host's network: its bridge port goes down, SSH stops answering."""
        run(["ip", "link", "set", h["veth"], "up" if up else "down"])

    def reset(self, *indices: int) -> list[dict[str, Any]]:
        """Re-create hosts h<index> from the base: fresh overlay, same address and host key."""
        with lab_lock(self.names):
            state = self.load()
            if state is None:
                raise LabError(f"lab {self.name!r} is not up")
            by_index = {h["index"]: h for h in state["hosts"]}
            missing = [f"h{i}" for i in indices if i not in by_index]
            if missing:
                raise LabError(f"lab {self.name!r} has no host {', '.join(missing)}")
            hosts = [by_index[i] for i in indices]
            for h in hosts:
                self._host_stop(h)
                self._ssh_close(h)
            base = image.ensure_base()
            for h in hosts:
                self._host_start(state, h, base)
            self._wait_ready(state, hosts)
            self._attach_gpus(hosts)
            return hosts

    # ---------------------------------------------------------------- emulated GPUs

    def _shape(self, state: dict[str, Any], i: int, gpu: list[tuple[str, int]] | None,
               profile: str | None, os_key: str | None = None) -> dict[str, Any]:
        """What host i should carry: the asked GPU/profile/OS, else what it has now."""
        old = next((h for h in state["hosts"] if h["index"] == i), None)
        now: dict[str, Any] = (_host_shape(old) if old
                               else {"gpu": None, "profile": None, "os": shapes.DEFAULT})
        if os_key is not None:
            now["os"] = os_key
        if gpu:
            model, n = gpu[0] if len(gpu) == 1 else gpu[i - 1]
            now["gpu"] = [model, n]
        if profile is not None:
            now["profile"] = profile
        return now

    def _attach_gpus(self, hosts: list[dict[str, Any]]) -> None:
        from . import gpu as gpu_emulator

        for h in hosts:
            if h.get("gpu"):
                model, n = h["gpu"]

                def on_host(cmd: str, h: dict[str, Any] = h) -> Any:
                    return self.ssh(h, cmd, timeout=120)

                gpu_emulator.attach(self.names.host_dir(h["index"]) / "root", model, n, on_host)

    def set_shape(self, index: int, gpu: tuple[str, int] | None,
                  profile: str | None = None, os_key: str = shapes.DEFAULT) -> dict[str, Any]:
        """Re-create host h<index> with these emulated GPUs (None: none), profile and OS."""
        with lab_lock(self.names):
            state = self.load()
            if state is None:
                raise LabError(f"lab {self.name!r} is not up")
            for h in state["hosts"]:
                if h["index"] == index:
                    h["gpu"] = list(gpu) if gpu else None
                    h["profile"] = profile
                    h["os"] = shapes.get(os_key).key
            shapes.prepare({shapes.get(os_key).key}, state, self.sd / "repo")
            self._save(state)
            return self.reset(index)[0]

    def gpu_inject(self, index: int, knob: str, gpu: int | None = None,
                   at_next_boot: bool = False) -> str:
        """Inject a GPU fault on host h<index> (tests/lab/gpu KNOBS), now or armed for its next
        boot only; returns the emulator's output."""
        from . import gpu as gpu_emulator

        command = gpu_emulator.inject_command(knob, gpu, "arm" if at_next_boot else "inject")
        state = self.load()
        host = next((h for h in (state or {"hosts": []})["hosts"] if h["index"] == index), None)
        if host is None or not host.get("gpu"):
            raise LabConfigError(f"host h{index} of lab {self.name!r} has no emulated GPU "
                                 "(tests/lab/lab up N --gpu MODEL:COUNT)")
        proc = self.ssh(host, command, timeout=180)
        if proc.returncode != 0:
            raise LabError(f"h{index}: inject {knob} failed (exit {proc.returncode}): "
                           f"{(proc.stderr or proc.stdout).strip()}")
        return proc.stdout

    # ---------------------------------------------------------------- down

    def _ssh_master_pids(self) -> list[int]:
        """ssh processes (multiplexing masters) started with this lab's ssh_config."""
        needles = (str(self.sd / "ssh_config").encode(), str(self.sd / "mux").encode() + b"/")
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with contextlib.suppress(OSError):
                cmdline = (entry / "cmdline").read_bytes()
                argv0 = os.path.basename(cmdline.split(b"\0")[0].split(b" ")[0])
                # a master renames itself "ssh: <ControlPath> [mux]"
                if argv0.startswith(b"ssh") and any(n in cmdline for n in needles):
                    pids.append(int(entry.name))
        return pids

    def _ssh_close(self, h: dict[str, Any] | None = None) -> None:
        cfg = self.sd / "ssh_config"
        state = self.load() or {"hosts": []}
        if cfg.exists():
            for x in state["hosts"] if h is None else [h]:
                subprocess.run(["ssh", "-F", str(cfg), "-O", "exit", x["name"]],
                               capture_output=True, timeout=10, check=False)
        if h is None:
            pids = self._ssh_master_pids()
            signal_pids(pids, signal.SIGTERM)
            signal_pids(wait_gone(pids, 2), signal.SIGKILL)

    def down(self) -> list[str]:
        """Remove everything of this lab; safe to repeat.  Returns what was left (normally [])."""
        with lab_lock(self.names):
            n = self.names
            other = registry.owner(self.name)
            if other is not None and other != self.sd:
                raise LabError(
                    f"lab {self.name!r} belongs to {other} (another checkout); run its "
                    f"'tests/lab/lab --name {self.name} down' there, or use another lab name"
                )
            self._ssh_close()
            state = self.load() or {"hosts": []}
            nspawn = [p for p in cgroup_pids(n.cgroup) if _comm(p) == "systemd-nspawn"]
            nspawn += [p for h in state["hosts"]
                       if (p := read_pid(n.host_dir(h["index"]) / "nspawn.pid")) and pid_alive(p)
                       and _comm(p) == "systemd-nspawn"]
            signal_pids(sorted(set(nspawn)), signal.SIGTERM)  # nspawn powers the container off
            wait_gone(sorted(set(nspawn)), 10)
            _kill_cgroup(n.cgroup)
            unmount_all(self.sd)
            for ns in netns_list():
                if ns.startswith(n.netns_prefix):
                    run(["ip", "netns", "del", ns], check=False)
            for link in links_with_prefix(f"glv{n.tag}"):
                run(["ip", "link", "del", link], check=False)
            if link_exists(n.bridge):
                run(["ip", "link", "del", n.bridge], check=False)
            cgroup_remove(n.cgroup)
            for h in state["hosts"]:
                _remove_nspawn_runtime(h["machine"])
            for runtime in Path("/run/systemd/nspawn/propagate").glob(f"gl-{self.name}-h*"):
                shutil.rmtree(runtime, ignore_errors=True)
            left = self._leftovers()
            if not left:
                if self.sd.exists():
                    shutil.rmtree(self.sd, ignore_errors=True)
                if self.name == DEFAULT_NAME and self.sd.parent == state_root():
                    for fname in ("inventory.py", "ssh_config", "known_hosts"):
                        (state_root() / fname).unlink(missing_ok=True)
                registry.release(self.name)
            return left

    # ---------------------------------------------------------------- status

    def status(self) -> list[dict[str, Any]]:
        """Per host: name, address, running (nspawn alive), state (systemd's view over SSH)."""
        state = self.load()
        if state is None:
            return []

        def one(h: dict[str, Any]) -> dict[str, Any]:
            alive = self._host_alive(h)
            sysstate = "-"
            if alive:
                proc = self.ssh(h, "systemctl is-system-running", timeout=10, mux=False)
                sysstate = proc.stdout.strip() or f"unreachable ({proc.stderr.strip()[:60]})"
            return {"name": h["name"], "address": h["address"], "running": alive,
                    "state": sysstate,
                    "gpu": f"{h['gpu'][0]}:{h['gpu'][1]}" if h.get("gpu") else ""}

        with ThreadPoolExecutor(max_workers=16) as pool:
            return list(pool.map(one, state["hosts"]))


# ------------------------------------------------------------------ helpers


#: file systems an overlayfs upper directory can live on (trusted xattrs, d_type)
OVERLAY_UPPER_FS = ("ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "tmpfs")


def hosts_storage(hosts_dir: Path) -> str:
    """Where the hosts' overlay uppers live: "disk" - the state directory's own file system (a
    host with a CUDA toolkit writes gigabytes: RAM is not the place) - unless that file system
    cannot hold an overlay upper (the state directory on overlayfs inside a container, NFS) or
    ``GPUHOST_LAB_HOSTS_TMPFS=1`` asks for the old way: then "tmpfs", one per lab, sized by
    the kernel's default (half the RAM), teardown without disk writes."""
    if os.environ.get("GPUHOST_LAB_HOSTS_TMPFS") == "1":
        return "tmpfs"
    kind = fs_type(hosts_dir)
    if kind not in OVERLAY_UPPER_FS:
        log(f"lab: {hosts_dir} is on {kind or 'an unknown file system'}, which cannot hold "
            "overlay upper directories: host roots go on a tmpfs (RAM)")
        return "tmpfs"
    return "disk"


def _host_shape(h: dict[str, Any]) -> dict[str, Any]:
    return {"gpu": h.get("gpu"), "profile": h.get("profile"), "os": h.get("os") or shapes.DEFAULT}


def _mac(tag: str, index: int) -> str:
    octets = [0x02, int(tag[0:2], 16), int(tag[2:4], 16), int(tag[4:6], 16), index >> 8,
              index & 0xFF]
    return ":".join(f"{o:02x}" for o in octets)


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def _kill_cgroup(relpath: str) -> None:
    """TERM, then KILL every process left in the cgroup subtree."""
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        pids = cgroup_pids(relpath)
        if not pids:
            return
        signal_pids(pids, sig)
        wait_gone(pids, wait)


def _remove_nspawn_runtime(machine: str) -> None:
    for base in ("/run/systemd/nspawn/propagate", "/run/systemd/nspawn/unix-export"):
        shutil.rmtree(Path(base, machine), ignore_errors=True)


def _tail(path: Path, lines: int) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no output)"


def _wait_port(addr: str, port: int, timeout: float, logs: Any) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((addr, port), timeout=0.5):
            return
        time.sleep(0.05)
    raise LabError(f"nothing answers on {addr}:{port} after {timeout:.0f} s; see "
                   + ", ".join(str(p) for p in logs()))
