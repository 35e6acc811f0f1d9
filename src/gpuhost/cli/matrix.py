"""``gpuhost matrix``: check, resolve, show, validate and render the compatibility matrix,
and verify profiles. Exit codes: 0 ok/warn, 1 incompatible (or, with ``--fail-on security``,
affected by a security bulletin rated an error), 2 bad input."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import click

from gpuhost.cli._dataage import warn_if_stale
from gpuhost.cli._matrix_sync import advisories_sync_cmd, sync_cmd
from gpuhost.cli._options import fail_on_option
from gpuhost.cli._output import write_output
from gpuhost.datadir import data_info
from gpuhost.datafiles import installable_os
from gpuhost.errors import ConfigError
from gpuhost.findings import Finding, fails
from gpuhost.matrix import (
    NoCompatibleSet,
    check_stack,
    gpu_info,
    load_matrix,
    resolve_stack,
    verdict,
)
from gpuhost.matrix.advisories import Exposure, exposure, load_advisories
from gpuhost.matrix.frameworks import framework_answer
from gpuhost.matrix.gpus import unknown_gpu_hint
from gpuhost.matrix.lookup import arch_cuda_range, cc_covered, cudnn_packages, package_runs_on
from gpuhost.matrix.peaks import default_peaks_path, load_peaks
from gpuhost.matrix.profiles import get_profile, load_profiles, verify_profile
from gpuhost.matrix.render import render_markdown

_MARK = {"info": "ok  ", "warning": "WARN", "error": "FAIL"}


def _as_of(value: str | None) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError as exc:
        raise ConfigError(f'--as-of: "{value}" is not a date (expected YYYY-MM-DD)') from exc


def _print_answers(
    findings: list[Finding],
    security: Exposure,
    as_json: bool,
    fail_on: str,
    data: dict[str, Any] | None = None,
) -> int:
    """The two answers, never mixed: the compatibility verdict of ``findings`` and the security
    exposure; exit 1 on an incompatible set, or with ``fail_on`` "security" on an exposure rated
    an error. ``data``: the knowledge data's date and origin (``--json``)."""
    if as_json:
        answer: dict[str, Any] = {
            "verdict": verdict(findings),
            "findings": [f.to_json() for f in findings],
            "security": security.to_json(),
        }
        if data is not None:
            answer["data"] = data
        click.echo(json.dumps(answer, indent=2))
    else:
        for f in findings:
            click.echo(f"{_MARK[f.severity]} {f.rule}: {f.message}")
            click.echo(f"     source: {f.source}")
        click.echo(f"verdict: {verdict(findings)}")
        for f in security.findings:
            click.echo(f"{_MARK[f.severity]} {f.rule}: {f.message}")
            click.echo(f"     source: {f.source}")
        if security.checked:
            counted = (
                "" if fail_on == "security" else " (in the exit status with --fail-on security)"
            )
            click.echo(f"security: {security.verdict}{counted}")
    return 1 if fails(verdict(findings), security.verdict, fail_on) else 0


_as_of_option = click.option(
    "--as-of",
    "as_of",
    metavar="YYYY-MM-DD",
    help="Judge driver end of life on this date (default today).",
)
_gpu_option = click.option(
    "--gpu",
    "gpus",
    multiple=True,
    metavar="NAME",
    help="GPU model (short or nvidia-smi name); repeatable.",
)
_fw_option = click.option(
    "--framework",
    "frameworks",
    multiple=True,
    metavar="SPEC",
    help="torch==V[+cuXYZ] or tensorflow==V; repeatable.",
)


@click.group("matrix")
def command() -> None:
    """The compatibility matrix: judge a stack, propose one, show and validate the data.

    \b
    Example:
      gpuhost matrix check --gpu V100 --cuda 13.0
    """


@command.command("check")
@_gpu_option
@click.option("--driver", metavar="V", help="NVIDIA driver version, e.g. 550.54.15.")
@click.option("--cuda", metavar="V", help="CUDA toolkit version, e.g. 12.4 or 12.4.1.")
@click.option("--cudnn", metavar="V", help="cuDNN version, e.g. 9.5.1.")
@_fw_option
@click.option(
    "--fabric-manager",
    "fabric_manager",
    metavar="V",
    help="Installed nvidia-fabricmanager version.",
)
@click.option(
    "--container-toolkit",
    "container_toolkit",
    metavar="V",
    help="Installed nvidia-container-toolkit version (judged against NVIDIA's advisories).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@fail_on_option("an incompatible stack")
@_as_of_option
def check_cmd(
    gpus: tuple[str, ...],
    driver: str | None,
    cuda: str | None,
    cudnn: str | None,
    frameworks: tuple[str, ...],
    fabric_manager: str | None,
    container_toolkit: str | None,
    as_json: bool,
    fail_on: str,
    as_of: str | None,
) -> int:
    """Judge a concrete stack: two answers, its compatibility (the verdict; exit 1 when
    incompatible) and, apart, its security exposure (NVIDIA bulletins affecting the driver or
    container toolkit; in the exit status only with --fail-on security).

    \b
    Example:
      gpuhost matrix check --gpu V100 --cuda 13.0 --json
      gpuhost matrix check --gpu H100 --driver 535.161.07 --cuda 12.2 --fail-on security
    """
    findings = check_stack(
        load_matrix(),
        gpus=list(gpus),
        driver=driver,
        cuda=cuda,
        cudnn=cudnn,
        frameworks=list(frameworks),
        fabric_manager=fabric_manager,
        container_toolkit=container_toolkit,
        as_of=_as_of(as_of),
    )
    security = exposure(load_advisories(), driver=driver, container_toolkit=container_toolkit)
    warn_if_stale()
    return _print_answers(findings, security, as_json, fail_on, data_info())


@command.command("resolve")
@_gpu_option
@_fw_option
@click.option("--cuda", metavar="V", help="Restrict to a CUDA series, e.g. 12 or 12.4.")
@click.option(
    "--os", "os_id", metavar="ID", help="OS the hosts run, e.g. debian-12 (one gpuhost provisions)."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@_as_of_option
def resolve_cmd(
    gpus: tuple[str, ...],
    frameworks: tuple[str, ...],
    cuda: str | None,
    os_id: str | None,
    as_json: bool,
    as_of: str | None,
) -> int:
    """Propose the newest supported, mutually compatible version set; exit 1 when none exists.
    Never a driver NVIDIA's security bulletins name as affected: the minimum is the first fixed
    one of its branch. With --framework, the cuDNN its wheel pins.

    \b
    Example:
      gpuhost matrix resolve --gpu H100 --framework torch==2.5.1
    """
    if os_id is not None and os_id not in installable_os():
        raise ConfigError(
            f"--os {os_id!r}: not an OS gpuhost can provision; expected one of "
            f"{', '.join(installable_os())} (docs/provision.md lists what each is tested on)"
        )
    try:
        res = resolve_stack(
            load_matrix(),
            gpus=list(gpus),
            frameworks=list(frameworks),
            cuda=cuda,
            os=os_id,
            as_of=_as_of(as_of),
        )
    except NoCompatibleSet as exc:
        if as_json:
            click.echo(
                json.dumps(
                    {
                        "driver": None,
                        "cuda": None,
                        "cudnn": None,
                        "frameworks": {},
                        "explain": exc.reasons,
                    },
                    indent=2,
                )
            )
        else:
            click.echo("no compatible set:")
            for reason in exc.reasons:
                click.echo(f"  - {reason}")
        return 1
    if as_json:
        click.echo(json.dumps(res.to_json(), indent=2))
        return 0
    click.echo(f"driver:  R{res.driver_branch} (>= {res.driver_min_version})")
    click.echo(f"cuda:    {res.cuda}")
    click.echo(f"cudnn:   {res.cudnn or 'none'}")
    for name, pin in res.frameworks.items():
        click.echo(f"{name + ':':8} {pin}")
    click.echo("why:")
    for line in res.explain:
        click.echo(f"  - {line}")
    return 0


@command.command("show")
@click.option("--gpu", "gpu", metavar="NAME", help="Show what is known about one GPU.")
@click.option(
    "--framework",
    "framework",
    metavar="SPEC",
    help="Show one release: torch==2.5.1 or tensorflow==2.19.0 (default build, variants).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (with --framework).")
def show_cmd(gpu: str | None, framework: str | None, as_json: bool) -> int:
    """Print a readable summary of the matrix, of one GPU, or of one framework release.

    \b
    Example:
      gpuhost matrix show --gpu H100
    """
    m = load_matrix()
    if framework is not None:
        return _show_framework(framework_answer(m, framework), as_json)
    if as_json:
        raise ConfigError("--json: only with --framework (torch==X or tensorflow==X)")
    if gpu is None:
        rows = [
            (
                minor.version,
                minor.ga.min_driver,
                minor.newest.min_driver,
                m.minor_compat[minor.major].min_driver,
            )
            for minor in reversed(m.cuda)
        ]
        click.echo(f"{'CUDA':6} {'GA driver':>12} {'newest update':>14} {'minor-compat floor':>19}")
        for r in rows:
            click.echo(f"{r[0]:6} {r[1]:>12} {r[2]:>14} {r[3]:>19}")
        click.echo(
            f"\n{len(m.gpus)} GPU models, {len(m.cudnn)} cuDNN releases, {len(m.pytorch)} "
            f"PyTorch releases, {len(m.tensorflow)} TensorFlow releases; "
            "gpuhost matrix render writes everything to docs/matrix.md"
        )
        return 0
    info = gpu_info(m, gpu)
    if info is None:
        raise ConfigError(
            f'--gpu "{gpu}": not a GPU the compatibility matrix lists; {unknown_gpu_hint(m, gpu)}'
        )
    arch = m.architecture_of(info.compute_capability)
    assert arch is not None
    cc = info.compute_capability
    click.echo(f"{info.name}: {info.model}")
    click.echo(
        f"  compute capability  {cc} ({info.architecture}; source {info.source}, {info.confidence})"
    )
    click.echo(f"  CUDA                {arch_cuda_range(arch, cc)}")
    last = f"R{info.last_driver_branch}" if info.last_driver_branch else "current"
    click.echo(f"  last driver branch  {last}")
    click.echo(
        f"  clocks              {info.clock_policy}"
        f"{' (GPU and memory)' if info.locked_memory_clocks else ''}"
    )
    click.echo(f"  kernel modules      {', '.join(info.kernel_modules)}")
    fm = {None: "depends on the system (NVSwitch)", False: "not used (PCIe)"}.get(
        info.fabric_manager, "yes"
    )
    click.echo(f"  fabric manager      {fm}")
    cudnn = [
        r.version
        for r in m.cudnn
        if any(package_runs_on(p, cc, arch) for p in cudnn_packages(r, None))
    ]
    click.echo(f"  cuDNN               {', '.join(cudnn) or 'none listed'}")
    wheels = [
        f"{t.version} {v.tag}"
        for t in m.pytorch
        for v in t.variants
        if v.archs is not None and cc_covered(v.archs, cc)
    ]
    click.echo(f"  torch wheels        {', '.join(wheels) or 'none confirmed'}")
    return 0


def _show_framework(answer: dict[str, Any], as_json: bool) -> int:
    if as_json:
        click.echo(json.dumps(answer, indent=2))
        return 0
    head = f"{answer['framework']} {answer['version']}"
    if "released" in answer:
        head += f" (released {answer['released']}, Python {', '.join(answer['python'])})"
    click.echo(head)
    default = answer["default_variant"]
    if default is None:
        click.echo(f"  default build   unknown: {answer.get('default_variant_unknown')}")
    else:
        libs = ", ".join(
            f"{k} {default[k]}" for k in ("cuda", "cudnn", "cublas", "nccl") if default.get(k)
        )
        floor = "" if default.get("exact", True) else " (or newer)"
        click.echo(f"  default build   {default['variant']}: {libs}{floor}")
        click.echo(f"                  {default['install']}")
    for var in answer["variants"]:
        archs = ", ".join(var["archs"]) if var["archs"] else "archs unknown"
        cudnn = f", cuDNN {var['cudnn']}" if var["cudnn"] else ""
        click.echo(f"  {var['variant']:15} CUDA {var['cuda']}{cudnn}, {var['channel']}, {archs}")
        click.echo(f"                  {var['install']}")
    if "tested" in answer:
        t = answer["tested"]
        click.echo(f"  tested with     CUDA {t['cuda']}, cuDNN {t['cudnn']} ({t['version']})")
    for url in answer["sources"]:
        click.echo(f"  source          {url}")
    return 0


@command.command("validate")
@click.argument("file", required=False, type=click.Path(dir_okay=False))
def validate_cmd(file: str | None) -> int:
    """Validate a matrix file (default: the one shipped with gpuhost, and with it the shipped
    GPU peaks the smoke test judges against); exit 2 when invalid.

    \b
    Example:
      gpuhost matrix validate
    """
    m = load_matrix(file)
    click.echo(
        f"{m.path}: valid ({len(m.cuda)} CUDA releases, {len(m.architectures)} "
        f"architectures, {len(m.gpus)} GPU models, {len(m.cudnn)} cuDNN, "
        f"{len(m.pytorch)} PyTorch, {len(m.tensorflow)} TensorFlow, "
        f"{len(m.driver_branches)} driver branches)"
    )
    if file is None:
        peaks = load_peaks()
        click.echo(
            f"{default_peaks_path()}: valid ({len(peaks.gpus)} GPU models with published peaks, "
            f"{len(peaks.no_reference)} listed without)"
        )
    return 0


@command.command("render")
@click.option(
    "--output",
    "-o",
    default="docs/matrix.md",
    show_default=True,
    help="Where to write the Markdown (- for standard output; the default is the checkout's).",
)
def render_cmd(output: str) -> int:
    """Write the matrix as Markdown (docs/matrix.md).

    \b
    Example:
      gpuhost matrix render -o docs/matrix.md
    """
    write_output(output, render_markdown(load_matrix()), "--output")
    if output != "-":
        click.echo(f"wrote {output}")
    return 0


@command.group("profile")
def profile_group() -> None:
    """Named, pinned version sets.

    \b
    Example:
      gpuhost matrix profile list
    """


_profiles_option = click.option(
    "--profiles",
    "profiles_file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="YAML file of user profiles, merged over the built-ins.",
)


@profile_group.command("list")
@_profiles_option
def profile_list_cmd(profiles_file: str | None) -> int:
    """List profiles.

    \b
    Example:
      gpuhost matrix profile list --profiles my-profiles.yaml
    """
    for name, p in sorted(load_profiles(profiles_file).items()):
        click.echo(f"{name:34} {p.description}")
    return 0


@profile_group.command("verify")
@click.argument("name")
@_profiles_option
@_gpu_option
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@fail_on_option("an incompatible profile")
@_as_of_option
def profile_verify_cmd(
    name: str,
    profiles_file: str | None,
    gpus: tuple[str, ...],
    as_json: bool,
    fail_on: str,
    as_of: str | None,
) -> int:
    """Verify profile NAME against the matrix (for the given GPUs); exit 1 when incompatible.
    Its driver's and container toolkit's security exposure is a separate answer (in the exit
    status only with --fail-on security).

    \b
    Example:
      gpuhost matrix profile verify nvidia-repo-580-cuda13.0 --gpu H100
    """
    profile = get_profile(load_profiles(profiles_file), name)
    findings = verify_profile(load_matrix(), profile, list(gpus), as_of=_as_of(as_of))
    security = exposure(
        load_advisories(),
        driver=profile.driver_version,
        container_toolkit=profile.container_toolkit,
    )
    return _print_answers(findings, security, as_json, fail_on)


command.add_command(sync_cmd)
command.add_command(advisories_sync_cmd)
