"""``tests/lab/lab``: bring the lab up, tear it down, show its state.

  lab [--name NAME] up N [--gpu MODEL:COUNT ...] [--profile NAME] [--os KEY]
                               boot hosts h1..hN (exactly N), print where the inventory is;
                               --gpu: emulated GPUs (once: every host; N times: one per host),
                               --profile: inventory data gpuhost_profile of every host,
                               --os: what every host looks like (tests/lab/shapes.py):
                               debian-12 (default), ubuntu-22.04, ubuntu-24.04, rocky-9
  lab [--name NAME] gpu hI inject KNOB [gpu=N] | arm KNOB [gpu=N] | clear | state | gpu-reset
                               emulated GPU faults: xid=N, ecc-uncorrectable, retired-pages,
                               remap-pending, gpu-lost, driver-mismatch, persistence-off,
                               pcie-downgrade, clock-event=REASON, fabric=STATE,
                               nvlink-down[=LINK], gpu-missing; arm: the same at the next
                               boot only (e.g. to fail an upgrade's validation); clear
                               removes them all
  lab [--name NAME] down       remove everything the lab made (safe to repeat)
  lab [--name NAME] status     list hosts and their health (exit 1 when one is unhealthy)
  lab [--name NAME] reset hI.. re-create hosts from the base image
  lab [--name NAME] env        print shell variables for the lab's files and URLs
  lab build [--rebuild]        build (or rebuild) the cached base image only

The name defaults to $GPUHOST_LAB, else "lab".  Exit codes: 0 ok, 1 failure, 2 bad usage.
"""

from __future__ import annotations

import argparse
import shlex
import sys

from . import gpu as gpu_emulator
from . import image, shapes
from .config import LabConfigError, default_name
from .core import LabManager, preflight
from .system import LabError


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="lab", description="gpuhost lab of disposable Debian hosts")
    p.add_argument("--name", default=None, help="lab name (default: $GPUHOST_LAB or 'lab')")
    sub = p.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="boot hosts h1..hN")
    up.add_argument("count", type=int)
    up.add_argument("--gpu", action="append", default=None, metavar="MODEL:COUNT",
                    help="emulated GPUs: h100-sxm, a100-sxm4, v100-sxm2, t4, l4 (tests/lab/gpu)")
    up.add_argument("--profile", default=None, help="inventory data gpuhost_profile")
    up.add_argument("--os", dest="os_key", default=None, metavar="KEY",
                    help="OS shape of the hosts: " + ", ".join(sorted(shapes.registry()))
                    + f" (default {shapes.DEFAULT})")
    gpu = sub.add_parser("gpu", help="emulated GPU of a host: inject a fault, clear, state")
    gpu.add_argument("host")
    gpu.add_argument("action", choices=["inject", "arm", "clear", "state", "gpu-reset"])
    gpu.add_argument("args", nargs="*", help="KNOB [gpu=N] for inject")
    sub.add_parser("down", help="remove everything of the lab")
    sub.add_parser("status", help="hosts and their health")
    reset = sub.add_parser("reset", help="re-create hosts, e.g. h2 h3")
    reset.add_argument("hosts", nargs="+")
    sub.add_parser("env", help="shell variables for the lab's files")
    build = sub.add_parser("build", help="build the cached base image")
    build.add_argument("--rebuild", action="store_true")
    return p


def _gpu(lab: LabManager, host: str, action: str, rest: list[str]) -> int:
    if not host.startswith("h") or not host[1:].isdigit():
        raise LabConfigError(f"host {host!r}: expected h<number>, e.g. h2")
    index = int(host[1:])
    if action in ("inject", "arm"):
        if not 1 <= len(rest) <= 2:
            raise LabConfigError(f"gpu HOST {action}: expected KNOB [gpu=N]")
        gpu_index = None
        if len(rest) == 2:
            key, _, value = rest[1].partition("=")
            if key != "gpu" or not value.isdigit():
                raise LabConfigError(f"{rest[1]!r}: expected gpu=N")
            gpu_index = int(value)
        sys.stdout.write(lab.gpu_inject(index, rest[0], gpu_index, at_next_boot=action == "arm"))
        return 0
    state = lab.load() or {"hosts": []}
    record = next((h for h in state["hosts"] if h["index"] == index), None)
    if record is None or not record.get("gpu"):
        raise LabConfigError(f"host {host} of lab {lab.name!r} has no emulated GPU")
    proc = lab.ssh(record, f"python3 {gpu_emulator.ON_HOST} {action}")
    sys.stdout.write(proc.stdout)
    sys.stderr.write(proc.stderr)
    return 0 if proc.returncode == 0 else 1


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.cmd == "build":
            preflight()
            print(image.ensure_base(rebuild=args.rebuild))
            return 0
        lab = LabManager(args.name or default_name())
        if args.cmd == "up":
            specs = [gpu_emulator.parse_spec(g) for g in args.gpu] if args.gpu else None
            state = lab.up(args.count, gpu=specs, profile=args.profile, os_key=args.os_key)
            print(f"{lab.sd / 'inventory.py'}")
            for h in state["hosts"]:
                print(f"  {h['name']:5} {h['address']:15} {h.get('os') or shapes.DEFAULT}")
            print(f"ssh:    ssh -F {lab.sd / 'ssh_config'} h1")
            print(f"pyinfra: pyinfra -y {lab.sd / 'inventory.py'} <deploy.py>")
            print(f"proxy {state['proxy_url']}  repo {state['repo_url']}")
            for key, record in state.get("shapes", {}).items():
                print(f"{key}: repo {record['repo_url']}  key {record['key_path']}")
            return 0
        if args.cmd == "down":
            preflight()
            left = lab.down()
            if left:
                print("lab: could not remove: " + "; ".join(left), file=sys.stderr)
                return 1
            return 0
        if args.cmd == "status":
            rows = lab.status()
            if not rows:
                print(f"lab {lab.name!r} is down")
                return 0
            for r in rows:
                print(f"{r['name']:5} {r['address']:15} {'up' if r['running'] else 'DOWN':5} "
                      f"{r['state']}{'  gpu ' + r['gpu'] if r.get('gpu') else ''}")
            ok = all(r["running"] and r["state"] in ("running", "degraded") for r in rows)
            return 0 if ok else 1
        if args.cmd == "reset":
            preflight()
            bad = [h for h in args.hosts if not h.startswith("h") or not h[1:].isdigit()]
            if bad:
                raise LabConfigError(f"host {bad[0]!r}: expected h<number>, e.g. h2")
            lab.reset(*(int(h[1:]) for h in args.hosts))
            return 0
        if args.cmd == "gpu":
            return _gpu(lab, args.host, args.action, args.args)
        if args.cmd == "env":
            current = lab.load()
            if current is None:
                raise LabError(f"lab {lab.name!r} is down")
            for key, value in {
                "GPUHOST_LAB": lab.name,
                "LAB_INVENTORY": lab.sd / "inventory.py",
                "LAB_SSH_CONFIG": lab.sd / "ssh_config",
                "LAB_KNOWN_HOSTS": lab.sd / "known_hosts",
                "LAB_PROXY_URL": current["proxy_url"],
                "LAB_REPO_URL": current["repo_url"],
                "LAB_REPO_KEY": current["repo_key_path"],
                # a shape with repositories of its own (rocky-9: NVIDIA's rhel9 stand-in, RPM key)
                **{f"LAB_{k.upper().replace('-', '_').replace('.', '_')}_REPO_URL": r["repo_url"]
                   for k, r in current.get("shapes", {}).items()},
                **{f"LAB_{k.upper().replace('-', '_').replace('.', '_')}_REPO_KEY": r["key_path"]
                   for k, r in current.get("shapes", {}).items()},
            }.items():
                print(f"export {key}={shlex.quote(str(value))}")
            return 0
    except LabConfigError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 2
    except LabError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("lab: interrupted; run 'lab down' to clean up", file=sys.stderr)
        return 1
    return 2
