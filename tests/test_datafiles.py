"""``gpuhost.datafiles.load_yaml``: the one YAML loader of gpuhost's data files."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
import yaml

from gpuhost.datafiles import SAFE_LOADER, load_yaml

DATA_FILES = [
    ("gpuhost.data", "matrix.yaml"),
    ("gpuhost.data", "profiles.yaml"),
    ("gpuhost.data", "package_sets.yaml"),
    ("gpuhost.data", "ssh_policy.yaml"),
    ("gpuhost.checks_support", "xid_codes.yaml"),
]


@pytest.mark.parametrize(("package", "name"), DATA_FILES)
def test_every_data_file_loads_exactly_as_safe_load(package: str, name: str) -> None:
    text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    assert load_yaml(text) == yaml.safe_load(text)


def test_the_c_loader_is_used_when_pyyaml_has_libyaml() -> None:
    expected = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
    assert SAFE_LOADER is expected


def test_it_is_a_safe_loader() -> None:
    with pytest.raises(yaml.YAMLError):
        load_yaml("!!python/object/apply:os.system ['true']\n")


def test_bad_yaml_raises_with_the_line(tmp_path: Path) -> None:
    with pytest.raises(yaml.MarkedYAMLError) as info:
        load_yaml("a: 1\nb: [2\n")
    assert info.value.problem_mark is not None and info.value.problem_mark.line >= 1
