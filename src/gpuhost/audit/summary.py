"""Audit summary: hosts grouped by identical GPU stack, outliers named, verdicts, exit code.

Works on the JSON form of host entries (``HostReport.to_dict()``), so a merged report
(``gpuhost report merge``) gets exactly the same summary as a single run. Linear in the number
of hosts: stacks are grouped by hashing their tuple.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from gpuhost import __version__
from gpuhost.errors import ConfigError
from gpuhost.findings import SECURITY_PREFIX, SEVERITIES, VERDICT_UNREACHABLE, fails, worst_verdict

# The fields that make up a host's stack, in display order.
STACK_FIELDS = (
    "os",
    "kernel",
    "gpus",
    "driver_loaded",
    "driver_installed",
    "kernel_module",
    "cuda_toolkits",
    "cuda_default",
    "cudnn",
    "container_toolkit",
    "fabric_manager",
    "frameworks",
    "vbios",
    "gsp_firmware",
    "hca_firmware",
    "bios",
)
# the firmware fields whose difference between hosts of one node class is drift (GSP firmware
# follows the driver: its difference is the driver's, shown as driver_loaded)
DRIFT_FIELDS = ("vbios", "hca_firmware", "bios")
DRIFT_RULE = "firmware.drift"
# a firmware value that says nothing to compare: not read, or nothing to have firmware
NOT_READ = "not read"
_NO_DATA = ("-", NOT_READ)


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, Mapping):
            return None
        data = data.get(key)
    return data


def _installed_driver(facts: Mapping[str, Any]) -> str | None:
    from gpuhost.audit.coupled import is_coupled
    from gpuhost.audit.rules.installed import upstream_version

    versions = sorted(
        {
            upstream_version(p.get("version")) or "?"
            for p in _get(facts, "packages", "packages") or []
            if isinstance(p, Mapping) and is_coupled(str(p.get("name")))
        }
    )
    return "/".join(versions) if versions else None


def _versions(items: Iterable[Any], key: str) -> str | None:
    found = sorted({str(i.get(key)) for i in items if isinstance(i, Mapping) and i.get(key)})
    return ", ".join(found) or None


def firmware_stack(facts: Mapping[str, Any]) -> dict[str, str | None]:
    """The firmware part of a stack: VBIOS from nvidia-smi's GPUs (also in reports written
    before gpuhost read firmware), GSP, HCA and BIOS from ``facts.firmware`` ("not read" where
    the probe did not read them, and a BIOS without DMI tables)."""
    firmware = facts.get("firmware")
    read = isinstance(firmware, Mapping) and bool(firmware.get("read"))
    gpus = _get(firmware, "gpus") if isinstance(firmware, Mapping) else None
    hca = _get(firmware, "hca")
    bios = _get(firmware, "bios_version")
    return {
        "vbios": _versions(_get(facts, "driver", "smi", "gpus") or [], "vbios"),
        "gsp_firmware": _versions(gpus or [], "gsp"),
        "hca_firmware": (
            ", ".join(sorted({str(v) for v in hca.values()})) or None
            if read and isinstance(hca, Mapping)
            else NOT_READ
        ),
        # every machine has a BIOS: none shown (no DMI tables, as in a container) is not read
        "bios": str(bios) if read and bios else NOT_READ,
    }


def stack_of(facts: Mapping[str, Any] | None) -> dict[str, str]:
    """A host's stack as display strings ("-" for absent), from its JSON facts."""
    if not facts:
        return {name: "-" for name in STACK_FIELDS}
    gpus = Counter(
        str(g.get("name"))
        for g in _get(facts, "driver", "smi", "gpus") or []
        if isinstance(g, Mapping)
    )
    smi_state = _get(facts, "driver", "smi", "state")
    gpu_text = ", ".join(f"{n}x {name}" for name, n in sorted(gpus.items()))
    if not gpu_text:
        gpu_text = f"none ({smi_state})" if smi_state and smi_state != "ok" else "none"
    frameworks = []
    for fw in _get(facts, "frameworks") or []:
        if not isinstance(fw, Mapping):
            continue
        if fw.get("torch_version"):
            frameworks.append(f"torch {fw['torch_version']}")
        if fw.get("tensorflow_version"):
            frameworks.append(f"tensorflow {fw['tensorflow_version']}")
    toolkits = sorted(
        str(t.get("version") or t.get("path"))
        for t in _get(facts, "cuda", "toolkits") or []
        if isinstance(t, Mapping)
    )
    os_text = " ".join(
        str(v) for v in (_get(facts, "os", "id"), _get(facts, "os", "version_id")) if v
    )
    values = {
        "os": os_text,
        "kernel": _get(facts, "kernel", "running"),
        "gpus": gpu_text,
        "driver_loaded": _get(facts, "driver", "loaded_module", "version"),
        "driver_installed": _installed_driver(facts),
        "kernel_module": _get(facts, "driver", "loaded_module", "flavor"),
        "cuda_toolkits": ", ".join(toolkits) or _get(facts, "cuda", "nvcc_version"),
        "cuda_default": _get(facts, "cuda", "default_version"),
        "cudnn": _get(facts, "cudnn", "version"),
        "container_toolkit": _get(facts, "container", "toolkit_version"),
        "fabric_manager": _get(facts, "fabric_manager", "version"),
        "frameworks": ", ".join(sorted(set(frameworks))),
        **firmware_stack(facts),
    }
    return {name: str(values[name]) if values[name] else "-" for name in STACK_FIELDS}


def _stack_key(stack: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(stack[name] for name in STACK_FIELDS)


def group_stacks(hosts: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Reachable hosts grouped by identical stack, largest group first."""
    groups: dict[tuple[str, ...], dict[str, Any]] = {}
    for host in hosts:
        if not host.get("reachable"):
            continue
        stack = stack_of(host.get("facts"))
        group = groups.setdefault(_stack_key(stack), {"stack": stack, "hosts": []})
        group["hosts"].append(host["name"])
    ordered = sorted(groups.values(), key=lambda g: (-len(g["hosts"]), g["hosts"][0]))
    for group in ordered:
        group["count"] = len(group["hosts"])
        group["hosts"].sort()
    return ordered


def outliers(groups: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Hosts outside the majority stack group, with how their stack differs from it (none when
    no group is larger than every other)."""
    if len(groups) < 2 or groups[0]["count"] == groups[1]["count"]:
        return []  # one stack, or no single majority stack to compare with
    majority = groups[0]["stack"]
    found = []
    for group in groups[1:]:
        differs = {
            name: {"found": group["stack"][name], "majority": majority[name]}
            for name in STACK_FIELDS
            if group["stack"][name] != majority[name]
        }
        for name in group["hosts"]:
            found.append({"host": name, "differs": differs})
    return found


def _node_class(facts: Mapping[str, Any] | None) -> str | None:
    """The node class of the host's first GPU (its GPU name where no class knows it)."""
    from gpuhost.gpus.catalog import labelled
    from gpuhost.gpus.node_classes import class_of

    gpus = [g for g in _get(facts, "driver", "smi", "gpus") or [] if isinstance(g, Mapping)]
    if not gpus or not gpus[0].get("name"):
        return None
    name = str(gpus[0]["name"])
    try:
        found = class_of(labelled(name, gpus[0].get("pci_device_id")))
    except ConfigError:  # the node classes are unreadable (said where they are judged): by name
        return name
    return found.name if found else name


def firmware_drift(hosts: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Firmware that differs between reachable hosts of one node class: one entry per class and
    field, each version with its hosts (hosts whose firmware was not read are left out)."""
    seen: dict[tuple[str, str], dict[str, list[str]]] = {}
    for host in hosts:
        facts = host.get("facts")
        cls = _node_class(facts) if host.get("reachable") else None
        if cls is None:
            continue
        stack = stack_of(facts)
        for name in DRIFT_FIELDS:
            if stack[name] not in _NO_DATA:
                seen.setdefault((cls, name), {}).setdefault(stack[name], []).append(host["name"])
    return [
        {
            "rule": DRIFT_RULE,
            "severity": "warning",
            "node_class": cls,
            "field": name,
            "versions": {v: sorted(h) for v, h in sorted(versions.items())},
        }
        for (cls, name), versions in sorted(seen.items())
        if len(versions) > 1
    ]


def with_security(host: Mapping[str, Any]) -> dict[str, Any]:
    """A host entry with its two answers apart. An entry written before the split (its
    ``security.*`` findings among ``findings``, its verdict counting them; no ``security``) gets
    them moved into ``security`` and both verdicts computed again; a current entry is returned
    as it is."""
    entry = dict(host)
    if isinstance(entry.get("security"), Mapping):
        return entry
    findings = [f for f in entry.get("findings") or [] if isinstance(f, Mapping)]
    security = [f for f in findings if str(f.get("rule", "")).startswith(SECURITY_PREFIX)]
    rest = [f for f in findings if f not in security]
    reachable = bool(entry.get("reachable"))
    if security:  # its verdict counted them: judged again without
        entry["findings"] = rest
        entry["verdict"] = _verdict_of(rest, reachable)
    entry["security"] = {"verdict": _verdict_of(security, reachable), "findings": security}
    return entry


def _verdict_of(findings: list[Mapping[str, Any]], reachable: bool) -> str:
    """``gpuhost.findings.verdict`` on JSON findings (an info finding leaves a host ok)."""
    if not reachable:
        return VERDICT_UNREACHABLE
    return worst_verdict(
        "ok" if f.get("severity") == "info" else str(f.get("severity")) for f in findings
    )


def _counts(
    hosts: Sequence[Mapping[str, Any]],
    verdict_of: Callable[[Mapping[str, Any]], Any],
    findings_of: Callable[[Mapping[str, Any]], Any],
) -> dict[str, Any]:
    """Verdict, per-verdict host counts, per-severity and per-rule finding counts."""
    verdicts = Counter(str(verdict_of(h)) for h in hosts)
    severities: Counter[str] = Counter()
    rules: Counter[str] = Counter()
    for host in hosts:
        for finding in findings_of(host) or []:
            severities[str(finding.get("severity"))] += 1
            rules[str(finding.get("rule"))] += 1
    return {
        "verdict": worst_verdict(verdicts) if hosts else "ok",
        "verdicts": {v: verdicts.get(v, 0) for v in ("ok", "warning", "error", "unreachable")},
        "findings": {s: severities.get(s, 0) for s in SEVERITIES},
        "rules": dict(sorted(rules.items())),
    }


def _security_of(host: Mapping[str, Any]) -> Mapping[str, Any]:
    security = host.get("security")
    return security if isinstance(security, Mapping) else {}


def summarize(
    hosts: Sequence[Mapping[str, Any]], extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The report's ``summary`` object for these host entries: the compatibility and health
    answer at the top, the security exposure apart under ``security``."""
    answer = _counts(hosts, lambda h: h.get("verdict"), lambda h: h.get("findings"))
    groups = group_stacks(hosts)
    drift = firmware_drift(hosts)
    summary: dict[str, Any] = {
        # firmware drift makes a fleet that is otherwise ok a warning
        "verdict": "warning" if drift and answer["verdict"] == "ok" else answer["verdict"],
        "hosts": len(hosts),
        "reachable": sum(1 for h in hosts if h.get("reachable")),
        "unreachable": sum(1 for h in hosts if not h.get("reachable")),
        "verdicts": answer["verdicts"],
        "findings": answer["findings"],
        "rules": answer["rules"],
        "security": _counts(
            hosts,
            lambda h: _security_of(h).get("verdict", "ok"),
            lambda h: _security_of(h).get("findings"),
        ),
        "stacks": groups,
        "outliers": outliers(groups),
        "firmware_drift": drift,
        "gpuhost_version": __version__,
    }
    if extra:
        summary.update(extra)
    return summary


def exit_code_for(summary: Mapping[str, Any], fail_on: str = "compatibility") -> int:
    """0 clean or warnings only; 1 any error finding or unreachable host; with ``fail_on``
    "security" also 1 when a host's security exposure is an error."""
    security = summary.get("security")
    exposed = security.get("verdict") if isinstance(security, Mapping) else "ok"
    return 1 if fails(str(summary.get("verdict")), str(exposed), fail_on) else 0
