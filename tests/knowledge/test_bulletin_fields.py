"""A bulletin's fields are checked before anything of it is installed or put into a path:
``gpuhost data update`` leaves out, with one line each, a bulletin whose tracking id is no
single word (``../``), whose date is no date or in the future (9999-99-99, 2099), whose URL
fields are not https, or which is a bulletin already known under another README entry; the
loader refuses the same in a data file, and ``matrix advisories-sync --record`` never builds a
path from such an id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost.cli import main
from gpuhost.errors import ConfigError, MatrixError
from gpuhost.knowledge.maintain import bulletin_rows
from gpuhost.matrix.advisories import load_advisories, row_problems

from .served import NEW_BULLETIN, build, serve

BAD = {
    "9001": ("id", "../../../tmp/owned"),
    "9002": ("date", "9999-99-99T00:00:00Z"),
    "9003": ("date", "2099-01-01T00:00:00Z"),
    "9004": ("id", "5861"),  # a bulletin the data has, listed again under another entry
    "9005": ("id", "9999/x"),
}


def _bulletin(root: Path, entry: str, field: str, value: str) -> None:
    year = root / "csaf" / "2026"
    doc = json.loads((year / NEW_BULLETIN / f"{NEW_BULLETIN}.json").read_text())
    key = "initial_release_date" if field == "date" else "id"
    doc["document"]["tracking"][key] = value
    (year / entry).mkdir()
    (year / entry / f"{entry}.json").write_text(json.dumps(doc))
    with (year / "README.md").open("a") as readme:
        readme.write(
            f"| [{entry}]({entry}/{entry}.md) | Security Bulletin: NVIDIA GPU Display Driver - "
            f"test | 2026-11-20 | 2026-11-20 | CVE-2099-0001 |\n"
        )


def test_bad_bulletins_are_left_out_with_one_line_each(tmp_path, data_dir, capsys):
    root = build(tmp_path / "served")
    for entry, (field, value) in BAD.items():
        _bulletin(root, entry, field, value)
    with serve(root) as base:
        code = main(
            [
                "data", "update", "--data-dir", str(data_dir), "--index", base,
                "--csaf", f"{base}/csaf", "--cuda-redist", f"{base}/redist/",
                "--cudnn-redist", f"{base}/cudnn-redist/",
            ]
        )  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out

    for entry in BAD:
        (line,) = [x for x in out.splitlines() if x.startswith(f"bulletin {entry}: not added")]
        assert BAD[entry][0] in line or "is known" in line
    assert f"bulletin {NEW_BULLETIN} (" in out
    ids = [a.id for a in load_advisories(str(data_dir / "advisories.yaml")).rows]
    assert NEW_BULLETIN in ids and len(ids) == len(set(ids))
    assert not any("/" in i or "." in i for i in ids)
    assert not (tmp_path.parent / "owned").exists()


def _row() -> dict[str, object]:
    return {
        "id": "5555",
        "component": "driver",
        "title": "t",
        "date": "2025-01-01",
        "url": "https://nvidia.custhelp.com/app/answers/detail/a_id/5555",
        "csaf": "https://github.com/NVIDIA/product-security/blob/main/2025/5555/5555.json",
        "highest_cvss": 7.0,
        "fixed": {"535": "535.1.1"},
        "cves": [{"id": "CVE-2025-0001", "cvss": 7.0, "branches": [535]}],
        "confidence": "primary",
    }


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("id", "../x", "id: found '../x'"),
        ("id", "", "id: found ''"),
        ("date", "9999-99-99", "date: found '9999-99-99'"),
        ("date", "2099-01-01", "date: found '2099-01-01'"),
        ("url", "javascript:alert(1)", "url: found"),
        ("csaf", "http://plain.example/x.json", "csaf: found"),
    ],
)
def test_the_loader_refuses_a_bad_field(tmp_path, field, value, named):
    row = _row()
    assert row_problems(row) == []
    row[field] = value
    path = tmp_path / "advisories.yaml"
    path.write_text(json.dumps({"error_at_cvss": 7.0, "advisories": [row]}))

    with pytest.raises(MatrixError) as caught:
        load_advisories(str(path))

    assert named in str(caught.value)


def test_the_loader_refuses_a_duplicate_and_a_bad_cve(tmp_path):
    row = _row()
    bad_cve = {**row, "id": "5556", "cves": [{"id": "../CVE", "cvss": float("inf")}]}
    path = tmp_path / "advisories.yaml"
    path.write_text(json.dumps({"error_at_cvss": 7.0, "advisories": [row, row, bad_cve]}))

    with pytest.raises(MatrixError) as caught:
        load_advisories(str(path))

    text = str(caught.value)
    assert "advisories[1]: id '5555' is already advisories[0]" in text
    assert "cves[0].id: found '../CVE'" in text and "cves[0].cvss: found 'Infinity'" in text


def test_advisories_sync_record_builds_no_path_from_a_bad_id(tmp_path):
    root = build(tmp_path / "served") / "csaf"
    doc_path = root / "2026" / NEW_BULLETIN / f"{NEW_BULLETIN}.json"
    doc = json.loads(doc_path.read_text())
    doc["document"]["tracking"]["id"] = "../../escaped"
    doc_path.write_text(json.dumps(doc))
    record = tmp_path / "record"

    with pytest.raises(ConfigError) as caught:
        bulletin_rows(root, record)

    assert "id: found '../../escaped'" in str(caught.value)
    assert not record.exists() and not (tmp_path / "escaped").exists()
