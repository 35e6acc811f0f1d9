#!/usr/bin/env python3
"""Audit speed: gpuhost audit vs Ansible gathering the same facts vs the plain-ssh floor.

    tests/lab/lab --name bench up 128
    .venv/bin/python bench/audit.py --lab bench --hosts 16,64,128 --runs 5

gpuhost, the floors and ansible-raw/-script/-shell run the SAME probe script
(gpuhost.probe.build_probe(), written to bench/.work/probe.sh) once per host; ansible-raw is
Ansible used as an ssh launcher for gpuhost's probe (no facts, no judgement):

  gpuhost        gpuhost audit INV -q --json FILE --parallel N   (parse, judge, JSON report)
  floor-cold     bench/ssh_floor.sh ... cold: N parallel `ssh host "$probe"`, fresh connections
  floor-mux      the same through warm ControlMaster/ControlPersist masters
  ansible-raw    ansible-playbook bench/ansible/audit_raw.yml     (raw module; forks = N)
  ansible-script ansible-playbook bench/ansible/audit_script.yml  (script module)
  ansible-shell  ansible-playbook bench/ansible/audit_shell.yml   (shell module, AnsiballZ)
  ansible-modules ansible-playbook bench/ansible/audit_modules.yml: the audit written as an
                 Ansible user writes it (setup subset, package_facts, service_facts, slurp, one
                 shell task for the tools without a module; judgement with set_fact/assert; a
                 report per host); variables from gpuhost's data in bench/.work/audit-vars.yml
  *-null         the same tools with `true` instead of the probe (transport cost only;
                 gpuhost-null is bench/fleet_null.py: gpuhost.fleet.gather with a `true` fact)

Tools take turns within each round (so background noise hits all of them alike); one warm-up
round is not counted. Results: bench/results/audit.json (medians, every run, machine, versions).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (  # noqa: E402
    ANSIBLE_DIR,
    BENCH,
    GPUHOST,
    LAB_PROFILE,
    LAB_PROFILES,
    RESULTS,
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

TOOLS = ("gpuhost", "floor-cold", "floor-mux", "ansible-raw", "ansible-script", "ansible-shell",
         "ansible-modules", "gpuhost-null", "floor-cold-null", "floor-mux-null", "ansible-raw-null")
# Not run in the uncounted warm-up round (its ssh masters are the ones ansible-raw warms; it takes
# minutes at 128 hosts on this machine).
NO_WARMUP = ("ansible-modules",)
DEFAULT_TOOLS = ("gpuhost", "floor-cold", "floor-mux", "ansible-raw", "ansible-modules")


def write_probe() -> Path:
    from gpuhost.probe.script import build_probe

    WORK.mkdir(parents=True, exist_ok=True)
    path = WORK / "probe.sh"
    path.write_text(build_probe())
    return path


def write_audit_vars() -> Path:
    """The playbook's group_vars: the same data gpuhost judges with (coupled driver packages,
    the matrix's CUDA -> minimum driver table and minor-version floors, the lab profile)."""
    import yaml

    from gpuhost.audit.coupled import coupled_pattern
    from gpuhost.datafiles import load_yaml
    from gpuhost.matrix.load import default_matrix_path

    matrix = load_yaml(Path(default_matrix_path()).read_text())
    profile = load_yaml(LAB_PROFILES.read_text())["profiles"][LAB_PROFILE]
    variables = {
        "coupled_regex": coupled_pattern().pattern,
        "cuda_min_driver": {str(k): str(v["min_driver"]) for k, v in matrix["cuda"].items()},
        "cuda_minor_floor": {str(k): str(v["min_driver"])
                             for k, v in matrix["cuda_minor_compat"].items()},
        "profile": {
            "driver": str(profile["driver"]["version"]),
            "kernel_module": profile["driver"].get("kernel_module", ""),
            "cuda": [str(v) for v in profile["cuda"]["versions"]],
            "cuda_default": str(profile["cuda"].get("default", "")),
            "cudnn": str(profile.get("cudnn", "")),
            "container_toolkit": str(profile.get("container_toolkit", "")),
        },
    }
    path = WORK / "audit-vars.yml"
    path.write_text(yaml.safe_dump(variables, sort_keys=True))
    return path


def command_for(tool: str, lab: Lab, count: int, probe: Path) -> tuple[list[str], dict | None]:
    names = [h["name"] for h in lab.hosts[:count]]
    if tool.endswith("-null"):  # transport only: `true` instead of the probe
        tool = tool[: -len("-null")]
        probe = WORK / "null.sh"
        probe.write_text("true\n")
        if tool == "gpuhost":
            return [sys.executable, str(BENCH / "fleet_null.py"),
                    str(pyinfra_inventory(lab, count)), str(count)], None
    if tool == "gpuhost":
        inventory = pyinfra_inventory(lab, count)
        return [str(GPUHOST), "audit", str(inventory), "-q", "--parallel", str(count),
                "--profiles", str(LAB_PROFILES), "--json", str(WORK / f"gpuhost-{count}.json")
                ], None
    if tool.startswith("floor-"):
        mode = tool.split("-", 1)[1]
        return [str(BENCH / "ssh_floor.sh"), str(lab.ssh_config), str(probe),
                str(WORK / f"floor-{count}"), mode, *names], None
    if tool.startswith("ansible-"):
        playbook = ANSIBLE_DIR / f"audit_{tool.split('-', 1)[1]}.yml"
        argv = [str(need_ansible()), "-i", str(ansible_inventory(lab, count)), str(playbook),
                "-e", f"probe_file={probe}"]
        if tool == "ansible-modules":
            argv += ["-e", f"@{write_audit_vars()}"]
        return argv, ansible_env(lab, count)
    raise BenchError(f"unknown tool {tool!r} (known: {', '.join(TOOLS)})")


def converge(lab: Lab, count: int) -> None:
    from provision_noop import prepare_hosts

    print(f"converging {count} hosts (prepare, gpuhost provision; not timed) ...", flush=True)
    prepare_hosts(lab, count)
    out = WORK / "converge.out"
    sample = timed([str(GPUHOST), "provision", str(pyinfra_inventory(lab, count,
                                                                     provision_data(lab))),
                    "--parallel", str(count)], stdout=out, timeout=3600)
    if sample.rc != 0:
        raise BenchError(f"gpuhost provision failed (rc {sample.rc}); see {out}")


def check_reports(tool: str, count: int) -> None:
    """The run did its work on every host: gpuhost's JSON report and the Ansible playbook's
    per-host reports (tree callback) name all ``count`` hosts."""
    if tool == "gpuhost":
        hosts = json.loads((WORK / f"gpuhost-{count}.json").read_text())["hosts"]
        if len(hosts) != count or not all(h["reachable"] for h in hosts):
            raise BenchError(f"gpuhost: {len(hosts)} hosts in the report, expected {count}")
    elif tool == "ansible-modules":
        tree = WORK / "ansible-tree"
        reports = [p for p in tree.iterdir() if "audit_report" in p.read_text()]
        if len(reports) != count:
            raise BenchError(f"ansible-modules: {len(reports)} per-host reports in {tree}, "
                             f"expected {count}")


def load_previous(name: str, lab: str) -> dict:
    """Earlier results of this bench: a run for some counts/tools replaces only those series."""
    path = RESULTS / f"{name}.json"
    machine_now = machine()
    if path.exists():
        payload = json.loads(path.read_text())
        payload.setdefault("machines", [payload.pop("machine")] if "machine" in payload else [])
    else:
        payload = {"bench": "audit", "lab": lab, "machines": [], "series": []}
    payload["machines"].append(machine_now)
    return payload


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lab", default=None, help="lab name (default $GPUHOST_LAB or bench)")
    parser.add_argument("--hosts", default="16,64,128", help="host counts, comma separated")
    parser.add_argument("--runs", type=int, default=5, help="timed rounds per host count")
    parser.add_argument("--tools", default=",".join(DEFAULT_TOOLS), help=", ".join(TOOLS))
    parser.add_argument("--out", default="audit", help="results name (bench/results/NAME.json)")
    parser.add_argument("--converge", action="store_true",
                        help="first bring the hosts to the lab profile (python3-apt and only the "
                             "lab repository as in provision_noop.py, then gpuhost provision; "
                             "not timed), so every rule has a driver stack to judge")
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.hosts.split(",")]
    tools = [t.strip() for t in args.tools.split(",") if t.strip()]
    lab = load_lab(args.lab, max(counts))
    probe = write_probe()
    if args.converge:
        converge(lab, max(counts))
    payload = load_previous(args.out, lab.name)
    for count in counts:
        print(f"{count} hosts", flush=True)
        commands = {tool: command_for(tool, lab, count, probe) for tool in tools}
        series = {tool: Series(tool, count, quote(commands[tool][0])) for tool in tools}
        for round_ in range(args.runs + 1):
            for tool in tools:
                if round_ == 0 and tool in NO_WARMUP:
                    continue
                shutil.rmtree(WORK / "ansible-tree", ignore_errors=True)
                argv_, env = commands[tool]
                sample = timed(argv_, env=env, stdout=WORK / f"{tool}-{count}.out",
                               timeout=3600)
                if sample.rc not in (0, 1):
                    raise BenchError(f"{tool} failed (rc {sample.rc}) on {count} hosts; "
                                     f"output in {WORK / f'{tool}-{count}.out'}")
                check_reports(tool, count)
                if round_ > 0:  # round 0 warms caches and ssh masters
                    series[tool].samples.append(sample)
        for tool in tools:
            show(series[tool])
            payload["series"] = [row for row in payload["series"]
                                 if (row["tool"], row["hosts"]) != (tool, count)]
            payload["series"].append(series[tool].as_dict())
        save(args.out, payload)  # keep what is done if a later count fails
    print(f"results: {save(args.out, payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(run_bench(main))
