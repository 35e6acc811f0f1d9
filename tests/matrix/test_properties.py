"""Property tests: any input gives a verdict or a clear gpuhost error, never a traceback."""

from __future__ import annotations

import copy
import datetime as dt
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuhost.errors import GpuhostError, MatrixError
from gpuhost.matrix import (
    Matrix,
    build_matrix,
    check_stack,
    default_matrix_path,
    gpu_info,
    load_matrix,
    resolve_stack,
    verdict,
)

AS_OF = dt.date(2026, 11, 22)
MATRIX = load_matrix()
with open(default_matrix_path(), encoding="utf-8") as _fh:
    RAW: dict[str, Any] = yaml.safe_load(_fh)

versionish = st.one_of(
    st.none(),
    st.text(max_size=20),
    st.from_regex(r"\A\d{1,3}(\.\d{1,3}){0,3}\Z"),
    st.sampled_from(["12.4", "12.4.1", "13.0", "535.261.03", "550.54.15", "9.10.2", "0", "99.9"]),
)
names = st.one_of(st.text(max_size=40), st.sampled_from(["H100", "V100", "NVIDIA B200", "rtx5090"]))
frameworks = st.one_of(
    st.text(max_size=25),
    st.builds(
        lambda n, v: f"{n}=={v}",
        st.sampled_from(["torch", "tensorflow", "tf", "jax"]),
        st.from_regex(r"\A\d{1,2}\.\d{1,2}(\.\d)?(\+(cu\d{3}|cpu))?\Z"),
    ),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(
    gpus=st.lists(names, max_size=3),
    driver=versionish,
    cuda=versionish,
    cudnn=versionish,
    fws=st.lists(frameworks, max_size=2),
)
def test_check_gives_a_verdict_or_a_clear_error(
    gpus: list[str], driver: str | None, cuda: str | None, cudnn: str | None, fws: list[str]
) -> None:
    try:
        findings = check_stack(
            MATRIX, gpus=gpus, driver=driver, cuda=cuda, cudnn=cudnn, frameworks=fws, as_of=AS_OF
        )
    except GpuhostError as exc:
        assert exc.exit_code == 2 and str(exc)
        return
    assert verdict(findings) in ("ok", "warning", "error")


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(gpus=st.lists(names, max_size=2), cuda=versionish, fws=st.lists(frameworks, max_size=2))
def test_resolve_gives_a_set_or_a_clear_error(
    gpus: list[str], cuda: str | None, fws: list[str]
) -> None:
    try:
        res = resolve_stack(MATRIX, gpus=gpus, cuda=cuda, frameworks=fws, as_of=AS_OF)
    except GpuhostError as exc:
        assert exc.exit_code in (1, 2) and str(exc)
        return
    assert res.to_json()["driver"]["branch"].isdigit()


@given(st.text(max_size=60))
def test_any_gpu_name_is_known_or_none(name: str) -> None:
    info = gpu_info(MATRIX, name)
    assert info is None or info.compute_capability


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


PATHS = _paths(RAW)
junk = st.one_of(
    st.none(),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.text(max_size=12),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=4), st.integers(), max_size=2),
)


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(path=st.sampled_from(PATHS), value=junk, delete=st.booleans())
def test_any_matrix_mutation_loads_or_raises_matrix_error(
    path: tuple[Any, ...], value: Any, delete: bool
) -> None:
    data = copy.deepcopy(RAW)
    node: Any = data
    for key in path[:-1]:
        node = node[key]
    if delete and isinstance(node, dict):
        del node[path[-1]]
    else:
        node[path[-1]] = value
    try:
        m = build_matrix(data, "mutated.yaml")
    except MatrixError as exc:
        assert exc.problems and all(": " in p for p in exc.problems)
        return
    assert isinstance(m, Matrix)
    # a matrix that validates still answers questions without crashing
    try:
        check_stack(
            m,
            gpus=["H100", "V100"],
            driver="580.65.06",
            cuda="12.4",
            cudnn="9.10.2",
            frameworks=["torch==2.5.1", "tensorflow==2.18.0"],
            as_of=AS_OF,
        )
        resolve_stack(m, gpus=["H100"], frameworks=["torch==2.5.1"], as_of=AS_OF)
    except GpuhostError as exc:
        assert str(exc)
