"""The upgrade's install runs a deploy in this process (``upgrade.deploy_batch``), with
``gpuhost provision``'s runner, on this machine's ``@local`` host (the deploys only run ``true``,
``exit``, ``test``: nothing here changes). Hosts that cannot be reached are chroot hosts pointed
at directories that do not exist."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from pyinfra import host
from pyinfra.operations import server

from gpuhost.errors import DeployError, HostError
from gpuhost.inventory.loader import InventoryHost
from gpuhost.upgrade.connect import Canceller
from gpuhost.upgrade.deploy_batch import DeployBatcher, DeployRequest, error_lines, outcome_error


def _request(tmp_path, name: str, data: dict | None = None) -> DeployRequest:
    log = tmp_path / "logs" / f"{name.strip('@').replace('/', '_')}.log"
    return DeployRequest(InventoryHost(name, dict(data or {}), ("gpu",)), log)


def _two_commands() -> None:
    server.shell(name="say true", commands=["true"])
    server.shell(name="test a directory", commands=["test -d /"])


def test_the_deploy_runs_in_process_and_logs_to_the_hosts_file(tmp_path) -> None:
    batcher = DeployBatcher(_two_commands, Canceller())
    request = _request(tmp_path, "@local")
    batcher.deploy(request)
    log = request.log_path.read_text()
    assert "[@local] Starting operation: say true" in log
    assert "[@local] Starting operation: test a directory" in log
    assert log.splitlines()[-1] == "gpuhost: @local: ok, 2 changed, 0 unchanged"
    assert batcher.runs == [["@local"]]


def test_host_data_and_groups_reach_the_deploy(tmp_path) -> None:
    seen: dict[str, object] = {}

    def deploy() -> None:
        seen["profile"] = host.data.get("gpuhost_profile")
        seen["in gpu group"] = "gpu" in host.groups

    DeployBatcher(deploy, Canceller()).deploy(
        _request(tmp_path, "@local", {"gpuhost_profile": "p2"})
    )
    assert seen == {"profile": "p2", "in gpu group": True}


def test_a_guard_refuses_through_the_error_hierarchy(tmp_path) -> None:
    def deploy() -> None:
        raise DeployError(host.name, "profile p2: Secure Boot is on and no signing key is set")

    request = _request(tmp_path, "@local")
    with pytest.raises(HostError) as caught:
        DeployBatcher(deploy, Canceller()).deploy(request)
    assert str(caught.value) == (
        "@local: deploy refused: profile p2: Secure Boot is on and no signing key is set "
        f"(log {request.log_path})"
    )


def test_a_failed_operation_is_named_with_its_error_lines(tmp_path) -> None:
    def deploy() -> None:
        server.shell(name="say true", commands=["true"])
        server.shell(
            name="install it", commands=["echo 'E: Unable to locate package x' >&2; exit 100"]
        )

    request = _request(tmp_path, "@local")
    with pytest.raises(HostError) as caught:
        DeployBatcher(deploy, Canceller()).deploy(request)
    message = str(caught.value)
    assert message.startswith("@local: deploy failed: operation failed: install it (")
    assert "E: Unable to locate package x" in message
    assert message.endswith(f"(log {request.log_path})")
    assert "E: Unable to locate package x" in request.log_path.read_text()


def test_a_stop_ends_the_deploy_at_the_next_operation(tmp_path) -> None:
    canceller = Canceller()

    def deploy() -> None:
        server.shell(name="first", commands=["true"])
        server.shell(name="second", commands=["true"])

    request = _request(tmp_path, "@local")
    batcher = DeployBatcher(deploy, canceller)
    original = canceller.track_state

    def track(state: object) -> None:  # cancel once the run's hosts exist (as Ctrl-C would)
        original(state)  # type: ignore[arg-type]
        if state is not None:
            canceller.cancel()

    canceller.track_state = track  # type: ignore[method-assign]
    with pytest.raises(HostError, match="@local: stopped by the operator"):
        batcher.deploy(request)
    assert "Starting operation: first" not in request.log_path.read_text()
    with pytest.raises(HostError, match="stopped by the operator"):
        batcher.deploy(request)  # a stopped run starts no other deploy
    assert batcher.runs == [["@local"]]


BATCH_SCENARIO = """
import json, sys, threading, time
from pathlib import Path
from pyinfra import host
from pyinfra.operations import server
from gpuhost.errors import HostError
from gpuhost.inventory.loader import InventoryHost
from gpuhost.upgrade.connect import Canceller
from gpuhost.upgrade.deploy_batch import DeployBatcher, DeployRequest
from gevent import monkey
# as gpuhost upgrade runs: modules imported first, then threading patched for gevent
# (pyinfra_adapter.ensure_gevent), so worker threads are greenlets
monkey.patch_all()

tmp = Path(sys.argv[1])

def deploy():
    if host.name == "@local":  # the first run goes on once both others are queued
        deadline = time.monotonic() + 30
        while len(batcher._pending) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.2)  # the other deploy's worker waits for this run meanwhile
    server.shell(name="say true", commands=["true"])

def other_deploy():
    server.shell(name="say true", commands=["true"])

batcher = DeployBatcher(deploy, Canceller())
other = DeployBatcher(other_deploy, Canceller())  # e.g. a rollback beside the installs
errors = {}

def ask(name, which=None):
    log = tmp / (name.replace("/", "_") + ".log")
    try:
        (which or batcher).deploy(DeployRequest(InventoryHost(name, {}, ()), log))
    except HostError as exc:
        errors[name] = str(exc)

first = threading.Thread(target=ask, args=("@local",))
first.start()
while not batcher.runs:
    time.sleep(0.02)
missing = [f"@chroot/{tmp}/missing{i}" for i in (1, 2)]
others = [threading.Thread(target=ask, args=(name,)) for name in missing]
others.append(threading.Thread(target=ask, args=(f"@chroot/{tmp}/missing3", other)))
for thread in others:
    thread.start()
for thread in [first, *others]:
    thread.join(60)
alive = [t.name for t in [first, *others] if t.is_alive()]
print(json.dumps({"runs": batcher.runs, "other": other.runs, "errors": errors,
                  "missing": missing, "alive": alive}))
"""


def test_hosts_asking_while_a_deploy_runs_go_together_in_the_next(tmp_path) -> None:
    """Three upgrade workers reach the install: the first runs alone, the two that ask while it
    runs are deployed together in the second run (not one run each); a fourth worker's other
    deploy (a rollback) waits for its turn without blocking the workers of the running one."""
    script = tmp_path / "scenario.py"
    script.write_text(BATCH_SCENARIO)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    missing = result["missing"]
    assert result["alive"] == []  # no worker blocked the others (one lock, gevent's)
    assert result["runs"] == [["@local"], missing]
    assert len(result["other"]) == 1  # the other batcher's run came in turn
    missing = [*missing, *result["other"][0]]
    assert sorted(result["errors"]) == sorted(missing)  # @local ok, the others unreachable
    assert all(": deploy could not connect: " in result["errors"][n] for n in missing)
    assert "gpuhost: @local: ok, 1 changed, 0 unchanged" in (tmp_path / "@local.log").read_text()


def test_error_lines_keep_the_errors_of_a_hosts_log() -> None:
    log = (
        "[h1] Starting operation: gpuhost provision | Install NVIDIA driver | Pin\n"
        "[h1] Success\n"
        "[h1] E: Sub-process /usr/bin/dpkg returned an error code (1)\n"
        "[h1] Error: executed 1 commands\n"
    )
    assert error_lines(log) == (
        "E: Sub-process /usr/bin/dpkg returned an error code (1) | Error: executed 1 commands"
    )


def test_a_bug_on_one_host_of_a_shared_run_fails_only_that_host(tmp_path) -> None:
    """Hosts that reach the install together share one run; an unexpected exception raised by
    gpuhost's code for one of them (a bug) fails that host, with its traceback in its log, and
    the other host of the run is deployed (it failed the whole run before)."""

    def deploy() -> None:
        if host.name == "@local":
            raise ValueError("a parser met a value it did not expect")
        _two_commands()

    batch = {name: _request(tmp_path, name) for name in ("@local", "@chroot//")}
    outcomes = DeployBatcher(deploy, Canceller())._run(batch)
    assert (outcomes["@chroot//"].status, outcomes["@chroot//"].changed) == ("ok", 2)
    error = outcome_error(outcomes["@local"], batch["@local"].log_path)
    assert error is not None
    assert str(error) == (
        "@local: deploy failed: unexpected error in gpuhost (a bug, please report it; its "
        "traceback is logged): ValueError: a parser met a value it did not expect "
        f"(log {batch['@local'].log_path})"
    )
    log = batch["@local"].log_path.read_text()
    assert "Traceback (most recent call last)" in log and "ValueError" in log
    assert "Traceback" not in batch["@chroot//"].log_path.read_text()
