"""This round's inventory settings and options, given by an operator making mistakes: every bad
value is one line naming host and key, found vs expected (exit 2), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.errors import ConfigError
from gpuhost.inventory.loader import select
from tests.robustness.conftest import assert_one_line, gpuhost

# host data written as Python source: numbers too large for a float or for repr()
HUGE = [
    ("{'gpuhost_fabric': {'rate_gbps': 10**400}}", "gpuhost_fabric['rate_gbps']", "000... (int)"),
    ("{'gpuhost_fabric': {'rate_gbps': 10**5000}}", "gpuhost_fabric['rate_gbps']", "too long"),
    ("{'gpuhost_fabric': {'ports': 10**30}}", "gpuhost_fabric['ports']", "10000000"),
    ("{'gpuhost_collective_floor': 10**400}", "gpuhost_collective_floor", "too large"),
    ("{'gpuhost_collective_floor': -10**5000}", "gpuhost_collective_floor", "too long to print"),
    ("{'gpuhost_gpus': [10**5000]}", "gpuhost_gpus[0]", "too long to print"),
    ("{'gpuhost_expect': {'gpus': 10**30}}", "gpuhost_expect", "from 0 to 1,000,000,000"),
    ("{'gpuhost_expect': {'memory_mib': 10**5000}}", "gpuhost_expect", "too long to print"),
]


def _refused(tmp_path: Path, data: str) -> str:
    """The one-line error of an inventory whose host n1.invalid has ``data`` (Python source)."""
    path = tmp_path / "inv.py"
    path.write_text(f"gpu = [('n1.invalid', {data})]\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        select(str(path))
    message = str(err.value)
    assert message.startswith(f"{path}: host n1.invalid: ") and "\n" not in message
    return message.removeprefix(f"{path}: host n1.invalid: ")


@pytest.mark.parametrize(("data", "key", "named"), HUGE)
def test_huge_numbers_are_one_line(tmp_path: Path, data: str, key: str, named: str) -> None:
    message = _refused(tmp_path, data)
    assert message.startswith(f"{key}: found ") and named in message and len(message) < 600


@pytest.mark.parametrize("name", ["n1,n2", "n[1-4]", "-w", ".n1", "n1=x", "n*"])
def test_gpuhost_slurm_node_is_one_node_not_a_hostlist(tmp_path: Path, name: str) -> None:
    """srun -w takes a hostlist: 'n1,n2' as one node's name ran the test on two."""
    message = _refused(tmp_path, repr({"gpuhost_slurm_node": name}))
    assert message.startswith(f"gpuhost_slurm_node: found {name!r} (str), expected a Slurm node")


@pytest.mark.parametrize("folder", ["/opt/nccl\nrm -rf /", 'a"b', ""])
def test_nccl_tests_option_follows_the_inventory_key(tmp_path: Path, folder: str) -> None:
    """--nccl-tests took any text (a newline split the preflight's MISSING lines)."""
    inventory = tmp_path / "inv.py"
    inventory.write_text("gpu = ['n1.invalid', 'n2.invalid']\n", encoding="utf-8")
    run = gpuhost("check", str(inventory), "--tier", "collective", "--nccl-tests", folder)
    if folder:
        assert_one_line(run, 2, f"--nccl-tests: found {folder!r} (str), expected a folder path")
    else:  # empty: not given, as before
        assert_one_line(run, 2, "where is nccl-tests?")


@pytest.mark.parametrize("url", ["http://proxy:99999", "http://proxy:0", "http://proxy:x/"])
def test_a_proxy_port_out_of_range_is_refused_here(tmp_path: Path, url: str) -> None:
    """Written into apt's configuration on the host, it failed there, host by host."""
    message = _refused(tmp_path, repr({"gpuhost_proxy": url}))
    assert message.startswith(f"gpuhost_proxy: found {url!r} (str)")
    assert message.endswith("(its port is not 1-65535)")


@pytest.mark.parametrize(
    "proxy",
    [
        "http://u:pw%0Asslverify%3DFalse@proxy:3128",
        {"https": "http://u%0D%0Agpgcheck%3D0:pw@proxy:3128"},
        "http://u:pw%00@proxy:3128",
    ],
)
def test_a_proxy_whose_credentials_decode_to_a_control_character_is_refused_here(
    tmp_path: Path, proxy: object
) -> None:
    """dnf.conf gets the URL's credentials decoded (operations/dnf_proxy): a '%0A' in the
    password wrote a line of its own into [main] ('sslverify=False': TLS checks off for every
    repository) and into the guard's --setopt."""
    message = _refused(tmp_path, repr({"gpuhost_proxy": proxy}))
    where = "gpuhost_proxy" if isinstance(proxy, str) else "gpuhost_proxy['https']"
    assert message.startswith(f"{where}: found ")
    assert message.endswith("(its user name or password decodes to a control character)")


def test_a_proxy_password_with_escaped_printable_characters_is_kept(tmp_path: Path) -> None:
    from gpuhost.operations.dnf_proxy import proxy_settings

    url = "http://user:p%40ss%3Aw%25rd@proxy:3128"
    path = tmp_path / "inv.py"
    path.write_text(f"gpu = [('n1.invalid', {{'gpuhost_proxy': {url!r}}})]\n", encoding="utf-8")
    select(str(path))  # accepted
    assert proxy_settings({"https": url})["proxy_password"] == "p@ss:w%rd"


@pytest.mark.parametrize(
    ("data", "where", "found", "why"),
    [
        ({"gpuhost_proxy": "http://:3128"}, "gpuhost_proxy", "'http://:3128'", "it names no host"),
        ({"gpuhost_proxy": "http://u@:3128"}, "gpuhost_proxy", "'http://u@:3128'", "no host"),
        ({"gpuhost_proxy": {"https": "http://:3128"}}, "gpuhost_proxy['https']",
         "'http://:3128'", "it names no host"),
        ({"gpuhost_proxy": {"http": "http://proxy:99999"}}, "gpuhost_proxy['http']",
         "'http://proxy:99999'", "its port is not 1-65535"),
        ({"gpuhost_proxy": {"ftp": "http://proxy:3128"}}, "gpuhost_proxy['ftp']", "'ftp'",
         "a key it does not take"),
        ({"gpuhost_proxy": "http://u:p@ss@proxy:3128"}, "gpuhost_proxy", "",
         "more than one '@'; write an '@' in a user name or password as %40"),
        ({"gpuhost_bundle": {"url": "http://:8080/b", "key_sha256": "a" * 64}},
         "gpuhost_bundle", "", "it names no host"),
        ({"gpuhost_cuda_repo_url": "https://:443/repos/rhel9/x86_64/"}, "gpuhost_cuda_repo_url",
         "'https://:443/repos/rhel9/x86_64/'", "it names no host"),
        ({"gpuhost_cuda_repo_url": "https://mirror:70000/r/"}, "gpuhost_cuda_repo_url",
         "'https://mirror:70000/r/'", "its port is not 1-65535"),
    ],
    ids=["no host", "user no host", "mapping no host", "mapping port", "mapping key", "two @",
         "bundle no host", "repo no host", "repo port"],
)
def test_a_url_naming_no_host_or_two_users_is_refused_here(
    tmp_path: Path, data: dict[str, object], where: str, found: str, why: str
) -> None:
    """'http://:3128' passed and became dnf.conf's 'proxy=http://:3128' (every dnf command on
    the host then failed) and apt's proxy on no host; 'u:p@ss@proxy' is read differently by
    different clients (RFC 3986 3.2.1: no '@' in userinfo). A mapping's line said only the
    expected form, never which entry or why."""
    message = _refused(tmp_path, repr(data))
    assert message.startswith(f"{where}: found {found}"), message
    assert message.endswith(f"({why})") or why in message, message
