"""``gpuhost.datafiles.load_yaml``: the one YAML loader of gpuhost's data files."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest
import yaml

from gpuhost.datafiles import SAFE_LOADER, load_yaml, yaml_problem

DATA_FILES = [
    ("gpuhost.data", "matrix.yaml"),
    ("gpuhost.data", "profiles.yaml"),
    ("gpuhost.data", "package_sets.yaml"),
    ("gpuhost.data", "ssh_policy.yaml"),
    ("gpuhost.data", "faults.yaml"),
    ("gpuhost.data", "node_classes.yaml"),
]


@pytest.mark.parametrize(("package", "name"), DATA_FILES)
def test_every_data_file_loads_exactly_as_safe_load(package: str, name: str) -> None:
    text = resources.files(package).joinpath(name).read_text(encoding="utf-8")
    assert load_yaml(text) == yaml.safe_load(text)


def test_the_c_loader_is_used_when_pyyaml_has_libyaml() -> None:
    expected = yaml.CSafeLoader if yaml.__with_libyaml__ else yaml.SafeLoader
    assert SAFE_LOADER.__mro__[1] is expected  # itself only refuses keys written twice


def test_a_key_written_twice_is_refused_with_both_lines() -> None:
    """YAML keeps the last of two equal keys: a profile copied and not renamed silently
    replaced the one above it (the file loaded, the first profile gone)."""
    text = "profiles:\n  mine: {os: [debian-12]}\n  other: {}\n  mine: {os: [rocky-9]}\n"
    with pytest.raises(yaml.MarkedYAMLError) as info:
        load_yaml(text)
    assert yaml_problem(info.value) == "line 4: found key 'mine' twice (first on line 2)"
    merged = load_yaml("base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  x: 3\n")  # '<<' may override
    assert merged["d"] == {"x": 3, "y": 2}


def test_it_is_a_safe_loader() -> None:
    with pytest.raises(yaml.YAMLError):
        load_yaml("!!python/object/apply:os.system ['true']\n")


def test_bad_yaml_raises_with_the_line(tmp_path: Path) -> None:
    with pytest.raises(yaml.MarkedYAMLError) as info:
        load_yaml("a: 1\nb: [2\n")
    assert info.value.problem_mark is not None and info.value.problem_mark.line >= 1


BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{name}: &{name} [{', '.join([f'*{prev}'] * 9)}]\n"
    for prev, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def test_an_alias_bomb_is_one_short_error(tmp_path, capsys):
    """A 1 KB 'billion laughs' profiles file gave a 33 MB error message (issue 29)."""
    import time

    import yaml

    from gpuhost.cli import main
    from gpuhost.datafiles import expanded_size, load_yaml

    start = time.monotonic()
    with pytest.raises(yaml.YAMLError, match="aliases expand the document to more than"):
        load_yaml(BOMB)
    assert time.monotonic() - start < 5
    path = tmp_path / "profiles.yaml"
    path.write_text(BOMB + "profiles: *i\n")
    assert main(["matrix", "profile", "list", "--profiles", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and len(err) < 400
    shared = [1, 2]
    assert expanded_size({"a": shared, "b": shared}) == 1 + 2 + 3 + 3
    loop: list = []
    loop.append(loop)
    assert expanded_size(loop) > 1_000_000
