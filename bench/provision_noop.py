#!/usr/bin/env python3
"""No-op provision re-run: gpuhost provision vs the equivalent Ansible playbook on N lab hosts.

    tests/lab/lab --name bench up 64
    .venv/bin/python bench/provision_noop.py --lab bench --hosts 64 --runs 5

1. Converge (timed once, reported as first runs): ``gpuhost provision`` with profile
   lab-nvidia-repo-550 (the lab's stand-in NVIDIA repository: driver 550.54.15, CUDA 12.4,
   cuDNN 9.1.0.70, container toolkit 1.16.2, pinned and held). The files gpuhost wrote are read
   back from the first host into bench/.work/provision-files/ so that bench/ansible/provision.yml
   manages the very same bytes and the same pinned package set. python3-apt (needed by Ansible's
   apt module) is pre-baked with one raw apt-get, then the playbook runs once.
2. Timed re-runs, tools taking turns: both must change nothing (gpuhost: no "Success" (=changed)
   operation line; Ansible: changed=0 in every recap line). Results: bench/results/provision.json.
``--skip-converge`` re-uses hosts converged by an earlier invocation.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
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
    """Operations pyinfra reported as changed ("[hN] Success"; unchanged ones say "No changes")."""
    return len(re.findall(r"^\s*\[[^\]]+\] Success", output, re.MULTILINE))


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
    try:
        lab = load_lab(args.lab, count)
        inventory = pyinfra_inventory(lab, count, provision_data(lab))
        gpuhost_argv = [str(GPUHOST), "provision", str(inventory)]
        ansible_argv = [str(need_ansible()), "-i", str(ansible_inventory(lab, count)),
                        str(ANSIBLE_DIR / "provision.yml"), "-e",
                        f"@{WORK / 'provision-vars.yml'}"]
        env = ansible_env(lab, count)
        payload: dict = {"bench": "provision_noop", "lab": lab.name, "hosts": count,
                         "machine": machine(), "first_runs": {}, "series": []}
        first = lab.hosts[0]["name"]
        if not args.skip_converge:
            print(f"converging {count} hosts with gpuhost provision ...", flush=True)
            sample = timed(gpuhost_argv, stdout=WORK / "provision-gpuhost-first.out", timeout=3600)
            if sample.rc != 0:
                raise BenchError(f"gpuhost provision failed (rc {sample.rc}); see "
                                 f"{WORK / 'provision-gpuhost-first.out'}")
            payload["first_runs"]["gpuhost"] = sample.seconds
            print(f"  gpuhost first run {sample.seconds:.1f} s", flush=True)
            reference_state(lab, first)
            prebake = [str(need_ansible().parent / "ansible"), "-i",
                       str(ansible_inventory(lab, count)), "lab", "-m", "raw", "-a",
                       "DEBIAN_FRONTEND=noninteractive apt-get install -y -q "
                       "--no-install-recommends python3-apt"]
            timed(prebake, env=env, stdout=WORK / "provision-prebake.out", timeout=3600)
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
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
