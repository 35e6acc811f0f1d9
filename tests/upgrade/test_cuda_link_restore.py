"""Rollback puts ``/usr/local/cuda`` back (issue 33): a snapshot records the link, the ``cuda``
alternatives group's target and mode (``facts.cuda_link``), and the rollback's last operation
(``upgrade.restore.cuda_link_restored``) restores them, idempotently, never pointing the link at
a toolkit that is gone."""

from __future__ import annotations

import subprocess

import pytest

from gpuhost.errors import ConfigError
from gpuhost.facts.cuda_link import cuda_link_code
from gpuhost.operations.env import cuda_link_restore
from gpuhost.parsers.cuda import CudaLink, parse_cuda_link
from gpuhost.upgrade import restore
from gpuhost.upgrade.host_state import parse_host_state, state_command
from gpuhost.upgrade.snapshot import build_snapshot, diff, validate_document
from tests.provision.provision_harness import run_case

ALT = "/etc/alternatives/cuda"
C129, C130 = "/usr/local/cuda-12.9", "/usr/local/cuda-13.0"
#: before the upgrade: NVIDIA's packages' alternatives group, set to 12.9 by provision
BEFORE = CudaLink("link", ALT, C129, "manual")


def _now(alternative: str, mode: str = "manual", exists: bool | None = True) -> CudaLink:
    return CudaLink("link", ALT, alternative, mode, exists)


def test_the_fact_reads_link_alternative_and_mode() -> None:
    text = f"link={ALT}\nalternative={C130}\nmode=manual\nexists=yes\n"
    assert parse_cuda_link(text) == _now(C130)
    assert parse_cuda_link("kind=absent\n") == CudaLink()
    assert parse_cuda_link("kind=other\nmode=weird\n") == CudaLink("other")
    out = subprocess.run(["sh", "-c", cuda_link_code("/nonexistent dir")], capture_output=True,
                         text=True, check=True).stdout
    assert "exists=no" in out.splitlines()


@pytest.mark.parametrize(
    ("recorded", "now", "commands"),
    [
        # the upgrade set the group to 13.0 (manual): back to 12.9
        (BEFORE, _now(C130), [f"update-alternatives --set cuda {C129}"]),
        (BEFORE, _now(C129, "auto"), [f"update-alternatives --set cuda {C129}"]),
        (CudaLink("link", ALT, C129, "auto"), _now(C130), ["update-alternatives --auto cuda"]),
        # a plain link (no alternatives group) and a link the upgrade made on a host without one
        (CudaLink("link", C129), CudaLink("link", C130, exists=True),
         [f"ln -sfn {C129} /usr/local/cuda"]),
        (CudaLink(), CudaLink("link", C130, exists=None), ["rm -f /usr/local/cuda"]),
        # as recorded: nothing (a re-run of the rollback changes nothing)
        (BEFORE, _now(C129), []),
        (CudaLink(), CudaLink(), []),
    ],
)
def test_the_link_is_put_back_as_recorded(
    recorded: CudaLink, now: CudaLink, commands: list[str]
) -> None:
    assert cuda_link_restore(recorded, now) == (commands, None)


def test_a_default_whose_toolkit_is_gone_is_one_line_and_no_dangling_link() -> None:
    commands, note = cuda_link_restore(BEFORE, _now(C130, exists=False))
    assert commands == []
    assert note == (f"/usr/local/cuda: the snapshot's default {C129} is not on the host any "
                    f"more; left pointing at {C130} (install that toolkit again, or gpuhost "
                    "provision sets the profile's default)")
    # a directory there is never touched
    assert cuda_link_restore(BEFORE, CudaLink("other")) == (
        [], "/usr/local/cuda is not a symbolic link: left as it is")


def test_the_rollback_operation_restores_and_then_finds_nothing_to_do() -> None:
    fact = "gpuhost.facts.cuda_link.CudaDefaultLink"
    record = BEFORE.record()
    moved = {"args": {"recorded": record}, "facts": {fact: {f"directory={C129}": _now(C130)}}}
    assert run_case(restore.cuda_link_restored, moved)[0] == [
        f"update-alternatives --set cuda {C129}"]
    back = {"args": {"recorded": record}, "facts": {fact: {f"directory={C129}": _now(C129)}}}
    assert run_case(restore.cuda_link_restored, back) == (
        [], ["/usr/local/cuda as in the snapshot"])
    old = run_case(restore.cuda_link_restored, {"args": {"recorded": None}, "facts": {}})
    assert old[0] == [] and "no record of /usr/local/cuda" in old[1][0]


def test_a_snapshot_records_the_link_and_diff_shows_it_moved() -> None:
    assert "##GPUHOST cuda_link" in state_command()
    out = (f"##GPUHOST packages\n##GPUHOST holds\n##GPUHOST cuda_link\nlink={ALT}\n"
           f"alternative={C129}\nmode=manual\n##GPUHOST end\n")
    doc = build_snapshot("h1", parse_host_state(out), "20261128T230000Z")
    assert doc["cuda_link"] == {"kind": "link", "link": ALT, "alternative": C129,
                                "mode": "manual"}
    validate_document(doc, "s.json")
    assert restore.restore_plan(doc, {}, (), ()).cuda_link == doc["cuda_link"]
    after = {**doc, "cuda_link": {**doc["cuda_link"], "alternative": C130}}
    assert [c.line() for c in diff(doc, after)] == [
        f"cuda_link: alternative: {C129!r} -> {C130!r}".replace("'", '"')]


@pytest.mark.parametrize(
    ("record", "field"),
    [({"kind": "symlink"}, "cuda_link"), ({"kind": "link", "link": "../x"}, "cuda_link.link"),
     ({"kind": "link", "link": ALT, "alternative": "/a/../b"}, "cuda_link.alternative"),
     ({"kind": "link"}, "cuda_link.link"),
     ({"kind": "link", "link": C129, "mode": "sometimes"}, "cuda_link.mode")],
)
def test_a_damaged_cuda_link_record_is_one_line(record: dict[str, str], field: str) -> None:
    doc = build_snapshot("h1", parse_host_state("##GPUHOST packages\n##GPUHOST end\n"), "x")
    with pytest.raises(ConfigError, match=rf"^s\.json: {field}"):
        validate_document({**doc, "cuda_link": record}, "s.json")


def test_a_link_left_as_it_is_is_a_line_in_the_hosts_rollback_log(caplog, tmp_path) -> None:
    """docs/upgrade.md: the link left (its toolkit gone) is said. pyinfra logs a noop's reason at
    debug level only (print_noop_info is off in gpuhost's runs), and the rollback's log takes
    INFO and above: the line was shown nowhere. It is a warning of the host's now, which
    deploy_batch.HostLogs writes into that host's rollback log."""
    import logging

    from gpuhost.upgrade.deploy_batch import HostLogs

    fact = "gpuhost.facts.cuda_link.CudaDefaultLink"
    gone = {"args": {"recorded": BEFORE.record()},
            "facts": {fact: {f"directory={C129}": _now(C130, exists=False)}}}
    log = tmp_path / "fixture-host-rollback.log"
    with log.open("w", encoding="utf-8") as out:
        handler = HostLogs({"fixture-host": out})
        pyinfra_logger = logging.getLogger("pyinfra")
        pyinfra_logger.addHandler(handler)
        try:
            with caplog.at_level(logging.INFO, logger="pyinfra"):
                assert run_case(restore.cuda_link_restored, gone)[0] == []
        finally:
            pyinfra_logger.removeHandler(handler)
    assert f"[fixture-host] /usr/local/cuda: the snapshot's default {C129} is not on the host" in (
        log.read_text(encoding="utf-8"))
