"""The inventory data contract and the one loader: every bad inventory is one line and exit 2,
before any host is contacted (the hosts below do not exist: a connection attempt would show)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuhost.errors import ConfigError
from gpuhost.inventory import contract
from gpuhost.inventory.loader import limit_names, load_inventory, select
from gpuhost.inventory.render import render_markdown
from tests.robustness.conftest import ROOT, a_builtin_profile, assert_one_line, gpuhost

# (data of host n1, what the one line must name)
BAD_DATA = [
    ({"gpuhost_gpus": "Tesla K80"}, ["gpuhost_gpus", "'Tesla K80' (str)", "list of GPU names"]),
    ({"gpuhost_install_cuda": "no"}, ["gpuhost_install_cuda", "'no' (str)", "true or false"]),
    ({"gpuhost_fabric_manager": "false"}, ["gpuhost_fabric_manager", "'false'"]),
    ({"gpuhost_harden": 0}, ["gpuhost_harden", "0 (int)", "true or false"]),
    ({"gpuhost_clocks_mode": "max"}, ["gpuhost_clocks_mode", "unknown gpuhost key"]),
    ({"gpuhost_profle": "x"}, ["gpuhost_profle", "did you mean gpuhost_profile"]),
    ({"ssh_port": "twenty-two"}, ["ssh_port", "'twenty-two'", "1-65535"]),
    ({"ssh_port": 0}, ["ssh_port", "0 (int)"]),
    (
        {"ssh_hostnme": "10.0.0.1"},
        ["ssh_hostnme", "not a key pyinfra", "did you mean ssh_hostname"],
    ),
    ({"gpuhost_env": ["A=1"]}, ["gpuhost_env", "['A=1']", "mapping"]),
    ({"gpuhost_env": {"A-B": "1"}}, ["gpuhost_env", "not a shell variable name"]),
    ({"gpuhost_pythons": 3}, ["gpuhost_pythons", "3 (int)", "interpreter paths"]),
    ({"gpuhost_pythons": ["python3; rm"]}, ["gpuhost_pythons[0]", "not a plain interpreter"]),
    ({"gpuhost_ssh_authorized_keys": {"ops": ["k", 5]}}, ["gpuhost_ssh_authorized_keys['ops'][1]"]),
    ({"gpuhost_firewall_allow_tcp": [80, True]}, ["gpuhost_firewall_allow_tcp[1]", "True"]),
    ({"gpuhost_ssh_permit_root_login": "yes"}, ["gpuhost_ssh_permit_root_login", "'yes'"]),
    ({"gpuhost_dcgm_level": 5}, ["gpuhost_dcgm_level", "2 or 3"]),
    ({"gpuhost_cuda_repo_key_sha256": "abc"}, ["gpuhost_cuda_repo_key_sha256", "64 hex"]),
    (
        {"gpuhost_cuda_repo_key_sha256": "a" * 64},
        ["gpuhost_cuda_repo_key_sha256 is set but gpuhost_cuda_repo_key is not"],
    ),
    (
        {"gpuhost_ssh_permit_root_login": "no", "ssh_user": "root"},
        ["gpuhost_ssh_permit_root_login", "ssh_user is 'root'"],
    ),
    ({"gpuhost_profiles_file": "no-such.yaml"}, ["gpuhost_profiles_file", "no-such.yaml"]),
    (
        {"gpuhost_ssh_allow_users": ["ops", "adm*"], "ssh_user": "deploy"},
        ["does not admit ssh_user 'deploy'", "lock gpuhost out"],
    ),
    (
        {"gpuhost_ssh_remove_unlisted_keys": True, "ssh_user": "ops"},
        ["gpuhost_ssh_remove_unlisted_keys is true", "no key for ssh_user 'ops'"],
    ),
    # refused by harden only once it had reached the host (inventory check said ok)
    (
        {"gpuhost_firewall_roles": ["slurm-compte"]},
        ["gpuhost_firewall_roles", "'slurm-compte'", "did you mean 'slurm-compute'", "known: "],
    ),
    (
        {"gpuhost_firewall_cluster_subnets": ["10.0.0.0/33"]},
        ["gpuhost_firewall_cluster_subnets", "'10.0.0.0/33'", "e.g. '10.0.0.0/8'"],
    ),
    ({"gpuhost_firewall_ssh_sources": ["10.1.2"]}, ["gpuhost_firewall_ssh_sources", "'10.1.2'"]),
    # found by a bad-input probe: accepted before
    ({"gpuhost_cuda_repo_url": "ftp://x/"}, ["gpuhost_cuda_repo_url", "'ftp://x/'", "http(s) URL"]),
    (
        {"gpuhost_firewall_cluster_subnets": ["10.0.0.1/8"]},
        ["'10.0.0.1/8' has host bits set", "such as '10.0.0.0/8'"],
    ),
    (  # a second sshd_config line smuggled into one entry
        {"gpuhost_ssh_extra_config": ["MaxAuthTries 3\nPermitRootLogin yes"]},
        ["gpuhost_ssh_extra_config[0]", "one line each"],
    ),
]


def _write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "inv.py"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("data", "named"), BAD_DATA)
def test_bad_host_data_is_refused_naming_host_key_found_expected(tmp_path, data, named) -> None:
    path = _write(tmp_path, f"gpu = [('n1.invalid', {data!r}), 'n2.invalid']\n")
    with pytest.raises(ConfigError) as err:
        select(path)
    message = str(err.value)
    assert message.startswith(f"{path}: host n1.invalid: ") and "\n" not in message
    for part in named:
        assert part in message


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("gpu = ['n1', 'n1']\n", "host n1 is listed 2 times in group 'gpu'"),
        (
            "a = [('n1', {'gpuhost_profile': 'x'})]\nb = [('n1', {'gpuhost_profile': 'y'})]\n",
            "host n1: gpuhost_profile is 'x' (str) in group 'a' but 'y' (str) in group 'b'",
        ),
        ("x = 1\n", "the inventory has no hosts"),
        ("import sys\nsys.exit(3)\n", "called sys.exit(3)"),
        ("gpu = ['n1']\nraise RuntimeError('boom')\n", "RuntimeError: boom (line 2)"),
        ("gpu = [\n", "SyntaxError"),
        ("gpu = ['n1']\nimport no_such_module_xyz\n", "ModuleNotFoundError"),
        # malformed entries: pyinfra's bare IndexError / TypeError before
        ("gpu = [('n1',)]\n", "group 'gpu' entry 0: found ('n1',), expected a host name"),
        ("gpu = ['n0', ('n1', None)]\n", "group 'gpu' entry 1: found ('n1', None)"),
        ("gpu = ['']\n", "group 'gpu' entry 0: found '' (str)"),
        ("gpu = [('n1', [1])]\n", "or a (name, {data}) pair"),
        ("gpu = (['n1'], 5)\n", "group 'gpu' is (['n1'], 5): expected a list of hosts, or a"),
        (  # a RecursionError of 3000 lines before
            "d = {}\nd['a'] = d\ngpu = [('n1', {'gpuhost_env': d})]\n",
            "host n1: its data contains itself or is nested too deeply",
        ),
    ],
)
def test_bad_inventory_files_are_one_config_error(tmp_path, text, named) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        select(path)
    assert named in str(err.value) and str(err.value).startswith(path)


def test_consistent_lockout_settings_pass(tmp_path) -> None:
    data = {
        "ssh_user": "admin",
        "gpuhost_ssh_allow_users": ["ops", "adm*@10.0.0.0/8"],
        "gpuhost_ssh_remove_unlisted_keys": True,
        "gpuhost_ssh_authorized_keys": {"admin": ["ssh-ed25519 AAAA admin@laptop"]},
    }
    assert select(_write(tmp_path, f"gpu = [('n1', {data!r})]\n")).names == ["n1"]


def test_the_same_host_in_two_groups_is_fine(tmp_path) -> None:
    path = _write(tmp_path, "a = [('n1', {'gpuhost_gpus': ['T4']})]\nb = ['n1', 'n2']\n")
    assert select(path).names == ["n1", "n2"]


def test_tuples_are_lists_and_none_is_unset(tmp_path) -> None:
    path = _write(
        tmp_path, "gpu = [('n1', {'gpuhost_gpus': ('Tesla T4',), 'gpuhost_profile': None})]\n"
    )
    selection = select(path)
    assert contract.value(selection.data("n1"), "gpuhost_install_cuda") is True
    assert contract.value(selection.data("n1"), "gpuhost_profile") is None


def test_limit_has_one_meaning(tmp_path) -> None:
    path = _write(tmp_path, "gpu = ['n2', 'n1']\nlogin = ['login-a', 'login-b']\nempty = []\n")
    inventory = load_inventory(path)
    names = [h.name for h in inventory]
    assert limit_names(inventory, names, "login") == ["login-a", "login-b"]
    # comma lists and repeated options are the same; the result keeps inventory order
    assert limit_names(inventory, names, "login-b,n1") == ["n1", "login-b"]
    assert limit_names(inventory, names, ["login-b", "n1"]) == ["n1", "login-b"]
    assert limit_names(inventory, names, "N1" if False else "n*") == ["n2", "n1"]
    for item in ("N1", "nope", "empty"):  # case-sensitive; every item must match something
        with pytest.raises(ConfigError, match=f"--limit {item}: matches no host or group"):
            limit_names(inventory, names, f"n1,{item}")


def test_only_the_selected_hosts_are_checked(tmp_path) -> None:
    path = _write(tmp_path, "a = ['n1']\nb = [('n2', {'gpuhost_harden': 'no'})]\n")
    assert select(path, limit="a").names == ["n1"]
    with pytest.raises(ConfigError, match="host n2: gpuhost_harden"):
        select(path)


def test_docs_inventory_md_is_up_to_date() -> None:
    doc = ROOT / "docs" / "inventory.md"
    assert doc.read_text(encoding="utf-8") == render_markdown(), (
        "docs/inventory.md is stale: run `gpuhost inventory render`"
    )


def test_every_gpuhost_key_the_code_reads_is_in_the_contract() -> None:
    import re

    read = set()
    for folder in ("src/gpuhost", "deploys"):
        for file in (ROOT / folder).rglob("*.py"):
            text = file.read_text(encoding="utf-8")
            read |= set(re.findall(r"data\.get\(\s*[\"'](gpuhost_[a-z0-9_]+)[\"']", text))
            read |= set(re.findall(r"^\s*[\"'](gpuhost_[a-z0-9_]+)[\"']:", text, re.M))
    read -= {k for k in read if k.startswith("gpuhost_audit_")} | {
        "gpuhost_version"
    }  # report fields
    assert read - set(contract.KEYS) == set()


# every command that takes an inventory: (command words before it, options after it)
COMMANDS = [
    ("audit", ""),
    ("provision", "--dry"),
    ("harden", "--dry"),
    ("check", ""),
    ("inventory check", ""),
    ("snapshot take", ""),
    ("upgrade", f"--to {a_builtin_profile()} --dry"),
    ("rollback", ""),
]


@pytest.mark.parametrize(("command", "options"), COMMANDS)
def test_every_command_refuses_bad_data_before_connecting(tmp_path, command, options) -> None:
    path = _write(tmp_path, "gpu = [('n1.invalid', {'gpuhost_install_cuda': 'no'})]\n")
    run = gpuhost(*command.split(), path, *options.split())
    assert_one_line(run, 2, path, "host n1.invalid", "gpuhost_install_cuda", "'no'")
    assert "unreachable" not in run.out + run.err


@pytest.mark.parametrize(("command", "options"), COMMANDS)
def test_every_command_refuses_an_empty_inventory(tmp_path, command, options) -> None:
    path = _write(tmp_path, "# nothing yet\n")
    run = gpuhost(*command.split(), path, *options.split())
    assert_one_line(run, 2, path, "has no hosts")


@pytest.mark.parametrize(("command", "options"), COMMANDS)
def test_every_command_refuses_an_inventory_that_exits(tmp_path, command, options) -> None:
    path = _write(tmp_path, "import sys\nsys.exit(3)\n")
    run = gpuhost(*command.split(), path, *options.split())
    assert_one_line(run, 2, path, "called sys.exit(3)")


@pytest.mark.parametrize("deploy", ["deploys/provision.py", "deploys/harden.py"])
def test_plain_pyinfra_deploys_check_the_data_too(tmp_path, deploy) -> None:
    import subprocess
    import sys

    path = _write(tmp_path, "hosts = [('@local', {'gpuhost_install_cuda': 'no'})]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "pyinfra", path, deploy, "--dry", "-y"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text
    line = "gpuhost: error: host @local: gpuhost_install_cuda: found 'no' (str)"
    assert line in text and "Starting operation" not in text


# `snapshot take` covers the whole inventory (no --limit)
@pytest.mark.parametrize(("command", "options"), [c for c in COMMANDS if c[0] != "snapshot take"])
def test_every_command_refuses_a_limit_matching_nothing(tmp_path, command, options) -> None:
    path = _write(tmp_path, "gpu = ['n1.invalid']\n")
    run = gpuhost(*command.split(), path, *options.split(), "--limit", "gpu,nope")
    assert_one_line(run, 2, "--limit nope: matches no host or group", "groups: gpu")


def test_ssh_keys_pyinfra_reads_pass_even_when_gpuhost_does_not_list_them() -> None:
    data = {
        "ssh_password": "x",
        "ssh_allow_agent": False,
        "ssh_look_for_keys": False,
        "ssh_connect_timeout": 5,
        "ssh_file_transfer_protocol": "scp",
    }
    assert contract.host_problems(data) == []


_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6) | st.integers(), inner, max_size=3)
    ),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from([*contract.KEYS, "gpuhost_x", "other"]), _values))
def test_the_contract_judges_any_data_in_one_line_per_problem(data: dict) -> None:
    problems = contract.host_problems(data)
    assert all(isinstance(p, str) and "\n" not in p for p in problems)
    if not problems:  # what passes reads back with its defaults
        for key in contract.KEYS:
            contract.value(data, key)


@pytest.mark.parametrize("inventory", [False, True])
def test_a_bad_python_option_is_bad_input_not_an_unreachable_host(tmp_path, inventory) -> None:
    args = [_write(tmp_path, "gpu = ['n1.invalid']\n")] if inventory else []
    run = gpuhost("audit", *args, "--python", "python3;reboot")
    assert_one_line(run, 2, "--python 'python3;reboot' is not a plain interpreter path")
    assert "unreachable" not in run.out


@pytest.mark.parametrize("example", ["inventories/fleet.py", "inventories/local.py"])
def test_the_example_inventories_keep_the_contract(example) -> None:
    # (inventories/lab.py needs a running lab, inventories/vagrant.py needs vagrant)
    assert select(str(ROOT / example)).names


# --- what installing a profile needs: NVIDIA's CUDA repository URL, key and key SHA-256 ---------

REPO = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"
REPO_DATA = {
    "gpuhost_cuda_repo_url": REPO,
    "gpuhost_cuda_repo_key": REPO + "3bf863cc.pub",
    "gpuhost_cuda_repo_key_sha256": "a" * 64,
}


def _nvidia_repo_profile() -> str:
    from gpuhost.matrix.profiles import load_profiles

    return next(n for n, p in sorted(load_profiles().items()) if p.source == "nvidia-cuda-repo")


def _debian_profile() -> str:
    from gpuhost.matrix.profiles import load_profiles

    return next(n for n, p in sorted(load_profiles().items()) if p.source == "debian-nonfree")


@pytest.mark.parametrize("missing", sorted(REPO_DATA))
@pytest.mark.parametrize("command", [["inventory", "check"], ["provision"], ["provision", "--dry"]])
def test_an_nvidia_repository_profile_without_its_key_data_is_refused_before_connecting(
    tmp_path, missing, command
) -> None:
    data = {k: v for k, v in REPO_DATA.items() if k != missing}
    if missing == "gpuhost_cuda_repo_key":  # the contract refuses the checksum alone first
        data.pop("gpuhost_cuda_repo_key_sha256")
        missing = "gpuhost_cuda_repo_key"
    data["gpuhost_profile"] = profile = _nvidia_repo_profile()
    path = _write(tmp_path, f"gpu = ['n0.invalid', ('n1.invalid', {data!r})]\n")
    # n0 names no profile (nothing to install from the repository): only n1 is refused
    run = gpuhost(*command[:1], *command[1:2], path, *command[2:])
    assert_one_line(
        run,
        2,
        f"{path}: host n1.invalid: {missing}: not set; profile {profile} installs from NVIDIA's "
        "CUDA repository",
    )
    assert "unreachable" not in run.out and "Connected" not in run.out


def test_the_repository_data_is_not_asked_of_a_debian_profile_nor_by_the_audit(tmp_path) -> None:
    debian = _write(
        tmp_path, f"gpu = [('n1.invalid', {{'gpuhost_profile': {_debian_profile()!r}}})]\n"
    )
    assert select(debian, uses_profiles=True, installs=True).names == ["n1.invalid"]
    nvidia = tmp_path / "nvidia.py"
    nvidia.write_text(
        f"gpu = [('n1.invalid', {{'gpuhost_profile': {_nvidia_repo_profile()!r}}})]\n"
    )
    # judging a host against the profile (audit, check) needs no repository data
    assert select(str(nvidia), uses_profiles=True).names == ["n1.invalid"]
    with pytest.raises(ConfigError, match="gpuhost_cuda_repo_url: not set"):
        select(str(nvidia), uses_profiles=True, installs=True)


def test_upgrade_to_an_nvidia_repository_profile_needs_the_key_data(tmp_path) -> None:
    path = _write(
        tmp_path, f"gpu = [('n1.invalid', {{'gpuhost_profile': {_debian_profile()!r}}})]\n"
    )
    target = _nvidia_repo_profile()
    run = gpuhost("upgrade", path, "--to", target, "--dry")
    assert_one_line(run, 2, f"--to {target!r}: host n1.invalid: gpuhost_cuda_repo_url: not set")
    with_data = {"gpuhost_profile": _debian_profile(), **REPO_DATA}
    path = _write(tmp_path, f"gpu = [('n1.invalid', {with_data!r})]\n")
    assert gpuhost("upgrade", path, "--to", target, "--dry").code == 0


# --- group_data/: a problem names the file that set the value ---------------------------------


def _with_group_data(tmp_path: Path, files: dict[str, str]) -> str:
    (tmp_path / "group_data").mkdir()
    for name, text in files.items():
        (tmp_path / "group_data" / name).write_text(text, encoding="utf-8")
    return _write(tmp_path, "gpu = ['n1.invalid', ('n2.invalid', {'gpuhost_harden': 'no'})]\n")


def test_a_bad_value_from_group_data_names_its_file(tmp_path) -> None:
    path = _with_group_data(
        tmp_path, {"gpu.py": "gpuhost_install_cuda = 'no'\n", "all.py": "gpuhost_dcgm_level = 5\n"}
    )
    with pytest.raises(ConfigError) as err:
        select(path, limit="n1.invalid")
    message = str(err.value)
    gpu, every = tmp_path / "group_data" / "gpu.py", tmp_path / "group_data" / "all.py"
    expected = f"gpuhost_install_cuda: found 'no' (str), expected true or false (set in {gpu})"
    assert expected in message
    assert "gpuhost_dcgm_level: found 5 (int)" in message and f"(set in {every})" in message
    with pytest.raises(ConfigError) as err:
        select(path, limit="n2.invalid")
    # the host's own line in the inventory: no file added (the message starts with the inventory)
    assert "gpuhost_harden: found 'no' (str), expected true or false" in str(err.value)
    assert "gpuhost_harden: found 'no' (str), expected true or false (set" not in str(err.value)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("x = 1 / 0\n", "ZeroDivisionError: division by zero (group_data/gpu.py line 1)"),
        ("a = 1\ngpu = [\n", "SyntaxError: '[' was never closed (group_data/gpu.py line 2)"),
    ],
)
def test_a_group_data_file_that_fails_to_load_is_named(tmp_path, text, said) -> None:
    path = _with_group_data(tmp_path, {"gpu.py": text})
    with pytest.raises(ConfigError) as err:
        select(path)
    assert str(err.value).startswith(f"{path}: cannot load inventory: ")
    assert said.replace("group_data/", f"{tmp_path}/group_data/") in str(err.value)


@pytest.mark.parametrize("limit", ["", ",", " , "])
def test_an_empty_limit_is_refused_not_every_host(tmp_path, limit) -> None:
    path = _write(tmp_path, "gpu = ['n1.invalid', 'n2.invalid']\n")
    run = gpuhost("inventory", "check", path, "--limit", limit)
    assert_one_line(run, 2, "--limit: an empty value")


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "0", "soon"])
@pytest.mark.parametrize("option", ["--drain-timeout", "--reboot-timeout"])
def test_upgrade_timeouts_are_positive_finite_seconds(tmp_path, option, value) -> None:
    path = _write(tmp_path, "gpu = ['n1.invalid']\n")
    run = gpuhost("upgrade", path, "--to", a_builtin_profile(), "--dry", option, value)
    assert run.code == 2 and f"Invalid value for '{option}'" in run.err, run.err


def test_seconds_are_finite() -> None:
    problem = contract.key_problem("gpuhost_smoke_timeout", float("inf"))
    assert problem is not None and problem.startswith("gpuhost_smoke_timeout: found inf (float)")
    assert contract.key_problem("gpuhost_smoke_timeout", 90.5) is None


def test_upgrade_dry_reads_the_provider_config(tmp_path) -> None:
    """--dry never read --provider-config: 'type: cmd' passed the dry run, failed the real one."""
    config = tmp_path / "provider.yaml"
    config.write_text("type: cmd\n")
    path = _write(tmp_path, "gpu = ['n1.invalid']\n")
    run = gpuhost(
        "upgrade", path, "--to", a_builtin_profile(), "--dry", "--provider-config", str(config)
    )
    assert_one_line(run, 2, f"{config}: type is 'cmd', expected 'command' or 'openstack'")
