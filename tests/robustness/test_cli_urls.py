"""The URL options of ``data update`` and ``matrix sync`` (where gpuhost reads NVIDIA's and
PyPI's data from) refuse what is not an http(s) URL: one line, exit 2, nothing fetched. Before,
'ftp://x' or a URL with a newline was tried (and the run failed with exit 1 naming another
source, or the overlay kept its old data without saying the option was wrong)."""

from __future__ import annotations

import pytest

from tests.robustness.conftest import gpuhost

BAD = ["ftp://x/", "http://", "http://127.0.0.1:1/\nx", "127.0.0.1:8080/simple", "", "http://a b/"]


@pytest.mark.parametrize("url", BAD)
@pytest.mark.parametrize("option", ["--index", "--csaf", "--cuda-redist", "--cudnn-redist"])
def test_data_update_url_options_refuse_non_urls(tmp_path, option, url) -> None:
    run = gpuhost(
        "data", "update", "--data-dir", str(tmp_path / "data"), "--from", str(tmp_path),
        option, url, cwd=tmp_path,
    )
    assert "Traceback" not in run.err and run.code == 2, run.err
    assert f"Invalid value for '{option}'" in run.err and "is not an http(s) URL" in run.err
    assert not (tmp_path / "data").exists()


def test_matrix_sync_index_refuses_a_non_url(tmp_path) -> None:
    run = gpuhost("matrix", "sync", "--from", str(tmp_path), "--index", "file:///etc", cwd=tmp_path)
    assert run.code == 2 and "'file:///etc' is not an http(s) URL" in run.err, run.err
