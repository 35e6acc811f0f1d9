from __future__ import annotations

import pytest

from gpuhost.matrix import Matrix, load_matrix


@pytest.fixture(scope="session")
def matrix() -> Matrix:
    return load_matrix()
