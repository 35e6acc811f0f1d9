"""``gpuhost snapshot list HOST`` with nothing to list says which hosts do have snapshots (and
that HOST is a host name when an inventory file was given), not 'no snapshots under DIR' while
that folder holds other hosts' snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuhost.cli import main
from gpuhost.upgrade.host_state import parse_host_state
from gpuhost.upgrade.snapshot import SnapshotStore, build_snapshot
from tests.upgrade.test_snapshot import host_output


def test_list_of_a_host_without_snapshots_names_the_hosts_with_some(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    where = tmp_path / "snapshots"
    assert main(["snapshot", "list", "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == f"no snapshots under {where}\n"
    store = SnapshotStore(where)
    for host in ("gpu-02", "gpu-01"):
        store.save(build_snapshot(host, parse_host_state(host_output()), "20250101T000000Z"))
    assert main(["snapshot", "list", "gpu-01", "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out.startswith("gpu-01/20250101T000000Z  profile=")
    assert main(["snapshot", "list", "gpu-9", "--state-dir", str(tmp_path)]) == 0
    assert capsys.readouterr().out == (
        f"no snapshots of host 'gpu-9' under {where}; hosts with snapshots: gpu-01, gpu-02\n"
    )
    monkeypatch.chdir(tmp_path)
    (tmp_path / "fleet.py").write_text("hosts = ['gpu-01']\n")
    assert main(["snapshot", "list", "fleet.py", "--state-dir", str(tmp_path)]) == 0
    assert "(snapshot list takes a HOST name as the inventory names it, not an inventory)" in (
        capsys.readouterr().out
    )
