"""cuDNN rows for the versions real wheels bundle (issue #14): 8.9.2, 9.1.0, 9.3.0 are known now,
so `matrix check --cudnn` judges them and the bundled-cuDNN-vs-GPU rule can speak for them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from gpuhost.cli import main
from gpuhost.datafiles import load_yaml
from gpuhost.matrix import Matrix, build_matrix, check_stack, default_matrix_path
from gpuhost.matrix.lookup import find_cudnn
from gpuhost.matrix.wheeldata import load_wheels
from gpuhost.versions import parse_version

AS_OF = dt.date(2026, 11, 22)

# cuDNN releases real wheels bundle that no source read gives a support-matrix row for
# (newer than 9.17.0, the newest support matrix read, or between rows that disagree).
UNSOURCED = {"8.3.2", "8.7.0", "9.7.1", "9.13.0", "9.15.1", "9.17.1", "9.19.0", "9.20.0", "9.24.0"}


def _rules(findings) -> dict[str, str]:
    return {f.rule: f.message for f in findings}


@pytest.mark.parametrize("version", ["8.9.2", "8.9.2.26", "9.1.0", "9.1.0.70", "9.3.0.75"])
def test_bundled_versions_are_known(matrix: Matrix, version: str) -> None:
    found = _rules(check_stack(matrix, gpus=["H100"], cuda="12.1", cudnn=version, as_of=AS_OF))
    assert "cudnn.unknown" not in found, found


def test_cli_check_cudnn_910_is_no_longer_unknown(capsys) -> None:
    assert main(["matrix", "check", "--cudnn", "9.1.0", "--gpu", "H100"]) == 0
    assert "unknown" not in capsys.readouterr().out.lower()


def test_kepler_gpu_with_cudnn_910_is_an_error_naming_its_source(matrix: Matrix) -> None:
    found = _rules(check_stack(matrix, gpus=["K80"], cuda="12.4", cudnn="9.1.0", as_of=AS_OF))
    assert "cuDNN 9.1.0 is not built for" in found["cudnn.arch"]


def test_bundled_cudnn_rule_works_for_the_new_rows() -> None:
    """torch 2.5.1's default wheel bundles cuDNN 9.1.0.70; with its arch list removed only the
    cuDNN rule can judge a Kepler GPU (cc 3.7): before the 9.1.0 row it was silent."""
    data = load_yaml(Path(default_matrix_path()).read_text(encoding="utf-8"))
    torch25 = next(r for r in data["pytorch"] if r["version"] == "2.5")
    for var in torch25["variants"]:
        for key in ("archs", "archs_source", "archs_confidence"):
            var.pop(key, None)
    m = build_matrix(data)
    found = _rules(check_stack(m, gpus=["K80"], frameworks=["torch==2.5.1"], as_of=AS_OF))
    assert "cuDNN 9.1.0.70" in found["framework.cudnn-arch"]
    found = _rules(check_stack(m, gpus=["H100"], frameworks=["torch==2.5.1"], as_of=AS_OF))
    assert "framework.cudnn-arch" not in found


def test_every_bundled_cudnn_has_a_row_or_is_listed_as_unsourced(matrix: Matrix) -> None:
    bundled = {v.cudnn for rel in matrix.pytorch for v in rel.variants if v.cudnn}
    for rel in load_wheels():
        bundled |= {b.cudnn for b in rel.builds.values() if b.cudnn}
    missing = set()
    for version in bundled:
        if find_cudnn(matrix, parse_version(version, field="cudnn")) is None:
            missing.add(".".join(version.split(".")[:3]))
    assert missing <= UNSOURCED, sorted(missing - UNSOURCED)
    assert {"8.9.2", "9.1.0", "9.3.0"}.isdisjoint(missing)
