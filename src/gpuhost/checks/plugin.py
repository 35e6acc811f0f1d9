"""The pytest plugin of gpuhost's checks (pytest-testinfra): host selection, tiers, fixtures.

Loaded by ``conftest.py`` of :mod:`gpuhost.checks` and of the source tree's ``checks/``, or with
``pytest -p gpuhost.checks.plugin``.

Hosts: ``--inventory FILE`` (a pyinfra inventory; ``--limit`` names hosts or groups) becomes
testinfra's ``--hosts`` plus an ssh_config built from the inventory's connection data;
``--inventory @local`` or nothing checks this machine. Plain ``--hosts``/``--ssh-config`` work as
in testinfra (then each host's profile comes from its /etc/gpuhost/profile marker).

Tiers (markers): ``static`` (the default for a check without a tier marker), ``functional``,
``stress``. ``--tier static`` runs static checks, ``--tier functional`` (default) static and
functional, ``--tier stress`` all three. ``fabric`` is a tier of its own: ``--tier fabric`` runs
the checks marked ``fabric`` (checks/test_fabric.py) and nothing else; no other tier runs them.

Fixtures for every check module (test_ssh.py included): ``host`` (testinfra host, reachability
checked once), ``facts`` (checklib.HostFacts), ``inventory_data`` (the host's inventory data, {}
without an inventory), ``expected`` (gpuhost.checks_support.expected.Expected), ``profile``
(the profile name or None).
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

from gpuhost.checks.checklib import HostFacts, announced
from gpuhost.checks.progress import HostProgress
from gpuhost.checks_support import expected as expected_mod
from gpuhost.checks_support.inventory import CheckHost, load_hosts, ssh_config
from gpuhost.connection import openssh_cause
from gpuhost.errors import GpuhostError
from gpuhost.facts.probe_parsers import parse_os_release

TIERS = ("static", "functional", "stress")
# Tiers of their own: ``--tier fabric`` runs only the checks marked so, the tiers above never do.
SEPARATE_TIERS = ("fabric",)
HOSTS_KEY = pytest.StashKey[dict[str, CheckHost]]()
TMP_KEY = pytest.StashKey[str]()
_facts: dict[str, HostFacts] = {}
_expected: dict[str, expected_mod.Expected] = {}
_unreachable: dict[str, str] = {}
PROGRESS_KEY = pytest.StashKey[HostProgress]()
_progress: HostProgress | None = None
_reporter: Any = None
_pending: list[str] = []


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("gpuhost", "gpuhost checks")
    group.addoption(
        "--inventory",
        default=None,
        help="pyinfra inventory file, or @local for this machine (default)",
    )
    group.addoption(
        "--limit", default=None, help="comma-separated host names, globs or groups of the inventory"
    )
    group.addoption(
        "--profiles",
        default=None,
        help="profiles file for every host (in place of inventory data gpuhost_profiles_file)",
    )
    group.addoption(
        "--tier",
        default="functional",
        choices=TIERS + SEPARATE_TIERS,
        help="static | functional (static+functional, default) | stress (all) | fabric (the "
        "RDMA fabric's checks only)",
    )


def pytest_configure(config: pytest.Config) -> None:
    for tier, text in (
        ("static", "seconds: versions, holds, GPU health read from the host"),
        ("functional", "about a minute: the GPU smoke test, container smoke run"),
        ("stress", "opt-in, minutes: matmul burn, DCGM diag, nvbandwidth"),
        ("fabric", "seconds: RDMA ports, counters, GPUDirect RDMA, ACS/IOMMU, GPU/NIC affinity"),
    ):
        config.addinivalue_line("markers", f"{tier}: {text}")
    if not hasattr(config.option, "hosts"):  # testinfra's plugin not loaded (e.g. --help)
        return
    if config.option.hosts and config.getoption("inventory"):
        raise pytest.UsageError("give either --inventory or --hosts, not both")
    if config.option.hosts:
        return
    try:
        hosts = load_hosts(
            config.getoption("inventory"), config.getoption("limit"), config.getoption("profiles")
        )
        text = ssh_config(hosts, "{control_dir}")  # every value checked before anything is made
    except GpuhostError as exc:
        raise pytest.UsageError(str(exc)) from None
    config.stash[HOSTS_KEY] = {h.test_id: h for h in hosts}
    config.option.hosts = ",".join(h.spec for h in hosts)
    if any(h.spec.startswith("ssh://") for h in hosts) and not config.option.ssh_config:
        tmp = tempfile.mkdtemp(prefix="gpuhost-check-", dir=_control_base())
        config.stash[TMP_KEY] = tmp
        path = Path(tmp, "ssh_config")
        path.write_text(text.replace("{control_dir}", tmp))
        config.option.ssh_config = str(path)


# OpenSSH refuses a ControlPath of 108 bytes or more (a Unix socket's path); ours is
# FOLDER/%C (40 hex digits) plus ssh's 17-character temporary suffix, FOLDER being
# BASE/gpuhost-check-XXXXXXXX.
CONTROL_BASE_MAX = 107 - 17 - 41 - len("/gpuhost-check-XXXXXXXX")


def _control_base() -> str | None:
    """Where the run's ssh_config folder goes: the temporary folder ($TMPDIR), or /tmp when
    that path is too long for the ssh control sockets inside it (every host would else be
    'unreachable: ControlPath too long')."""
    return None if len(tempfile.gettempdir()) <= CONTROL_BASE_MAX else "/tmp"


def pytest_unconfigure(config: pytest.Config) -> None:
    tmp = config.stash.get(TMP_KEY, None)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)


def _selected(item: pytest.Item, tier: str) -> bool:
    """Whether ``--tier tier`` runs ``item``."""
    own = next((t for t in SEPARATE_TIERS if item.get_closest_marker(t)), None)
    if tier in SEPARATE_TIERS or own is not None:
        return own == tier
    return TIERS.index(_tier(item)) <= TIERS.index(tier)


def _tier(item: pytest.Item) -> str:
    for tier in reversed(TIERS):
        if item.get_closest_marker(tier):
            return tier
    item.add_marker("static")
    return "static"


@pytest.hookimpl(trylast=True)  # after pytest's own reordering by fixture parameters
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Keep the tier's checks; run them host by host in inventory order (each host's checks
    together, so hosts finish one after another and the progress lines say so)."""
    tier = config.getoption("tier") or "functional"
    keep: list[pytest.Item] = []
    drop: list[pytest.Item] = []
    inventory_order: dict[str, CheckHost] = config.stash.get(HOSTS_KEY, {})
    hosts = {key: index for index, key in enumerate(inventory_order)}
    for item in items:
        (keep if _selected(item, tier) else drop).append(item)
        # JUnit: each case names its host in a ``host`` property, set here at collection so a
        # case whose module-scoped fixture errors still carries it.
        callspec = getattr(item, "callspec", None)
        param = callspec.params.get("_testinfra_host") if callspec else None
        if param is not None:
            item.user_properties.append(("host", _host_id(param)))
            hosts.setdefault(_host_id(param), len(hosts))
    keep.sort(key=lambda item: hosts.get(_item_host(item) or "", len(hosts)))
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep
    config.stash[PROGRESS_KEY] = HostProgress(
        [host for item in keep if (host := _item_host(item)) is not None]
    )


def _item_host(item: pytest.Item) -> str | None:
    host = dict(item.user_properties).get("host")
    return None if host is None else str(host)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    progress = _progress
    host = dict(report.user_properties).get("host")
    if progress is None or host is None:
        return
    line = progress.report(str(host), report.when, report.outcome, hasattr(report, "wasxfail"))
    if line is not None:
        _pending.append(line)


@pytest.hookimpl(trylast=True)  # after pytest's own progress ([ 42%]) for the check
def pytest_runtest_logfinish() -> None:
    if _progress is not None and _progress.done < _progress.total:
        _write_pending(mid_run=True)  # the last host's line comes after pytest's [100%]


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtestloop() -> Generator[None, object, object]:
    result = yield
    _write_pending()
    return result


def _write_pending(mid_run: bool = False) -> None:
    """Write the finished hosts' lines; ``mid_run``: first end the open line of a check file
    with pytest's own ``[ 50%]``, as pytest does before the next file's line."""
    fill = getattr(_reporter, "_write_progress_information_filling_space", None)
    showing = getattr(_reporter, "_show_progress_info", False)
    if mid_run and _pending and callable(fill) and showing and _reporter.currentfspath:
        fill()
    while _pending and _reporter is not None:
        line = _pending.pop(0)
        failing = " failed" in line or " error" in line
        _reporter.write_line(line, red=failing, green=not failing)


def _host_id(testinfra_host: Any) -> str:
    return str(testinfra_host.backend.get_pytest_id())


def _unreachable_cause(stderr: str, key: str, entry: CheckHost | None) -> str:
    """One line for why ssh could not reach the host: a cause of gpuhost.connection, else the
    first line OpenSSH wrote."""
    name = entry.name if entry else key.removeprefix("ssh://")
    cause = openssh_cause(stderr, entry.data if entry else {}, name)
    if cause:
        return cause
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return lines[0] if lines else "ssh exited 255"


def _reach(config: pytest.Config, testinfra_host: Any) -> str:
    """Why the host cannot be reached over SSH (one line), or "" when it answers; asked once."""
    key = _host_id(testinfra_host)
    if key not in _unreachable:
        try:
            testinfra_host.run("true")
            _unreachable[key] = ""
        except RuntimeError as exc:  # ssh exit 255: no connection
            result = exc.args[0] if exc.args else exc
            stderr = str(getattr(result, "stderr", "") or result)
            entry = config.stash.get(HOSTS_KEY, {}).get(key)
            _unreachable[key] = _unreachable_cause(stderr, key, entry)
    return _unreachable[key]


@pytest.fixture(scope="module")
def host(request: pytest.FixtureRequest, _testinfra_host: Any) -> Any:
    """The testinfra host; a host that does not answer fails its checks at once, with the
    cause in one line (name does not resolve, refused, timed out, not SSH, authentication...)."""
    cause = _reach(request.config, _testinfra_host)
    if cause:
        pytest.fail(f"{_host_id(_testinfra_host)}: host unreachable: {cause}", pytrace=False)
    return _testinfra_host


def _inventory_data(config: pytest.Config, testinfra_host: Any) -> dict[str, Any]:
    entry = config.stash.get(HOSTS_KEY, {}).get(_host_id(testinfra_host))
    return dict(entry.data) if entry else {}


def _facts_of(testinfra_host: Any) -> HostFacts:
    key = _host_id(testinfra_host)
    if key not in _facts:
        _facts[key] = HostFacts(testinfra_host, key)
    return _facts[key]


def _expected_of(facts: HostFacts, data: dict[str, Any]) -> expected_mod.Expected:
    if facts.name not in _expected:
        _expected[facts.name] = expected_mod.resolve(
            facts.name, data, facts.marker, parse_os_release(facts.os_release).key
        )
    return _expected[facts.name]


@pytest.hookimpl(trylast=True)
def pytest_collection_finish(session: pytest.Session) -> None:
    """Before the first check runs: one line per host whose expected state cannot be known (no
    profile, an unknown profile...), said once here; the checks that need it still FAIL (never
    skip), each with a short line (``checklib.need_spec``). Unreachable hosts are left to the
    ``host`` fixture (each check fails with the cause)."""
    global _progress, _reporter
    config = session.config
    if config.option.collectonly or not session.items:
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    _progress, _reporter = config.stash.get(PROGRESS_KEY, None), reporter
    seen: dict[str, Any] = {}
    for item in session.items:
        callspec = getattr(item, "callspec", None)
        param = callspec.params.get("_testinfra_host") if callspec else None
        if param is not None and "expected" in getattr(item, "fixturenames", ()):
            seen.setdefault(_host_id(param), param)
    for testinfra_host in seen.values():
        if _reach(config, testinfra_host):
            continue
        facts = _facts_of(testinfra_host)
        expected = _expected_of(facts, _inventory_data(config, testinfra_host))
        if expected.spec is None or expected.plan is None:
            announced[facts.name] = expected.problem or f"{facts.name}: no expected state"
            if reporter is not None:
                reporter.write_line(
                    f"gpuhost check: {announced[facts.name]}. Every check that needs "
                    "the host's expected state fails.",
                    yellow=True,
                    bold=True,
                )


@pytest.fixture(scope="module")
def inventory_data(request: pytest.FixtureRequest, host: Any) -> dict[str, Any]:
    return _inventory_data(request.config, host)


@pytest.fixture(scope="module")
def facts(host: Any) -> HostFacts:
    return _facts_of(host)


@pytest.fixture(scope="module")
def expected(facts: HostFacts, inventory_data: dict[str, Any]) -> expected_mod.Expected:
    return _expected_of(facts, inventory_data)


@pytest.fixture(scope="module")
def profile(expected: expected_mod.Expected) -> str | None:
    return expected.profile
