"""Validator cases found by the property tests."""

from __future__ import annotations

import copy

import pytest
import yaml

from gpuhost.errors import MatrixError
from gpuhost.matrix import build_matrix
from gpuhost.matrix.load import default_matrix_path


def test_cudnn_package_with_an_empty_cuda_list_is_rejected_with_its_path() -> None:
    with open(default_matrix_path(), encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    broken = copy.deepcopy(data)
    broken["cudnn"][0]["packages"][0]["cuda"] = []
    with pytest.raises(MatrixError) as info:
        build_matrix(broken, "matrix.yaml")
    assert "cudnn[0].packages[0].cuda" in str(info.value)
    assert "lists no CUDA release" in str(info.value)
