"""CDI spec parser on real generated specs (tests/fixtures/cdi/SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost.datafiles import load_yaml
from gpuhost.errors import ParseError
from gpuhost.parsers import cdi

FIXTURES = Path(__file__).parent.parent / "fixtures" / "cdi"


def _read(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("name", "kind", "versions"),
    [
        ("nvidia-460.91.03-dgx-a100.yaml", "nvidia.com/gpu", ["460.91.03"]),
        ("nvidia-470.57.02-containerd.yaml", None, ["470.57.02"]),
        ("nvidia-575.57.08-hooks.yaml", None, ["575.57.08"]),
    ],
)
def test_the_driver_version_a_real_spec_names(
    name: str, kind: str | None, versions: list[str]
) -> None:
    spec = cdi.parse_cdi_spec(_read(name), f"/etc/cdi/{name}")
    assert (spec.kind, spec.driver_versions, spec.nvidia) == (kind, versions, True)


def test_a_json_spec_reads_the_same() -> None:
    document = load_yaml(_read("nvidia-460.91.03-dgx-a100.yaml"))
    spec = cdi.parse_cdi_spec(json.dumps(document, indent=2), "/var/run/cdi/nvidia.json")
    assert spec.driver_versions == ["460.91.03"]


def test_library_versions_that_are_not_the_driver_are_not_taken() -> None:
    text = (
        "cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ncontainerEdits:\n  mounts:\n"
        "  - hostPath: /usr/lib/x86_64-linux-gnu/libnvidia-egl-wayland.so.1.1.9\n"
        "  - hostPath: /usr/lib/x86_64-linux-gnu/libcuda.so.1\n"
    )
    assert cdi.parse_cdi_spec(text, "/etc/cdi/x.yaml").driver_versions == []


def test_listed_files_each_become_a_spec_and_a_broken_one_says_why() -> None:
    output = (
        f"{cdi.CDI_SECTION}/etc/cdi/nvidia.yaml\n{_read('nvidia-460.91.03-dgx-a100.yaml')}\n"
        f'{cdi.CDI_SECTION}/var/run/cdi/other.json\n{{"not": "a spec"}}\n'
    )
    specs = cdi.parse_cdi_specs(output)
    assert [s.path for s in specs] == ["/etc/cdi/nvidia.yaml", "/var/run/cdi/other.json"]
    assert specs[0].driver_versions == ["460.91.03"] and specs[0].error is None
    assert specs[1].error is not None and "expected a CDI spec" in specs[1].error
    assert cdi.parse_cdi_specs("") == []
    assert cdi.stale_specs(specs, "535.261.03") == [specs[0]]
    assert cdi.stale_specs(specs, "460.91.03") == []


def test_not_yaml_is_one_line_naming_the_file() -> None:
    with pytest.raises(ParseError, match=r"^/etc/cdi/nvidia.yaml: not YAML or JSON \(line"):
        cdi.parse_cdi_spec("cdiVersion: [\n", "/etc/cdi/nvidia.yaml")
