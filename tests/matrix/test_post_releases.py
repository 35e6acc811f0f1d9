"""PEP 440 post releases of frameworks (TensorFlow 2.15.0.post1): parsed, synced from PyPI's real
metadata (recorded under tests/fixtures/pypi) and answered by `matrix show/check`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost.cli import main
from gpuhost.errors import VersionError
from gpuhost.knowledge.pypi import DirectoryIndex
from gpuhost.knowledge.sync import sync
from gpuhost.matrix import Matrix
from gpuhost.matrix.lookup import parse_framework, release_text, wheel_release
from gpuhost.matrix.wheeldata import default_wheels_path, read_wheels_file
from gpuhost.versions import parse_framework_version, parse_version

RECORDED = Path(__file__).parent.parent / "fixtures" / "pypi"


def test_post_release_orders_between_its_release_and_the_next() -> None:
    post = parse_framework_version("2.15.0.post1", field="f")
    assert parse_framework_version("2.15.0", field="f") < post < parse_version("2.15.1", field="f")
    assert str(post) == "2.15.0.post1" and release_text(post) == "2.15.0.post1"


@pytest.mark.parametrize("text", ["2.15.0rc1", "2.15.0.dev3", "2.15.0.post", "v2.15.0"])
def test_framework_versions_still_refuse_pre_dev_and_typos(text: str) -> None:
    with pytest.raises(VersionError, match="2.15.0.post1"):
        parse_framework_version(text, field="--framework tensorflow")


def test_drivers_and_cuda_stay_strict() -> None:
    with pytest.raises(VersionError):
        parse_version("550.54.15.post1", field="driver")


def test_sync_reads_the_post_release_from_recorded_pypi_answers() -> None:
    ranges = read_wheels_file(default_wheels_path())["range"]
    rows = sync(DirectoryIndex(RECORDED), ranges).data["tensorflow"]
    versions = [r["version"] for r in rows]
    assert versions.index("2.15.0") < versions.index("2.15.0.post1") < versions.index("2.15.1")
    post = rows[versions.index("2.15.0.post1")]
    assert post["x86_64"]["cudnn"] == "8.9.4.25" and post["x86_64"]["cuda"] == "12.2"


def test_wheel_release_picks_the_exact_post_release(matrix: Matrix) -> None:
    post = wheel_release(matrix, "tensorflow", parse_framework("tensorflow==2.15.0.post1").version)  # type: ignore[arg-type]
    plain = wheel_release(matrix, "tensorflow", parse_framework("tensorflow==2.15.0").version)  # type: ignore[arg-type]
    assert post is not None and post.version == "2.15.0.post1"
    assert plain is not None and plain.version == "2.15.0"


def test_show_and_check_answer_for_the_post_release(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "show", "--framework", "tensorflow==2.15.0.post1", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["version"] == "2.15.0.post1"
    assert doc["default_variant"]["cudnn"] == "8.9.4.25"
    code = main(["matrix", "check", "--framework", "tensorflow==2.15.0.post1", "--cudnn", "9.1.0"])
    assert code == 1 and "libcudnn.so.8" in capsys.readouterr().out


def test_a_pre_release_framework_is_one_line_exit_two(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "check", "--framework", "tensorflow==2.16.0rc0"]) == 2
    err = capsys.readouterr().err
    assert "2.16.0rc0" in err and "Traceback" not in err
