"""Inventory selection (--limit, --shard), the fleet summary and gpuhost report merge."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gpuhost.audit.summary import group_stacks, outliers, summarize
from gpuhost.cli import main
from gpuhost.errors import ConfigError
from gpuhost.inventory.loader import parse_shard, select, shard_names

INVENTORY = """
gpu_nodes = [("n1", {"ssh_hostname": "10.123.250.1"}), ("n2", {}), ("n3", {}), ("n4", {}),
             ("n5", {})]
login = [("login-a", {}), ("login-b", {})]
"""


@pytest.fixture
def inventory(tmp_path):
    path = tmp_path / "inv.py"
    path.write_text(INVENTORY)
    return str(path)


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_shards_cover_every_host_exactly_once(count):
    names = [f"h{i}" for i in range(1, 11)]
    shards = [shard_names(names, k, count) for k in range(1, count + 1)]
    assert sorted(n for shard in shards for n in shard) == sorted(names)
    sizes = [len(s) for s in shards]
    assert max(sizes) - min(sizes) <= 1


@pytest.mark.parametrize("bad", ["0/3", "4/3", "3", "a/b", "1/0", ""])
def test_bad_shard_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="--shard"):
        parse_shard(bad)


def test_select_limit_by_group_glob_and_shard(inventory):
    assert select(inventory, limit="login").names == ["login-a", "login-b"]
    assert select(inventory, limit="n1,login-*").names == ["n1", "login-a", "login-b"]
    selection = select(inventory, limit="gpu_nodes", shard="2/2")
    assert selection.names == ["n2", "n4"]
    assert selection.shard_label == "2/2"


def test_an_empty_shard_is_refused_before_any_host_is_audited(inventory, capsys):
    """audit --shard 3/3 over two hosts wrote a report listing no host, which report merge
    then refused (issue 29)."""
    with pytest.raises(ConfigError, match=r"--shard 3/3: selects no host \(2 host\(s\)"):
        select(inventory, limit="login", shard="3/3")
    assert main(["audit", inventory, "--limit", "login", "--shard", "3/3"]) == 2
    assert "--shard 3/3: selects no host" in capsys.readouterr().err


def test_unknown_limit_and_missing_inventory_are_config_errors(inventory, tmp_path):
    with pytest.raises(ConfigError, match="--limit nope: matches no host"):
        select(inventory, limit="nope")
    with pytest.raises(ConfigError, match="inventory file not found"):
        select(str(tmp_path / "missing.py"))
    broken = tmp_path / "broken.py"
    broken.write_text("hosts = [\n")
    with pytest.raises(ConfigError, match="cannot load inventory"):
        select(str(broken))


def test_cli_bad_inventory_exits_2_without_traceback(tmp_path, capsys):
    broken = tmp_path / "broken.py"
    broken.write_text("raise RuntimeError('boom')\n")
    assert main(["audit", str(broken)]) == 2
    err = capsys.readouterr().err
    assert "cannot load inventory" in err and "boom" in err
    assert "Traceback" not in err


# a whole facts document as `gpuhost audit --json` writes it (report merge checks its inputs
# against the audit report schema), with the loaded driver set per host
_LOCAL = Path(__file__).parents[1] / "robustness" / "data" / "audit-local.json"


def _host(name, driver, verdict="ok", reachable=True):
    facts = copy.deepcopy(json.loads(_LOCAL.read_text(encoding="utf-8"))["hosts"][0]["facts"])
    facts["driver"]["loaded_module"] = (
        {"version": driver, "flavor": "open"} if driver else None
    )
    return {"name": name, "reachable": reachable, "facts": facts if reachable else None,
            "findings": [], "verdict": verdict}


def test_stack_groups_and_outliers():
    hosts = [_host(f"a{i}", "550.54.15") for i in range(3)] + [_host("b1", "535.261.03")]
    groups = group_stacks(hosts)
    assert [g["count"] for g in groups] == [3, 1]
    (outlier,) = outliers(groups)
    assert outlier["host"] == "b1"
    assert outlier["differs"]["driver_loaded"] == {"found": "535.261.03", "majority": "550.54.15"}
    # a tie has no majority: nobody is named an outlier
    assert outliers(group_stacks([_host("x", "1.0"), _host("y", "2.0")])) == []


def test_summary_verdict_is_the_worst_host_verdict():
    hosts = [_host("a", "550.54.15"), _host("b", None, "unreachable", reachable=False)]
    summary = summarize(hosts)
    assert summary["verdict"] == "unreachable"
    assert summary["verdicts"] == {"ok": 1, "warning": 0, "error": 0, "unreachable": 1}


def _report(path, hosts, shard=None):
    from gpuhost.audit.report.json_report import report_from_entries

    path.write_text(json.dumps(report_from_entries(hosts, {"shard": shard})))
    return str(path)


def test_merge_recomputes_the_summary(tmp_path, capsys):
    a = _report(tmp_path / "a.json", [_host("a1", "550.54.15"), _host("a2", "550.54.15")], "1/2")
    b = _report(tmp_path / "b.json", [_host("b1", "535.261.03", "error")], "2/2")
    out = tmp_path / "merged.json"
    assert main(["report", "merge", a, b, "-o", str(out)]) == 1
    merged = json.loads(out.read_text())
    assert [h["name"] for h in merged["hosts"]] == ["a1", "a2", "b1"]
    assert merged["summary"]["verdicts"]["error"] == 1
    assert merged["summary"]["shards"] == ["1/2", "2/2"]
    assert merged["summary"]["outliers"][0]["host"] == "b1"


def test_merge_names_the_data_the_shards_were_judged_with(tmp_path, capsys):
    """Every report states its data (docs/knowledge.md): the merged one the shards' (the oldest
    when they differ), as it does for matrix_date; none when the inputs predate it."""
    from gpuhost.audit.report.json_report import report_from_entries

    def shard(name, host, data):
        path = tmp_path / name
        path.write_text(
            json.dumps(report_from_entries([_host(host, "550.54.15")], None, None, data))
        )
        return str(path)

    new = {"date": "2026-11-25", "origin": "update of 2026-11-25 in /var/lib/gpuhost/data"}
    old = {"date": "2026-11-23", "origin": "shipped with gpuhost"}
    out = tmp_path / "merged.json"

    def merged(*shards):
        assert main(["report", "merge", *shards, "-o", str(out)]) == 0
        return json.loads(out.read_text())

    both = merged(shard("a", "a1", new), shard("b", "b1", old))
    assert both["data"] == old
    assert list(both).index("data") == list(both).index("matrix_date") + 1
    assert merged(shard("c", "c1", new), shard("d", "d1", None))["data"] == new
    assert "data" not in merged(shard("e", "e1", None))


def test_merge_rejects_overlap_and_foreign_files(tmp_path, capsys):
    a = _report(tmp_path / "a.json", [_host("h1", "550.54.15")])
    b = _report(tmp_path / "b.json", [_host("h1", "550.54.15")])
    assert main(["report", "merge", a, b, "-o", str(tmp_path / "m.json")]) == 2
    assert "also in" in capsys.readouterr().err
    other = tmp_path / "other.json"
    other.write_text('{"schema": 2, "hosts": []}')
    assert main(["report", "merge", str(other), "-o", str(tmp_path / "m.json")]) == 2
    assert "schema 2" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("{not json")
    assert main(["report", "merge", str(tmp_path / "bad.json"), "-o", "-"]) == 2
