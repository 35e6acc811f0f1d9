"""Security across the stack (issue #35, part 5): NVIDIA's CUDA Toolkit bulletins (affected and
fixed toolkit releases, Linux products only) and the GPU Operator releases its container toolkit
bulletins name, read from NVIDIA's own CSAF documents (tests/fixtures/nvidia-csaf, recorded from
github.com/NVIDIA/product-security at dbb4ada0 by ``advisories-sync --record``; SOURCE.md) and
judged by ``matrix check --cuda`` / ``--gpu-operator`` and the audit."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuhost.audit.host import AuditSettings, audit_host
from gpuhost.cli import main
from gpuhost.facts.host_facts import CudaFacts, CudaToolkit, HostFacts
from gpuhost.knowledge.csaf import bulletin_row, cuda_version, read_bulletins
from gpuhost.matrix.advisories import exposure, load_advisories

RECORDED = Path(__file__).parent.parent / "fixtures" / "nvidia-csaf"
ADVS = load_advisories()


def _row(bulletin: str) -> dict:
    doc = next(d for p, d in read_bulletins(RECORDED) if p.stem == bulletin)
    row = bulletin_row(doc)
    assert row is not None
    return row


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("11.6 Update 2", "11.6.2"),
        ("CUDA Toolkit v12.4U1", "12.4.1"),
        ("CUDA Toolkit 12.6U2", "12.6.2"),
        ("CUDA Toolkit 12.9 Update 1", "12.9.1"),
        ("CUDA Toolkit 13.1", "13.1.0"),
        ("CUDA Toolkit v12.2", "12.2.0"),
    ],
)
def test_cuda_releases_as_the_bulletins_spell_them(text: str, version: str) -> None:
    assert cuda_version(text) == version


def test_cuda_toolkit_bulletins_as_nvidia_publishes_them() -> None:
    assert _row("5334")["component"] == "cuda-toolkit"
    assert _row("5334")["cves"] == [{"id": "CVE-2022-21821", "cvss": 7.8, "fixed": "11.6.2"}]
    # April 2023: one bulletin, three fixed releases, each CVE its own
    fixed = {c["id"]: c["fixed"] for c in _row("5456")["cves"]}
    assert fixed["CVE-2023-25513"] == "12.0.1" and fixed["CVE-2023-25512"] == "12.1.0"
    assert _row("5456")["fixed"] == {"cuda": "12.1.1"}
    # January 2026: every release before 13.1
    assert _row("5755")["fixed"] == {"cuda": "13.1.0"} and _row("5755")["highest_cvss"] == 7.3


def test_linux_only_where_the_bulletin_says_so() -> None:
    """March 2023 lists the Linux and the Windows toolkit apart: only the Linux fixed release is
    read; September 2025's nvJPEG products are another component and add no CUDA release."""
    assert _row("5446")["fixed"] == {"cuda": "12.1.0"}
    assert {c["fixed"] for c in _row("5661")["cves"]} == {"12.9.1", "13.0.0"}


def test_gpu_operator_releases_of_the_container_toolkit_bulletins() -> None:
    assert _row("5659")["fixed"]["gpu-operator"] == "25.3.2"
    assert _row("5850")["fixed"]["gpu-operator"] == "26.3.2"
    assert all(c["gpu_operator"] for c in _row("5599")["cves"])


@pytest.mark.parametrize(
    ("cuda", "named", "not_named"),
    [
        ("11.6.1", {"5334", "5755"}, set()),  # CVSS 7.8 (5334) and every later bulletin
        ("11.6.2", {"5373", "5755"}, {"5334"}),  # 5334 fixed in 11.6 Update 2
        ("12.9.1", {"5661", "5755"}, {"5643"}),  # 5643 fixed in 12.9
        ("13.0.2", {"5755"}, {"5661", "5643"}),  # 5755: every release before 13.1
        ("13.1.0", set(), {"5755"}),
    ],
)
def test_a_cuda_toolkit_is_judged_per_cve(cuda: str, named: set, not_named: set) -> None:
    found = exposure(ADVS, cuda=cuda)
    assert {f.rule for f in found.findings} == ({"security.cuda-toolkit"} if named else set())
    said = {a.id for a in ADVS.rows if any(f"{a.id} (" in f.message for f in found.findings)}
    assert named <= said and not (not_named & said)
    assert found.verdict == ("error" if named else "ok")  # 5755's CVSS 7.3 >= error_at_cvss


def test_only_cves_that_affect_the_release_are_named() -> None:
    [finding] = exposure(ADVS, cuda="12.9.1").findings
    assert "CVE-2025-23274" in finding.message  # fixed in 13.0
    assert "CVE-2025-23272" not in finding.message  # fixed in 12.9 Update 1
    assert finding.fix == "upgrade the CUDA Toolkit to >= 13.1.0"


def test_two_numbers_are_read_as_the_ga_release_and_said() -> None:
    [finding] = exposure(ADVS, cuda="12.1").findings
    assert "read as its GA release 12.1.0: a fix is in a 12.1 update" in finding.message


@pytest.mark.parametrize(
    ("operator", "fixed"),
    [("24.6.1", "26.3.2"), ("v25.3.1", "26.3.2"), ("26.3.1", "26.3.2"), ("26.3.2", None)],
)
def test_matrix_check_judges_a_gpu_operator_release(
    operator: str, fixed: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["matrix", "check", "--gpu-operator", operator, "--json", "--fail-on", "security"])
    data = json.loads(capsys.readouterr().out)
    assert data["security"]["checked"] == [f"GPU Operator {operator}"]
    if fixed is None:
        assert code == 0 and data["security"]["advisories"] == []
        return
    [advisory] = data["security"]["advisories"]
    assert code == 1 and advisory["rule"] == "security.gpu-operator"
    assert advisory["expected"] == f"GPU Operator >= {fixed} (NVIDIA security bulletins)"
    assert advisory["source"] == "https://nvidia.custhelp.com/app/answers/detail/a_id/5850"


def test_matrix_check_cuda_has_the_security_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["matrix", "check", "--cuda", "12.8", "--json"]) == 0  # compatibility is apart
    data = json.loads(capsys.readouterr().out)
    assert data["security"]["checked"] == ["CUDA Toolkit 12.8"]
    assert {a["rule"] for a in data["security"]["advisories"]} == {"security.cuda-toolkit"}


@pytest.mark.parametrize("bad", ["banana", "25.x", "v"])
def test_a_gpu_operator_release_that_is_not_a_version_is_one_line_exit_2(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["matrix", "check", "--gpu-operator", bad]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--gpu-operator" in err and "Traceback" not in err


def test_the_audit_judges_every_installed_cuda_toolkit() -> None:
    facts = HostFacts(
        cuda=CudaFacts(
            toolkits=[
                CudaToolkit("/usr/local/cuda-12.6", "12.6.3"),
                CudaToolkit("/usr/local/cuda-13.1", "13.1.0"),
            ],
            default_path="/usr/local/cuda-13.1",
        )
    )
    report = audit_host("n1", facts, {}, AuditSettings(None, {}))
    cuda = [f for f in report.all_findings if f.rule == "security.cuda-toolkit"]
    assert [f.found for f in cuda] == ["CUDA Toolkit 12.6.3"]  # 13.1.0 is fixed
    assert cuda[0].severity == "error"
