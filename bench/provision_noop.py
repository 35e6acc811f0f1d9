#!/usr/bin/env python3
"""No-op provision re-run: gpuhost provision vs the equivalent Ansible playbook on N lab hosts.

    tests/lab/lab --name bench up 64
    .venv/bin/python bench/provision_noop.py --lab bench --hosts 64 --runs 5

1. Converge (timed once, reported as first runs): ``gpuhost provision`` with profile
   lab-nvidia-repo-550 (the lab's stand-in NVIDIA repository: driver 550.54.15, CUDA 12.4,
   cuDNN 9.1.0.70, container toolkit 1.16.2, pinned and held). The files gpuhost wrote are read
   back from the first host into bench/.work/provision-files/ so that bench/ansible/provision.yml
   manages the very same bytes and the same pinned package set. Before either tool runs, every
   host gets python3-apt pre-baked and only the lab repository as apt source (prepare_hosts).
   Then the playbook runs once (hosts already converged: it must find nothing to do).
2. Timed re-runs, tools taking turns: both must change nothing (gpuhost: "0 changed" on every
   host's summary line; Ansible: changed=0 in every recap line).
   Results: bench/results/provision.json.
``--skip-converge`` re-uses hosts converged by an earlier invocation.
"""

from __future__ import annotations

import argparse
import io
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (  # noqa: E402
    ANSIBLE_DIR,
    GPUHOST,
    WORK,
    BenchError,
    Lab,
    Series,
    ansible_env,
    ansible_inventory,
    load_lab,
    machine,
    need_ansible,
    provision_data,
    pyinfra_inventory,
    quote,
    run_bench,
    save,
    show,
    timed,
)

#: files gpuhost provision manages for this profile (host path -> name under provision-files/)
MANAGED_FILES = {
    "/etc/modprobe.d/gpuhost-blacklist-nouveau.conf": "gpuhost-blacklist-nouveau.conf",
    "/usr/share/keyrings/gpuhost-cuda-archive-keyring.gpg": "gpuhost-cuda-archive-keyring.gpg",
    "/etc/apt/sources.list.d/gpuhost-cuda.list": "gpuhost-cuda.list",
    "/etc/apt/preferences.d/gpuhost-nvidia": "gpuhost-nvidia",
    "/etc/docker/daemon.json": "daemon.json",
    "/etc/profile.d/gpuhost.sh": "gpuhost.sh",
    "/etc/gpuhost/profile": "profile",
}
RECAP_RE = re.compile(r"^(\S+)\s*:\s*ok=\d+\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)",
                      re.MULTILINE)


def ssh(lab: Lab, host: str, command: str) -> bytes:
    proc = subprocess.run(["ssh", "-F", str(lab.ssh_config), host, command],
                          capture_output=True, timeout=120)
    if proc.returncode != 0:
        raise BenchError(f"{host}: {command!r} failed: {proc.stderr.decode(errors='replace')}")
    return proc.stdout


def prepare_hosts(lab: Lab, count: int) -> None:
    """The same starting point for both tools, before either runs.

    - python3-apt pre-baked (Ansible's apt module needs it and would otherwise install it itself
      on its first run): the three .debs are fetched once through the lab's proxy on the first
      host and installed with dpkg -i everywhere;
    - apt sources: only what the profile adds (the lab's stand-in NVIDIA repository). Debian's
      own indexes cost ~130 MB of RAM per host on the lab's tmpfs (8 GB at 64 hosts) and are not
      needed by this profile; both tools see the same sources.
    """
    first = lab.hosts[0]["name"]
    debs = ("python3-apt", "python-apt-common", "distro-info-data")
    ssh(lab, first, "mkdir -p /root/bench-debs && cd /root/bench-debs && "
        "{ [ -f /etc/apt/sources.list.d/debian.sources ] || "
        "cp /root/debian.sources.off /etc/apt/sources.list.d/debian.sources; } && "
        "apt-get update -qq && apt-get download -qq " + " ".join(debs))
    names = ssh(lab, first, "ls /root/bench-debs").decode().split()
    local = WORK / "debs"
    local.mkdir(parents=True, exist_ok=True)
    for name in names:
        (local / name).write_bytes(ssh(lab, first, f"cat /root/bench-debs/{name}"))
    script = ("set -e; mkdir -p /root/bench-debs; "
              "[ ! -f /etc/apt/sources.list.d/debian.sources ] || "
              "mv /etc/apt/sources.list.d/debian.sources /root/debian.sources.off; "
              "rm -rf /var/lib/apt/lists/*; apt-get clean; "
              "tar -x -C /root/bench-debs; dpkg -i /root/bench-debs/*.deb >/dev/null")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in names:
            tar.add(local / name, arcname=name)
    procs = [subprocess.Popen(["ssh", "-F", str(lab.ssh_config), h["name"], script],
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE) for h in lab.hosts[:count]]
    for proc in procs:  # all hosts at once: feed every ssh first, then wait
        assert proc.stdin is not None
        proc.stdin.write(buffer.getvalue())
        proc.stdin.close()
    failed = []
    for host, proc in zip(lab.hosts[:count], procs, strict=True):
        proc.wait(timeout=900)
        err = proc.stderr.read() if proc.stderr else b""
        if proc.returncode != 0:
            failed.append(f"{host['name']}: {err.decode(errors='replace').strip()[-200:]}")
    if failed:
        raise BenchError("preparing hosts failed: " + "; ".join(failed[:3]))


def reference_state(lab: Lab, host: str) -> Path:
    """Copy the files gpuhost wrote on ``host`` and write the playbook's variables."""
    files = WORK / "provision-files"
    files.mkdir(parents=True, exist_ok=True)
    for remote, local in MANAGED_FILES.items():
        (files / local).write_bytes(ssh(lab, host, f"cat {remote}"))
    held = ssh(lab, host, "dpkg-query -W -f='${db:Status-Want} ${Package}=${Version}\\n'")
    pinned = sorted(line.split()[1] for line in held.decode().splitlines()
                    if line.startswith("hold "))
    if not pinned:
        raise BenchError(f"{host}: no held packages: gpuhost provision did not converge it")
    cuda = ssh(lab, host, "readlink /usr/local/cuda").decode().strip()
    variables = {
        "files_dir": str(files),
        "pinned_packages": pinned,
        "held_packages": [p.split("=", 1)[0] for p in pinned],
        "cuda_default": cuda,
    }
    path = WORK / "provision-vars.yml"
    path.write_text(yaml.safe_dump(variables))
    return path


def gpuhost_changes(output: str) -> int:
    """Changed operations in gpuhost provision's per-host summary lines ("h1: ok, 2 changed, ...").

    Also counts pyinfra's own "[h1] Success" lines (the on-disk deploy's output format).
    """
    lines = re.findall(r"^\S+: \w[\w-]*, (\d+) changed", output, re.MULTILINE)
    summary = sum(int(n) for n in lines)
    return summary + len(re.findall(r"^\s*\[[^\]]+\] Success", output, re.MULTILINE))


def ansible_changes(output: str, count: int) -> int:
    recaps = RECAP_RE.findall(output)
    if len(recaps) != count:
        raise BenchError(f"ansible: {len(recaps)} recap lines for {count} hosts")
    bad = [r[0] for r in recaps if int(r[2]) or int(r[3])]
    if bad:
        raise BenchError(f"ansible: unreachable/failed hosts: {', '.join(bad[:5])}")
    return sum(int(r[1]) for r in recaps)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab", default=None)
    parser.add_argument("--hosts", type=int, default=64)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--skip-converge", action="store_true")
    parser.add_argument("--out", default="provision")
    args = parser.parse_args(argv)
    count = args.hosts
    lab = load_lab(args.lab, count)
    inventory = pyinfra_inventory(lab, count, provision_data(lab))
    # --parallel = hosts, like Ansible's forks (gpuhost's default is 20 per CPU core)
    gpuhost_argv = [str(GPUHOST), "provision", str(inventory), "--parallel", str(count)]
    ansible_argv = [str(need_ansible()), "-i", str(ansible_inventory(lab, count)),
                    str(ANSIBLE_DIR / "provision.yml"), "-e",
                    f"@{WORK / 'provision-vars.yml'}"]
    env = ansible_env(lab, count)
    payload: dict = {"bench": "provision_noop", "lab": lab.name, "hosts": count,
                     "machine": machine(), "first_runs": {}, "series": []}
    first = lab.hosts[0]["name"]
    if not args.skip_converge:
        print(f"preparing {count} hosts (python3-apt, lab repository only) ...", flush=True)
        prepare_hosts(lab, count)
        print(f"converging {count} hosts with gpuhost provision ...", flush=True)
        sample = timed(gpuhost_argv, stdout=WORK / "provision-gpuhost-first.out", timeout=3600)
        if sample.rc != 0:
            raise BenchError(f"gpuhost provision failed (rc {sample.rc}); see "
                             f"{WORK / 'provision-gpuhost-first.out'}")
        payload["first_runs"]["gpuhost"] = sample.seconds
        print(f"  gpuhost first run {sample.seconds:.1f} s", flush=True)
        reference_state(lab, first)
        sample = timed(ansible_argv, env=env, stdout=WORK / "provision-ansible-first.out",
                       timeout=3600)
        payload["first_runs"]["ansible_after_gpuhost"] = sample.seconds
        print(f"  ansible first run (hosts already converged) {sample.seconds:.1f} s",
              flush=True)
    else:
        reference_state(lab, first)
    series = {
        "gpuhost": Series("gpuhost", count, quote(gpuhost_argv)),
        "ansible": Series("ansible", count, quote(ansible_argv)),
    }
    changes: dict[str, list[int]] = {"gpuhost": [], "ansible": []}
    for _ in range(args.runs):
        for tool, argv_, tool_env in (("gpuhost", gpuhost_argv, None),
                                      ("ansible", ansible_argv, env)):
            out = WORK / f"provision-{tool}-rerun.out"
            sample = timed(argv_, env=tool_env, stdout=out, timeout=3600)
            text = out.read_text(errors="replace")
            changed = (gpuhost_changes(text) if tool == "gpuhost"
                       else ansible_changes(text, count))
            if sample.rc != 0:
                raise BenchError(f"{tool} re-run failed (rc {sample.rc}); see {out}")
            changes[tool].append(changed)
            series[tool].samples.append(sample)
    for tool, item in series.items():
        show(item)
        print(f"    changed operations per run: {changes[tool]}")
        payload["series"].append({**item.as_dict(), "changed_per_run": changes[tool]})
    print(f"results: {save(args.out, payload)}")
    if any(any(c) for c in changes.values()):
        print("bench: a re-run changed something: not a no-op comparison", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
