"""The per-host step machine and canary/batch scheduling, with fake step functions."""

from __future__ import annotations

import threading
import time

import pytest

from gpuhost.upgrade.journal import Journal
from gpuhost.upgrade.orchestrate import (
    ALL_STEPS,
    FORWARD_STEPS,
    ROLLBACK_STEPS,
    HostIsCurrent,
    Interrupted,
    Orchestrator,
    StepFailed,
    UpgradeOptions,
    describe_plan,
    plan_batches,
)


class FakeFleet:
    """Step functions that record calls and fail where told."""

    def __init__(self, fail=None, current=(), crash=None):
        self.fail = dict(fail or {})  # (host, step) -> message
        self.current = set(current)
        self.crash = crash  # (host, step): raise KeyboardInterrupt once
        self.calls: list[tuple[str, str, str | None]] = []
        self.lock = threading.Lock()

    def steps(self):
        return {name: self._step(name) for name in ALL_STEPS}

    def _step(self, name):
        def run(ctx):
            with self.lock:
                self.calls.append((ctx.host, name, ctx.resumed_step))
            if self.crash == (ctx.host, name):
                self.crash = None
                raise KeyboardInterrupt
            if name == "preflight" and ctx.host in self.current:
                raise HostIsCurrent("already on target")
            if (ctx.host, name) in self.fail:
                raise StepFailed(self.fail[(ctx.host, name)])
            if name == "snapshot":
                assert "snapshot_id" not in ctx.data, "snapshot must never be retaken"
                return {"snapshot_id": f"snap-{ctx.host}"}
            if name in ("rollback", "install", "validate", "undrain"):
                assert ctx.data.get("snapshot_id") == f"snap-{ctx.host}"
            return None

        return run

    def host_steps(self, host):
        return [s for h, s, _ in self.calls if h == host]


def _run(tmp_path, hosts, fleet, **opts):
    options = UpgradeOptions(**opts)
    journal = Journal.create(tmp_path / "runs", "inv", "new", hosts, {})
    events = []
    orch = Orchestrator(journal, fleet.steps(), options, lambda *e: events.append(e))
    return orch.run(), journal, events


def test_plan_batches_canary_then_batches():
    hosts = [f"h{i}" for i in range(1, 8)]
    assert plan_batches(hosts, 1, 3) == [["h1"], ["h2", "h3", "h4"], ["h5", "h6", "h7"]]
    assert plan_batches(hosts, 0, 4) == [["h1", "h2", "h3", "h4"], ["h5", "h6", "h7"]]
    assert plan_batches(hosts, 2, 10) == [["h1", "h2"], ["h3", "h4", "h5", "h6", "h7"]]
    with pytest.raises(ValueError):
        plan_batches(hosts, 1, 0)


def test_describe_plan_lists_batches_and_steps():
    text = "\n".join(describe_plan(["a", "b", "c"], "p2", UpgradeOptions(canary=1, batch=2)))
    assert "canary 1: a" in text and "batch 2: b, c" in text
    assert " -> ".join(FORWARD_STEPS) in text


def test_all_hosts_upgrade_in_order(tmp_path):
    fleet = FakeFleet()
    summary, journal, _ = _run(tmp_path, ["a", "b", "c"], fleet, canary=1, batch=1)
    assert summary.ok
    assert summary.outcomes == {"a": "upgraded", "b": "upgraded", "c": "upgraded"}
    assert [h for h, s, _ in fleet.calls if s == "preflight"] == ["a", "b", "c"]
    assert fleet.host_steps("a") == list(FORWARD_STEPS)
    assert journal.ended()


def test_failure_after_install_rolls_back_and_never_undrains(tmp_path):
    fleet = FakeFleet(fail={("a", "validate"): "driver 535.309 != expected"})
    summary, _, events = _run(tmp_path, ["a"], fleet, canary=0, batch=1, max_failures=5)
    assert summary.outcomes == {"a": "rolled_back"}
    steps = fleet.host_steps("a")
    assert steps == list(FORWARD_STEPS[: FORWARD_STEPS.index("validate") + 1]) + list(
        ROLLBACK_STEPS
    )
    assert "undrain" not in steps
    assert events[-1][:3] == ("a", "outcome", "rolled_back")
    assert "driver 535.309" in events[-1][3]


def test_failure_before_install_aborts_without_rollback(tmp_path):
    fleet = FakeFleet(fail={("a", "stop_users"): "processes hold /dev/nvidia0"})
    summary, _, _ = _run(tmp_path, ["a"], fleet, canary=0)
    assert summary.outcomes == {"a": "aborted"}
    steps = fleet.host_steps("a")
    assert steps[-1] == "abort" and "install" not in steps and "rollback" not in steps


def test_preflight_refusal_changes_nothing(tmp_path):
    fleet = FakeFleet(fail={("a", "preflight"): "unreachable"})
    summary, _, _ = _run(tmp_path, ["a", "b"], fleet, canary=0, batch=1, max_failures=2)
    assert summary.outcomes == {"a": "refused", "b": "upgraded"}
    assert fleet.host_steps("a") == ["preflight"]


def test_rollback_failure_is_its_own_outcome(tmp_path):
    fleet = FakeFleet(fail={("a", "install"): "dpkg error", ("a", "rollback"): "no cache"})
    summary, _, _ = _run(tmp_path, ["a"], fleet, canary=0)
    assert summary.outcomes == {"a": "rollback_failed"}
    assert "rollback_restart" not in fleet.host_steps("a")


def test_current_hosts_are_left_alone(tmp_path):
    fleet = FakeFleet(current={"a"})
    summary, _, _ = _run(tmp_path, ["a", "b"], fleet, canary=1, batch=1)
    assert summary.outcomes == {"a": "current", "b": "upgraded"}
    assert fleet.host_steps("a") == ["preflight"]
    assert summary.ok


def test_canary_failure_stops_the_fleet(tmp_path):
    fleet = FakeFleet(fail={("a", "validate"): "bad"})
    summary, journal, _ = _run(tmp_path, ["a", "b", "c"], fleet, canary=1, batch=2, max_failures=9)
    assert summary.outcomes == {"a": "rolled_back"}
    assert summary.not_started == ["b", "c"]
    assert "canary" in summary.stopped_reason
    assert not journal.ended()  # --resume could continue once the cause is fixed


def test_max_failures_stops_starting_new_batches(tmp_path):
    fleet = FakeFleet(fail={("b", "install"): "x", ("c", "install"): "y"})
    hosts = ["a", "b", "c", "d", "e"]
    summary, _, _ = _run(tmp_path, hosts, fleet, canary=1, batch=2, max_failures=2)
    # batch b,c runs completely (both fail), then d,e are never started
    assert summary.outcomes == {"a": "upgraded", "b": "rolled_back", "c": "rolled_back"}
    assert summary.not_started == ["d", "e"]
    assert "max-failures" in summary.stopped_reason
    assert not summary.ok


def test_batches_run_in_parallel(tmp_path):
    barrier = threading.Barrier(3, timeout=5)
    fleet = FakeFleet()
    steps = dict(fleet.steps())
    inner = steps["drain"]

    def drain(ctx):
        barrier.wait()  # deadlocks (BrokenBarrierError) unless all three run at once
        return inner(ctx)

    steps["drain"] = drain
    journal = Journal.create(tmp_path / "runs", "inv", "new", ["a", "b", "c"], {})
    summary = Orchestrator(journal, steps, UpgradeOptions(canary=0, batch=3)).run()
    assert summary.ok


def test_resume_after_crash_continues_half_done_host_first_and_skips_finished(tmp_path):
    hosts = ["a", "b", "c", "d"]
    fleet = FakeFleet(crash=("b", "restart"))
    options = UpgradeOptions(canary=1, batch=1)
    journal = Journal.create(tmp_path / "runs", "inv", "new", hosts, {})
    with pytest.raises(Interrupted):
        Orchestrator(journal, fleet.steps(), options).run()
    assert journal.progress()["b"].current == "restart"
    assert journal.records()[-1]["status"] == "interrupted"
    fleet.calls.clear()
    resumed = Journal.open(journal.path)
    summary = Orchestrator(resumed, fleet.steps(), options).run()
    assert summary.ok and set(summary.outcomes) == set(hosts)
    assert fleet.host_steps("a") == []  # finished: not touched again
    # b continues at the interrupted step (marked as resumed), snapshot not retaken
    assert fleet.host_steps("b") == ["restart", "validate", "undrain"]
    assert ("b", "restart", "restart") in fleet.calls
    assert fleet.calls[0][0] == "b"
    assert fleet.host_steps("c") == list(FORWARD_STEPS)


def test_resume_continues_an_interrupted_rollback(tmp_path):
    fleet = FakeFleet(fail={("a", "validate"): "bad"}, crash=("a", "rollback_restart"))
    options = UpgradeOptions(canary=0, batch=1)
    journal = Journal.create(tmp_path / "runs", "inv", "new", ["a"], {})
    with pytest.raises(Interrupted):
        Orchestrator(journal, fleet.steps(), options).run()
    fleet.calls.clear()
    summary = Orchestrator(Journal.open(journal.path), fleet.steps(), options).run()
    assert summary.outcomes == {"a": "rolled_back"}
    assert fleet.host_steps("a") == ["rollback_restart", "rollback_validate"]


def test_resume_after_failure_recorded_but_before_rollback(tmp_path):
    journal = Journal.create(tmp_path / "runs", "inv", "new", ["a"], {})
    for step in FORWARD_STEPS[:5]:
        journal.step("a", step, "done", data={"snapshot_id": "snap-a"})
    journal.step("a", "restart", "failed", "host did not come back")
    fleet = FakeFleet()
    summary = Orchestrator(journal, fleet.steps(), UpgradeOptions(canary=0)).run()
    assert summary.outcomes == {"a": "rolled_back"}
    assert fleet.host_steps("a") == list(ROLLBACK_STEPS)
    assert "restart: host did not come back" in journal.records()[-2]["detail"]


def test_missing_step_function_is_refused(tmp_path):
    journal = Journal.create(tmp_path / "runs", "inv", "new", ["a"], {})
    with pytest.raises(ValueError, match="steps missing"):
        Orchestrator(journal, {"preflight": lambda ctx: None}, UpgradeOptions())


def test_ctrl_c_during_install_is_journaled_interrupted_and_resume_redoes_it(tmp_path):
    """The step in flight when the operator stops the run is neither done nor failed: no
    rollback now, and --resume runs it again (marked resumed) before going on."""
    fleet = FakeFleet(crash=("a", "install"))
    options = UpgradeOptions(canary=0, batch=1)
    journal = Journal.create(tmp_path / "runs", "inv", "new", ["a"], {})
    events = []
    with pytest.raises(Interrupted):
        Orchestrator(journal, fleet.steps(), options, lambda *e: events.append(e)).run()
    last = journal.records()[-1]
    assert (last["step"], last["status"]) == ("install", "interrupted")
    assert not any(r.get("status") in ("done", "failed") and r.get("step") == "install"
                   for r in journal.records())
    assert events[-1][:3] == ("a", "install", "interrupted")
    assert not journal.ended()
    assert not [s for s in fleet.host_steps("a") if s in ROLLBACK_STEPS]
    fleet.calls.clear()
    summary = Orchestrator(Journal.open(journal.path), fleet.steps(), options).run()
    assert summary.outcomes == {"a": "upgraded"}
    assert fleet.calls[0] == ("a", "install", "install")
    assert fleet.host_steps("a") == ["install", "restart", "validate", "undrain"]


def test_errors_after_a_stop_are_interruptions_not_failures(tmp_path):
    """Stopping kills children and closes connections, so steps in flight on other hosts end
    with errors: those are journaled interrupted and roll nothing back."""
    started = threading.Barrier(2, timeout=5)
    fleet = FakeFleet()
    steps = dict(fleet.steps())
    holder = {}

    def install(ctx):
        started.wait()
        if ctx.host == "a":
            holder["orch"].stop.set()  # what the SIGINT handler does
            raise KeyboardInterrupt
        time.sleep(0.2)
        raise StepFailed("connection closed while running a command")  # b's child was killed

    steps["install"] = install
    journal = Journal.create(tmp_path / "runs", "inv", "new", ["a", "b"], {})
    holder["orch"] = Orchestrator(journal, steps, UpgradeOptions(canary=0, batch=2))
    with pytest.raises(Interrupted):
        holder["orch"].run()
    progress = journal.progress()
    for host in ("a", "b"):
        assert progress[host].current == "install" and progress[host].failed is None
        assert progress[host].outcome is None
        assert not [s for s in fleet.host_steps(host) if s in ROLLBACK_STEPS + ("abort",)]
    statuses = [(r["host"], r["status"]) for r in journal.records() if r.get("step") == "install"]
    assert sorted(statuses) == [("a", "interrupted"), ("a", "started"),
                                ("b", "interrupted"), ("b", "started")]


def test_summary_lists_hosts_in_inventory_order_whatever_order_they_finished(tmp_path):
    """c finished in an earlier (interrupted) run, a and b now: the table is still a, b, c."""
    journal = Journal.create(tmp_path / "runs", "inv", "new", ["a", "b", "c"], {})
    journal.step("c", "preflight", "done", "already on target")
    journal.outcome("c", "current", "already on target")
    summary = Orchestrator(journal, FakeFleet().steps(), UpgradeOptions(canary=0, batch=2)).run()
    assert list(summary.outcomes) == ["a", "b", "c"]
    assert summary.outcomes["c"] == "current"
