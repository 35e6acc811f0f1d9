"""Container runtimes and the NVIDIA container toolkit (``container.nvidia-runtime``)."""

from __future__ import annotations

from gpuhost.audit.rules.context import AuditContext, one_finding, result_with, skip_result
from gpuhost.findings import ERROR, WARNING, Finding, RuleResult


def check_container_runtime(ctx: AuditContext) -> RuleResult:
    rule = "container.nvidia-runtime"
    container = ctx.facts.container
    if container.toolkit_version is None:
        if container.docker_default_runtime == "nvidia":
            return one_finding(
                rule,
                rule,
                ERROR,
                "Docker's default runtime is nvidia but the NVIDIA container toolkit is "
                "not "
                "installed; every container start fails",
                found="Docker default runtime nvidia, no NVIDIA container toolkit",
                expected="the NVIDIA container toolkit installed where Docker's default "
                "runtime is nvidia",
                fix="install nvidia-container-toolkit or remove default-runtime from "
                "/etc/docker/daemon.json",
            )
        return skip_result(rule, "NVIDIA container toolkit not installed")
    findings = []
    docker = "docker" in container.runtimes or "dockerd" in container.runtimes
    if docker and not container.docker_nvidia_runtime:
        findings.append(
            Finding(
                rule,
                WARNING,
                f"NVIDIA container toolkit {container.toolkit_version} is installed but Docker "
                "has no nvidia runtime in /etc/docker/daemon.json; expected it configured",
                found="Docker without an nvidia runtime in /etc/docker/daemon.json",
                expected="the nvidia runtime configured in Docker",
                fix="nvidia-ctk runtime configure --runtime=docker && systemctl restart docker",
            )
        )
    if "containerd" in container.runtimes and container.containerd_nvidia_runtime is False:
        findings.append(
            Finding(
                rule,
                WARNING,
                f"NVIDIA container toolkit {container.toolkit_version} is installed but "
                "containerd's "
                "config has no nvidia runtime",
                found="containerd without an nvidia runtime",
                expected="the nvidia runtime configured in containerd",
                fix="nvidia-ctk runtime configure --runtime=containerd",
            )
        )
    return result_with(rule, findings)
