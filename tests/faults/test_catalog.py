"""The fault catalog (data/faults.yaml): every row sourced and valid, the Xid codes folded in,
drain policies, recovery actions, bad data as one line, and the documented table."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuhost.datafiles import load_yaml
from gpuhost.errors import ConfigError
from gpuhost.faults.catalog import (
    CATALOG_FILE,
    DRAIN_POLICIES,
    drain_policy,
    load_catalog,
    parse_catalog,
)
from gpuhost.faults.table import BEGIN, END, catalog_markdown, with_table
from gpuhost.findings import ACTIONS, Finding

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "src" / "gpuhost" / "data" / CATALOG_FILE


def _data() -> dict[str, Any]:
    return load_yaml(DATA.read_text(encoding="utf-8"))


def test_every_row_is_valid_and_names_a_source_with_a_url():
    catalog = load_catalog()
    assert len(catalog.rows) > 50
    for row in catalog.rows.values():
        assert row.action in ACTIONS and row.drain in DRAIN_POLICIES, row
        assert catalog.source_url(row).startswith("https://") or row.source == "node-class"
    xids = catalog.xid_rows()
    assert [r.xid for r in xids] == sorted(r.xid for r in xids if r.xid is not None)
    # every Xid row keeps NVIDIA's own resolution bucket
    assert all(row.nvidia_action for row in xids)


@pytest.mark.parametrize(
    ("code", "action", "drain", "bucket"),
    [
        (79, "reboot", "immediate", "RESTART_BM"),
        (48, "reset-gpu", "immediate", "WORKFLOW_XID_48"),
        (95, "reset-gpu", "immediate", "RESET_GPU"),
        (119, "reset-gpu", "persistent", "RESET_GPU"),
        (140, "reset-gpu", "immediate", "RESET_GPU"),
        (143, "reset-gpu", "persistent", "RESET_GPU"),
        (13, "none", "never", "RESTART_APP"),
        (43, "none", "never", "IGNORE"),
        (54, "inspect-hardware", "persistent", "CHECK_MECHANICALS"),
    ],
)
def test_xid_rows_read_nvidias_catalog(code, action, drain, bucket):
    row = load_catalog().xid_row(code)
    assert (row.action, row.drain, row.nvidia_action) == (action, drain, bucket)
    # where the row reads NVIDIA's bucket the plain way, it is the documented mapping
    mapping = load_catalog().nvidia_actions
    if bucket in mapping and not row.note:
        assert mapping[bucket] == action


def test_an_unknown_xid_gets_the_default_row_saying_so():
    row = load_catalog().xid_row(999)
    assert row.id == "gpu.xid.999" and row.xid == 999
    assert (row.severity, row.action, row.drain) == ("warning", "watch", "never")
    assert "not in gpuhost's catalog" in row.title


@pytest.mark.parametrize(
    ("code", "text", "action"),
    [
        (2, "Node Reboot Required", "reboot"),
        (2, "OS Reboot", "reboot"),  # the words differ between drivers, the NVML code does not
        (1, "PF FLR", "reset-gpu"),
        (None, "GPU Reset Required", "reset-gpu"),
        (None, "Reset", "reset-gpu"),  # nvidia-smi -q's "GPU Recovery Action : Reset"
        (None, "Drain and Reset", "drain"),
        (None, "Drain P2P", "drain"),
        (0, "None", "none"),
        (None, "something new", None),
    ],
)
def test_recovery_actions_by_code_then_words(code, text, action):
    found = load_catalog().recovery(code, text)
    assert (found.action if found else None) == action


@pytest.mark.parametrize(
    ("finding", "policy"),
    [
        (Finding("gpu.xid.79", "error", "x"), "immediate"),
        (Finding("gpu.remap-pending", "error", "x"), "immediate"),
        (Finding("gpu.ecc-uncorrectable", "error", "x"), "persistent"),
        (Finding("gpu.clocks.hw-slowdown", "warning", "x"), "persistent"),
        (Finding("gpu.retired-pages", "warning", "x"), "never"),
        (Finding("gpu.xid.154", "error", "x", action="reboot"), "immediate"),
        (Finding("gpu.xid.154", "info", "x", action="none"), "never"),
        (Finding("gpu.recovery-action", "error", "x", action="reset-gpu"), "persistent"),
        # an Xid whose action the driver's recovery action replaced follows that action
        (Finding("gpu.xid.74", "error", "x", action="reboot"), "immediate"),
        (Finding("profile.driver", "error", "x"), "persistent"),
        (Finding("gpu.ecc-correctable", "info", "x"), "never"),
        (Finding("driver.smi-error", "warning", "x"), "never"),
    ],
)
def test_drain_policy(finding, policy):
    assert drain_policy(finding) == policy


def _broken(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = _data()
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("path", "value", "said"),
    [
        (("schema",), 2, "faults.yaml: schema: expected 'schema: 1'"),
        (("faults", 0, "action"), "panic", "faults[0]: action: found 'panic', expected one of"),
        (("faults", 0, "drain"), "soon", "faults[0]: drain: found 'soon'"),
        (("faults", 0, "source"), "hearsay", "faults[0]: source 'hearsay': expected one of"),
        (("faults", 0, "xid"), 9, "faults[0]: id 'gpu.xid.8': expected gpu.xid.9 for Xid 9"),
        (("faults", 1, "id"), "gpu.xid.8", "faults[1]: id 'gpu.xid.8'"),
        (("faults", 0, "colour"), "red", "faults[0]: unknown field 'colour'"),
        (("nvidia_actions", "RESET_GPU"), "pray", "nvidia_actions: expected bucket"),
        (("recovery_actions", 0, "drain"), "later", "recovery_actions[0]: drain: found"),
    ],
)
def test_bad_catalog_data_is_one_line_naming_the_field(path, value, said):
    with pytest.raises(ConfigError) as info:
        parse_catalog(_broken(path, value))
    message = str(info.value)
    assert said in message and "\n" not in message


def test_the_documented_table_is_the_generated_one():
    doc = (ROOT / "docs" / "monitoring.md").read_text(encoding="utf-8")
    assert BEGIN in doc and END in doc
    assert with_table(doc) == doc, (
        "docs/monitoring.md's fault catalog is not the data's: run python -c \"from "
        "gpuhost.faults.table import update_doc; update_doc('docs/monitoring.md')\""
    )
    table = catalog_markdown()
    for row in load_catalog().rows.values():
        assert f"| `{row.id}` |" in table
    with pytest.raises(ValueError, match="no"):
        with_table("# a document without the markers\n")
