"""gpuhost.versions: the one place versions are parsed and compared."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuhost.errors import VersionError
from gpuhost.versions import (
    cuda_variant_of,
    driver_branch,
    parse_version,
    upstream_of_package_version,
)


@pytest.mark.parametrize(
    ("low", "high"),
    [
        ("550.54.14", "550.54.15"),
        ("535.161.07", "535.261.03"),
        ("570.26", "570.124.06"),
        ("12.4", "12.4.1"),
        ("9.5.1", "9.10.2"),
        ("2.5.1", "2.5.1+cu124"),
    ],
)
def test_versions_order_numerically(low: str, high: str) -> None:
    assert parse_version(low, field="x") < parse_version(high, field="x")


def test_torch_local_version_keeps_its_variant() -> None:
    v = parse_version("2.5.1+cu124", field="torch")
    assert v.release == (2, 5, 1)
    assert v.local == "cu124"
    assert cuda_variant_of("cu124") == "12.4"
    assert cuda_variant_of("cu130") == "13.0"
    assert cuda_variant_of("cpu") is None


@pytest.mark.parametrize(
    "bad", ["55O.54", "", "v1.2", "1.2-3", "latest", "1..2", "12.4 ", None, 12.4]
)
def test_garbage_is_a_version_error_naming_the_field(bad: object) -> None:
    if bad == "12.4 ":  # surrounding blanks are tolerated
        assert str(parse_version(bad, field="cuda")) == "12.4"
        return
    with pytest.raises(VersionError) as exc:
        parse_version(bad, field="cuda.12.4.min_driver")
    assert str(exc.value).startswith("cuda.12.4.min_driver: ")
    assert "is not a version" in str(exc.value)


@pytest.mark.parametrize(
    ("package", "upstream"),
    [
        ("535.261.03-1", "535.261.03"),
        ("535.309.01-0+deb12u1", "535.309.01"),
        ("1:550.54.15-1.el9", "550.54.15"),
        ("12.4.1-1", "12.4.1"),
        ("570.124.06", "570.124.06"),
        ("11.8.89~11.8.0-5~deb12u1", "11.8.89"),
    ],
)
def test_upstream_of_package_version(package: str, upstream: str) -> None:
    assert upstream_of_package_version(package) == upstream


@pytest.mark.parametrize("bad", ["", "-1", "x:1.0-1", "abc-1"])
def test_bad_package_versions_are_version_errors(bad: str) -> None:
    with pytest.raises(VersionError):
        upstream_of_package_version(bad)


def test_driver_branch() -> None:
    assert driver_branch("535.161.07") == 535
    assert driver_branch("570.26") == 570
    with pytest.raises(VersionError):
        driver_branch("2.5.1+cu124")


@given(st.text(max_size=40))
def test_any_string_parses_or_raises_version_error(text: str) -> None:
    for fn in (
        lambda: parse_version(text, field="f"),
        lambda: upstream_of_package_version(text),
        lambda: driver_branch(text),
    ):
        try:
            fn()
        except VersionError as exc:
            assert str(exc)
