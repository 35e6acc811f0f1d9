"""The matrix file loads, and the validator rejects bad data with the field's path."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from gpuhost.errors import MatrixError
from gpuhost.matrix import build_matrix, default_matrix_path, load_matrix


@pytest.fixture(scope="module")
def raw() -> dict[str, Any]:
    with open(default_matrix_path(), encoding="utf-8") as fh:
        data: dict[str, Any] = yaml.safe_load(fh)
    return data


def _problems(data: Any) -> list[str]:
    with pytest.raises(MatrixError) as exc:
        build_matrix(data, "m.yaml")
    return exc.value.problems


def test_shipped_matrix_is_valid_and_cached() -> None:
    m = load_matrix()
    assert m is load_matrix()
    assert [c.version for c in m.cuda][0] == "11.0"
    assert m.cuda_minor("12.4") is not None
    assert m.cuda_minor("12.7") is None  # NVIDIA skipped 12.7


def test_real_numbers_from_the_release_notes() -> None:
    m = load_matrix()
    c124 = m.cuda_minor("12.4")
    assert c124 is not None
    assert c124.ga.min_driver == "550.54.14"
    assert c124.newest.version == "12.4.1" and c124.newest.min_driver == "550.54.15"
    c130 = m.cuda_minor("13.0")
    assert c130 is not None and c130.ga.min_driver == "580.65.06"
    assert m.minor_compat[12].min_driver == "525.60.13"
    assert m.minor_compat[13].min_driver == "580.65.06"
    assert m.minor_compat[11].min_driver == "450.80.02"


def test_every_row_names_a_resolvable_source(raw: dict[str, Any]) -> None:
    m = load_matrix()
    rows: list[Any] = [
        *m.cuda,
        *m.architectures,
        *m.gpus,
        *m.cudnn,
        *m.pytorch,
        *m.tensorflow,
        *m.driver_branches,
        *m.minor_compat.values(),
        *m.policies.values(),
    ]
    for row in rows:
        assert row.source in m.sources, row
        assert row.confidence in (
            "primary",
            "primary-via-mirror",
            "secondary",
            "single-source",
            "derived",
        )


def test_bad_driver_version_names_its_path(raw: dict[str, Any]) -> None:
    data = copy.deepcopy(raw)
    data["cuda"]["12.4"]["min_driver"] = "55O.54"
    problems = _problems(data)
    assert 'cuda.12.4.min_driver: "55O.54" is not a version' in problems[0]


def test_unquoted_version_is_rejected(raw: dict[str, Any]) -> None:
    data = copy.deepcopy(raw)
    data["tensorflow"][0]["cuda"] = 11.0
    assert any(p.startswith("tensorflow[0].cuda: ") and "quote" in p for p in _problems(data))


def test_every_problem_is_collected(raw: dict[str, Any]) -> None:
    data = copy.deepcopy(raw)
    data["cuda"]["12.4"]["min_driver"] = "x"
    data["gpus"][0]["compute_capability"] = "eight"
    data["driver_branches"][0]["type"] = "LTS"
    data["pytorch"][0]["source"] = "nowhere"
    problems = _problems(data)
    assert len(problems) == 4
    assert any(p.startswith("gpus[0].compute_capability") for p in problems)
    assert any(p.startswith("driver_branches[0].type") for p in problems)
    assert any(p.startswith("pytorch[0].source") and "sources" in p for p in problems)


def test_unsorted_and_decreasing_rows_are_rejected(raw: dict[str, Any]) -> None:
    data = copy.deepcopy(raw)
    data["cuda"]["12.5"]["min_driver"] = "550.54.14"  # lower than 12.4 Update 1
    assert any("cuda.12.5.min_driver" in p and "never go down" in p for p in _problems(data))
    data = copy.deepcopy(raw)
    data["pytorch"][0], data["pytorch"][1] = data["pytorch"][1], data["pytorch"][0]
    assert any("not sorted" in p for p in _problems(data))


def test_dangling_references_are_rejected(raw: dict[str, Any]) -> None:
    data = copy.deepcopy(raw)
    data["tensorflow"][0]["cuda"] = "11.9"
    data["gpus"][0]["compute_capability"] = "4.0"
    problems = _problems(data)
    assert any(p.startswith("tensorflow[0].cuda: 11.9 is not a CUDA release") for p in problems)
    assert any(p.startswith("gpus[0].compute_capability: 4.0 is not listed") for p in problems)


@pytest.mark.parametrize("content", ["", "- a\n- b\n", "cuda: [\n", "schema: 2\n"])
def test_malformed_files_are_matrix_errors(tmp_path: Any, content: str) -> None:
    f = tmp_path / "m.yaml"
    f.write_text(content)
    with pytest.raises(MatrixError) as exc:
        load_matrix(str(f))
    assert str(f) in str(exc.value)


def test_missing_file_is_a_matrix_error(tmp_path: Any) -> None:
    with pytest.raises(MatrixError, match="cannot read"):
        load_matrix(str(tmp_path / "absent.yaml"))
