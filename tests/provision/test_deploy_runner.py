"""``gpuhost.deploy_runner`` on this machine's ``@local`` host: statuses, counts, dry mode, limit.

The deploys here only run ``true`` / ``test`` (nothing on this machine changes); an unreachable
host is a chroot connector pointed at a directory that does not exist.
"""

from __future__ import annotations

import os

import gevent.event
import pytest
from pyinfra.api import operation
from pyinfra.operations import python, server

from gpuhost.deploy_runner import exit_code, outcome_lines, run_deploy
from gpuhost.errors import ConfigError, DeployError


def _inventory(tmp_path, hosts: str) -> str:
    path = tmp_path / "inventory.py"
    path.write_text(hosts)
    return str(path)


def _two_commands() -> None:
    server.shell(name="say true", commands=["true"])
    server.shell(name="test a directory", commands=["test -d /"])


def test_operations_run_and_are_counted(tmp_path) -> None:
    inventory = _inventory(tmp_path, 'hosts = ["@local"]\n')
    [outcome] = run_deploy(inventory, _two_commands)
    assert (outcome.status, outcome.changed, outcome.unchanged) == ("ok", 2, 0)
    assert outcome.line(dry=False) == "@local: ok, 2 changed, 0 unchanged"
    assert exit_code([outcome], refused_is_usage=True) == 0


def test_dry_lists_the_plan_and_executes_nothing(tmp_path) -> None:
    marker = tmp_path / "touched"
    inventory = _inventory(tmp_path, 'hosts = ["@local"]\n')

    def deploy() -> None:
        server.shell(name="touch a file", commands=[f"touch {marker}"])

    [outcome] = run_deploy(inventory, deploy, dry=True)
    assert not marker.exists()
    assert outcome_lines([outcome], dry=True) == [
        "  @local: would change: touch a file",
        "@local: ok, 1 would change, 0 unchanged",
    ]


def test_a_failing_operation_fails_that_host(tmp_path) -> None:
    inventory = _inventory(tmp_path, 'hosts = ["@local"]\n')

    def deploy() -> None:
        server.shell(name="exit 3", commands=["exit 3"])

    [outcome] = run_deploy(inventory, deploy)
    assert outcome.status == "failed" and "exit 3" in outcome.message
    assert exit_code([outcome], refused_is_usage=True) == 1


@pytest.mark.parametrize(
    ("error", "status", "usage_exit"),
    [
        (DeployError("@local", "refusing: no key"), "refused", (2, 1)),
        (ConfigError("inventory data of host @local: gpuhost_x: bad"), "bad-data", (2, 2)),
    ],
)
def test_errors_while_preparing_are_outcomes(tmp_path, error, status, usage_exit) -> None:
    inventory = _inventory(tmp_path, 'hosts = ["@local"]\n')

    def deploy() -> None:
        server.shell(name="never runs", commands=["true"])
        raise error

    [outcome] = run_deploy(inventory, deploy)
    assert outcome.status == status and outcome.changed == 0
    assert outcome.line(dry=False) == f"@local: failed: {str(error).removeprefix('@local: ')}"
    assert exit_code([outcome], refused_is_usage=True) == usage_exit[0]
    assert exit_code([outcome], refused_is_usage=False) == usage_exit[1]


def test_unreachable_host_does_not_stop_the_others(tmp_path) -> None:
    inventory = _inventory(tmp_path, f'hosts = ["@chroot/{tmp_path}/no-such-root", "@local"]\n')
    outcomes = {o.name: o for o in run_deploy(inventory, _two_commands)}
    assert outcomes[f"@chroot/{tmp_path}/no-such-root"].status == "unreachable"
    assert outcomes["@local"].status == "ok" and outcomes["@local"].changed == 2


def test_limit_takes_groups_globs_and_comma_lists(tmp_path) -> None:
    inventory = _inventory(
        tmp_path,
        f'gpu = ["@local"]\nother = ["@chroot/{tmp_path}/a", "@chroot/{tmp_path}/b"]\n',
    )
    assert [o.name for o in run_deploy(inventory, _two_commands, limit=["gpu"], dry=True)] == [
        "@local"
    ]
    names = [o.name for o in run_deploy(inventory, _two_commands, limit=["@l*,other"], dry=True)]
    assert sorted(names) == sorted(["@local", f"@chroot/{tmp_path}/a", f"@chroot/{tmp_path}/b"])
    with pytest.raises(ConfigError, match="--limit nope: matches no host or group"):
        run_deploy(inventory, _two_commands, limit=["nope"])


def test_override_data_reaches_every_host(tmp_path) -> None:
    inventory = _inventory(tmp_path, 'hosts = [("@local", {"gpuhost_profile": "inventory"})]\n')
    seen: list[str] = []

    def deploy() -> None:
        from pyinfra import host

        seen.append(host.data.get("gpuhost_profile"))

    run_deploy(inventory, deploy, dry=True, override_data={"gpuhost_profile": "override"})
    assert seen == ["override"]


# Two reachable hosts on this machine: @local and a chroot connector on "/" (chroot needs root).
_needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="the second local host is `chroot /`, which needs root"
)
_TWO_HOSTS = 'hosts = ["@chroot//", "@local"]\n'


@_needs_root
def test_a_refused_host_does_not_stop_the_others_preparation(tmp_path) -> None:
    inventory = _inventory(tmp_path, _TWO_HOSTS)
    prepared: list[str] = []

    def deploy() -> None:
        from pyinfra import host

        if host.name == "@chroot//":  # the first host of the inventory is refused
            raise DeployError(host.name, "refusing: no key")
        prepared.append(host.name)
        _two_commands()

    outcomes = {o.name: o for o in run_deploy(inventory, deploy)}
    assert outcomes["@chroot//"].status == "refused" and outcomes["@chroot//"].changed == 0
    assert prepared == ["@local"]
    assert (outcomes["@local"].status, outcomes["@local"].changed) == ("ok", 2)


@_needs_root
def test_hosts_are_prepared_at_the_same_time(tmp_path) -> None:
    # The first host's deploy waits for the second one's: prepared one after another, the
    # first would give up (refused) before the second started.
    inventory = _inventory(tmp_path, _TWO_HOSTS)
    second_started = gevent.event.Event()

    def deploy() -> None:
        from pyinfra import host

        if host.name == "@local":
            second_started.set()
        elif not second_started.wait(timeout=20):
            raise DeployError(host.name, "the other host was not being prepared meanwhile")
        _two_commands()

    outcomes = run_deploy(inventory, deploy, dry=True)
    assert [(o.name, o.status, o.changed) for o in outcomes] == [
        ("@chroot//", "ok", 2),
        ("@local", "ok", 2),
    ]


@_needs_root
def test_each_host_gets_its_own_config_and_parallel_bounds_the_pool(tmp_path) -> None:
    inventory = _inventory(tmp_path, _TWO_HOSTS)
    seen: list[tuple[str, bool, int]] = []

    def deploy() -> None:
        from pyinfra import config, host, state

        seen.append((host.name, config.SUDO, state.pool.size))
        config.SUDO = True  # a deploy changing its config changes only its own host's

    run_deploy(inventory, deploy, dry=True, parallel=1)
    assert sorted(seen) == [("@chroot//", False, 1), ("@local", False, 1)]


BUG = "unexpected error in gpuhost (a bug, please report it; its traceback is logged): "


@_needs_root
def test_an_unexpected_exception_while_preparing_fails_only_that_host(tmp_path, caplog) -> None:
    # it escaped run_deploy, so an upgrade's shared deploy run failed every host batched with it
    inventory = _inventory(tmp_path, _TWO_HOSTS)

    def deploy() -> None:
        from pyinfra import host

        if host.name == "@local":
            raise RuntimeError("a bug in a deploy")
        _two_commands()

    outcomes = {o.name: o for o in run_deploy(inventory, deploy)}
    assert (outcomes["@local"].status, outcomes["@local"].message) == (
        "failed",
        BUG + "RuntimeError: a bug in a deploy",
    )
    assert (outcomes["@chroot//"].status, outcomes["@chroot//"].changed) == ("ok", 2)
    assert "Traceback" in caplog.text and "a bug in a deploy" in caplog.text
    assert exit_code(outcomes.values(), refused_is_usage=True) == 1


@operation()
def _buggy_when_executing():
    from pyinfra import state

    if state.is_executing:
        raise KeyError("no such field")  # a bug in an operation's own code, at execute time
    yield "true"


@_needs_root
def test_an_unexpected_exception_while_executing_fails_only_that_host(tmp_path) -> None:
    marker = tmp_path / "after"
    inventory = _inventory(tmp_path, _TWO_HOSTS)

    def deploy() -> None:
        from pyinfra import host

        if host.name == "@local":
            _buggy_when_executing(name="a buggy operation")
            server.shell(name="never run", commands=[f"touch {marker}"])
        else:
            _two_commands()

    outcomes = {o.name: o for o in run_deploy(inventory, deploy)}
    assert (outcomes["@local"].status, outcomes["@local"].message) == (
        "failed",
        BUG + "KeyError: 'no such field'",
    )
    assert not marker.exists()
    assert (outcomes["@chroot//"].status, outcomes["@chroot//"].changed) == ("ok", 2)


# --- the execute stage: bounded by the plan (issue 9) -------------------------------------------

_evaluations: list[tuple[str, str]] = []


@operation()
def _counted(label: str, change: bool):
    """Records each evaluation (prepare, and execute when the host is executed)."""
    from pyinfra import host

    _evaluations.append((host.name, label))
    if change:
        yield "true"
    else:
        host.noop(f"{label}: nothing to do")


def _run_counted(tmp_path, second_changes: bool):
    inventory = _inventory(tmp_path, 'hosts = ["@local"]\n')
    _evaluations.clear()

    def deploy() -> None:
        _counted(name="a", label="a", change=False)
        _counted(name="b", label="b", change=second_changes)

    [outcome] = run_deploy(inventory, deploy)
    return outcome


def test_a_host_whose_plan_changes_nothing_is_not_executed(tmp_path) -> None:
    outcome = _run_counted(tmp_path, second_changes=False)
    assert _evaluations == [("@local", "a"), ("@local", "b")]  # prepare only
    assert (outcome.status, outcome.changed, outcome.unchanged, outcome.executed) == (
        "ok",
        0,
        2,
        0,
    )


def test_a_host_with_one_change_runs_every_operation_again(tmp_path) -> None:
    outcome = _run_counted(tmp_path, second_changes=True)
    # prepare evaluates a, b; execute evaluates both again, in order
    assert _evaluations == [("@local", "a"), ("@local", "b")] * 2
    assert (outcome.changed, outcome.unchanged, outcome.executed) == (1, 1, 2)


def test_an_operation_with_if_keeps_its_host_in_the_execute_stage(tmp_path) -> None:
    inventory = _inventory(tmp_path, 'hosts = ["@local"]\n')
    marker = tmp_path / "touched"

    def deploy() -> None:
        first = _counted(name="a", label="a", change=False)
        server.shell(name="touch", commands=[f"touch {marker}"], _if=first.did_not_change)

    [outcome] = run_deploy(inventory, deploy)
    assert marker.exists() and outcome.executed == 2 and outcome.changed == 1


@_needs_root
def test_hosts_execute_without_waiting_for_each_other_after_each_operation(tmp_path) -> None:
    # @chroot//'s first operation waits for @local's *second* one: with a barrier after every
    # operation @local could not start its second before @chroot// finished its first.
    inventory = _inventory(tmp_path, _TWO_HOSTS)
    second_done = gevent.event.Event()

    def wait_for_second(state, host) -> bool:
        return bool(second_done.wait(timeout=20))

    def mark_second(state, host) -> bool:
        second_done.set()
        return True

    def deploy() -> None:
        from pyinfra import host

        if host.name == "@chroot//":
            python.call(name="first", function=wait_for_second)
            server.shell(name="second", commands=["true"])
        else:
            server.shell(name="first", commands=["true"])
            python.call(name="second", function=mark_second)

    outcomes = {o.name: o for o in run_deploy(inventory, deploy)}
    assert [(o.status, o.changed) for o in outcomes.values()] == [("ok", 2), ("ok", 2)]


@_needs_root
def test_a_failed_operation_stops_its_host_only(tmp_path) -> None:
    inventory = _inventory(tmp_path, _TWO_HOSTS)
    marker = tmp_path / "after-failure"

    def deploy() -> None:
        from pyinfra import host

        if host.name == "@chroot//":
            server.shell(name="fails", commands=["exit 3"])
            server.shell(name="never", commands=[f"touch {marker}"])
        else:
            server.shell(name="one", commands=["true"])
            server.shell(name="two", commands=["true"])

    outcomes = {o.name: o for o in run_deploy(inventory, deploy)}
    assert outcomes["@chroot//"].status == "failed" and not marker.exists()
    assert outcomes["@chroot//"].executed == 1
    assert (outcomes["@local"].status, outcomes["@local"].changed) == ("ok", 2)


@operation()
def _refuses_when_executing(path: str):
    """Like apt_pin.installed: judges the host at execute (the pins are written by then)."""
    from pyinfra import host
    from pyinfra.api import OperationError

    if host.state.is_executing:
        raise OperationError("nvidia-modprobe 535.309.01-0+deb12u99 is not offered")
    yield f"touch {path}"


def test_an_operation_refusing_at_execute_is_one_line_not_a_traceback(tmp_path, caplog) -> None:
    # found on a lab host (issue 20): a companion version apt cannot get raised OperationError
    # from the execute stage, which pyinfra does not catch: a traceback and no outcome line
    inventory = _inventory(tmp_path, 'hosts = ["@local"]\n')
    after = tmp_path / "after"

    def deploy() -> None:
        _refuses_when_executing(name="install", path=str(tmp_path / "x"))
        server.shell(name="never", commands=[f"touch {after}"])

    [outcome] = run_deploy(inventory, deploy)
    assert outcome.status == "failed" and not after.exists()
    assert outcome.message == (
        "operation failed: install: nvidia-modprobe 535.309.01-0+deb12u99 is not offered"
    )
    assert exit_code([outcome], refused_is_usage=True) == 1
    assert "Traceback" not in caplog.text


def test_stop_ends_a_host_at_the_next_operation_boundary(tmp_path) -> None:
    """``stop`` (what a SIGINT handler sets) is asked before each operation: the operation in
    flight finishes, the next one never starts, the host's outcome says it was stopped."""
    first, second = tmp_path / "first", tmp_path / "second"
    inventory = _inventory(tmp_path, 'hosts = ["@local"]\n')

    def deploy() -> None:
        server.shell(name="first", commands=[f"touch {first}"])
        server.shell(name="second", commands=[f"touch {second}"])

    [outcome] = run_deploy(inventory, deploy, stop=first.exists)
    assert first.exists() and not second.exists()
    assert (outcome.status, outcome.message) == ("interrupted", "stopped by the operator")


def _fact_failing_after(marker) -> type:
    """A fact whose command fails once ``marker`` exists (pyinfra then takes the host out and
    hands the operation the fact's default)."""
    from pyinfra.api import FactBase

    class FailsAfterMarker(FactBase):
        def command(self) -> str:
            return f"test ! -e {marker} && echo fine"

        def process(self, output):
            return output

    return FailsAfterMarker


@operation()
def _reads(fact: type):
    from pyinfra import host

    host.get_fact(fact)
    yield "true"


def test_a_fact_failing_while_executing_fails_the_host_with_one_line(tmp_path) -> None:
    # the last active host's failed fact surfaced as pyinfra's "No hosts remaining!" traceback
    marker = tmp_path / "made-by-the-first-operation"
    inventory = _inventory(tmp_path, 'hosts = ["@local"]\n')
    fact = _fact_failing_after(marker)

    def deploy() -> None:
        server.shell(name="make the marker", commands=[f"touch {marker}"])
        _reads(fact, name="read a fact that now fails")
        server.shell(name="never run", commands=[f"touch {marker}.after"])

    [outcome] = run_deploy(inventory, deploy)
    assert outcome.status == "failed", outcome
    assert outcome.message == (
        "operation failed: read a fact that now fails: a fact could not be read from the host "
        "(see output above)"
    )
    assert not (tmp_path / "made-by-the-first-operation.after").exists()
    assert exit_code([outcome], refused_is_usage=True) == 1


@_needs_root
def test_a_fact_failing_while_preparing_one_host_is_not_ok(tmp_path) -> None:
    # with another host still active pyinfra raises nothing: the host was counted "ok"
    marker = tmp_path / "exists"
    marker.touch()
    inventory = _inventory(tmp_path, _TWO_HOSTS)
    fact = _fact_failing_after(marker)

    def deploy() -> None:
        from pyinfra import host

        if host.name == "@local":
            _reads(fact, name="read a failing fact")
        _two_commands()

    outcomes = {o.name: o for o in run_deploy(inventory, deploy)}
    assert outcomes["@local"].status == "failed", outcomes["@local"]
    assert "a fact could not be read" in outcomes["@local"].message
    assert (outcomes["@chroot//"].status, outcomes["@chroot//"].changed) == ("ok", 2)
