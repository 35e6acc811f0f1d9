"""``gpuhost matrix``: check, resolve, show, validate and render the compatibility matrix,
and verify profiles. Exit codes: 0 ok/warn, 1 incompatible (or, with ``--fail-on security``,
affected by a security bulletin rated an error), 2 bad input."""

from __future__ import annotations

import click

from gpuhost.cli._echo import echo_lines, warn_if_stale
from gpuhost.cli._matrix_sync import advisories_sync_cmd, sync_cmd
from gpuhost.cli._options import fail_on_option
from gpuhost.datadir import data_info
from gpuhost.errors import ConfigError
from gpuhost.findings import Finding
from gpuhost.matrix import NoCompatibleSet, check_stack, load_matrix, resolve_stack, show
from gpuhost.matrix.advisories import Exposure, exposure, load_advisories
from gpuhost.matrix.frameworks import framework_answer
from gpuhost.matrix.profiles import get_profile, load_profiles, verify_profile
from gpuhost.matrix.render import render_markdown
from gpuhost.matrix.show import as_of_date, check_os_option
from gpuhost.output import write_output


def _print_answers(findings: list[Finding], security: Exposure, as_json: bool, fail_on: str) -> int:
    """The two answers, never mixed (``matrix.show.answer_lines``), with the data judged with
    (``datadir.data_info``; the staleness warning on stderr), and the exit status
    (``matrix.show.answer_code``)."""
    warn_if_stale()
    echo_lines(show.answer_lines(findings, security, as_json, fail_on, data_info()))
    return show.answer_code(findings, security, fail_on)


_as_of_option = click.option(
    "--as-of",
    "as_of",
    metavar="YYYY-MM-DD",
    help="Judge driver end of life on this date (default today).",
)


def _named_gpus(ctx: click.Context, param: click.Parameter, value: object) -> object:
    """``--gpu`` names a GPU: an empty or blank value is bad input (exit 2), never judged as an
    unknown GPU."""
    given = value if isinstance(value, tuple) else (value,)
    if any(isinstance(v, str) and not v.strip() for v in given):
        raise ConfigError("--gpu: empty value; expected a GPU model name, e.g. H100")
    return value


_gpu_option = click.option(
    "--gpu",
    "gpus",
    multiple=True,
    metavar="NAME",
    callback=_named_gpus,
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
@click.option(
    "--gpu-operator",
    "gpu_operator",
    metavar="V",
    help="NVIDIA GPU Operator release, e.g. 25.3.1 (judged against NVIDIA's advisories only).",
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
    gpu_operator: str | None,
    as_json: bool,
    fail_on: str,
    as_of: str | None,
) -> int:
    """Judge a concrete stack: two answers, its compatibility (the verdict; exit 1 when
    incompatible) and, apart, its security exposure (NVIDIA bulletins affecting the driver,
    container toolkit, CUDA Toolkit or GPU Operator; in the exit status only with
    --fail-on security).

    \b
    Example:
      gpuhost matrix check --gpu V100 --cuda 13.0 --json
      gpuhost matrix check --gpu H100 --driver 535.161.07 --cuda 12.2 --fail-on security
      gpuhost matrix check --gpu-operator 25.3.1
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
        as_of=as_of_date(as_of),
    )
    security = exposure(
        load_advisories(),
        driver=driver,
        container_toolkit=container_toolkit,
        cuda=cuda,
        gpu_operator=gpu_operator,
    )
    return _print_answers(findings, security, as_json, fail_on)


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
    check_os_option(os_id)
    warn_if_stale()
    try:
        res = resolve_stack(
            load_matrix(),
            gpus=list(gpus),
            frameworks=list(frameworks),
            cuda=cuda,
            os=os_id,
            as_of=as_of_date(as_of),
        )
    except NoCompatibleSet as exc:
        echo_lines(show.no_set_lines(exc.reasons, as_json, data_info()))
        return 1
    echo_lines(show.resolution_lines(res, as_json, data_info()))
    return 0


@command.command("show")
@click.option(
    "--gpu", "gpu", metavar="NAME", callback=_named_gpus, help="Show what is known about one GPU."
)
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
        lines = show.framework_lines(framework_answer(m, framework), as_json)
    elif as_json:
        raise ConfigError("--json: only with --framework (torch==X or tensorflow==X)")
    elif gpu is None:
        lines = show.summary_lines(m)
    else:
        lines = show.gpu_lines(m, gpu)
    echo_lines(lines)
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
    echo_lines(show.validated_lines(load_matrix(file), shipped=file is None))
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


@command.command("catalog")
@click.argument("pci_ids", type=click.Path(dir_okay=False))
@click.option("--origin", default="", help="Where the pci.ids came from, in words.")
@click.option(
    "--output",
    "-o",
    default="src/gpuhost/data/gpu_catalog.yaml",
    show_default=True,
    help="Where to write the catalog (- for standard output; the default is the checkout's).",
)
def catalog_cmd(pci_ids: str, origin: str, output: str) -> int:
    """Maintainers: generate the GPU catalog from a PCI ID database and NVIDIA's CUDA GPU
    tables (data/cuda_gpu_tables.yaml) with the matrix's GPU rows (docs/knowledge.md).

    \b
    Example:
      gpuhost matrix catalog /usr/share/misc/pci.ids --origin "Debian pci.ids 0.0~2026.10.24-1"
    """
    from gpuhost.knowledge.gpu_catalog import shipped_generate

    write_output(output, shipped_generate(pci_ids, origin), "--output")
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
    findings = verify_profile(load_matrix(), profile, list(gpus), as_of=as_of_date(as_of))
    security = exposure(
        load_advisories(),
        driver=profile.driver_version,
        container_toolkit=profile.container_toolkit,
    )
    return _print_answers(findings, security, as_json, fail_on)


command.add_command(sync_cmd)
command.add_command(advisories_sync_cmd)
