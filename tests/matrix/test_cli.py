"""gpuhost matrix ... through gpuhost.cli.main (exit 0 ok/warn, 1 incompatible, 2 bad input)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from old_profiles import OLD_PROFILES

from gpuhost.cli import main
from gpuhost.datadir import data_info

AS_OF = ["--as-of", "2026-11-22"]


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_check_json_shape(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys, "matrix", "check", "--gpu", "V100", "--cuda", "13.0", "--json", *AS_OF
    )
    assert code == 1
    data = json.loads(out)
    assert set(data) == {"verdict", "findings", "security", "data"} and data["verdict"] == "error"
    assert set(data["data"]) == {"date", "origin"}
    for f in data["findings"]:
        keys = {"rule", "severity", "message", "source", "found", "expected", "fix", "action"}
        assert set(f) == keys
        assert f["action"] is None  # the one Finding type; only GPU faults carry an action
    assert "cuda.arch-unsupported" in {f["rule"] for f in data["findings"]}
    # CUDA 13.0 is judged against the CUDA Toolkit bulletins: January 2026 (5755) fixes 13.1
    assert data["security"]["checked"] == ["CUDA Toolkit 13.0"]
    assert {a["rule"] for a in data["security"]["advisories"]} == {"security.cuda-toolkit"}


H100_535 = ("matrix", "check", "--gpu", "H100", "--driver", "535.161.07", "--cuda", "12.2")


def test_a_working_stack_with_an_affected_driver_is_two_answers(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 24: the stack works (compatibility ok or warning: R535 is past end of life) while
    NVIDIA's bulletins affect its driver (security error); exit 0 unless --fail-on security."""
    code, out, _ = _run(capsys, *H100_535, "--json", *AS_OF)
    data = json.loads(out)
    assert code == 0 and data["verdict"] in ("ok", "warning")
    assert not [f for f in data["findings"] if f["rule"].startswith("security.")]
    assert data["security"]["verdict"] == "error"
    assert data["security"]["checked"] == ["driver 535.161.07", "CUDA Toolkit 12.2"]
    assert {a["rule"] for a in data["security"]["advisories"]} == {
        "security.driver",
        "security.cuda-toolkit",
    }
    assert _run(capsys, *H100_535, "--json", "--fail-on", "security", *AS_OF)[0] == 1
    assert _run(capsys, *H100_535, "--fail-on", "compatibility", *AS_OF)[0] == 0
    code, out, _ = _run(capsys, *H100_535, *AS_OF)
    assert code == 0 and "\nverdict: warning\n" in out and "\nsecurity: error (" in out


def test_fail_on_security_keeps_failing_an_incompatible_stack(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ("matrix", "check", "--gpu", "V100", "--cuda", "13.0", "--driver", "580.159.03")
    assert _run(capsys, *args, "--fail-on", "security", *AS_OF)[0] == 1
    assert _run(capsys, *args, "--fail-on", "nothing", *AS_OF)[0] == 2


def test_check_warn_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    # 575.51.03 (R575 after NVIDIA's April 2025 fix, never fixed again: a security warning)
    code, out, _ = _run(
        capsys, "matrix", "check", "--driver", "575.51.03", "--cuda", "12.9.1", *AS_OF
    )
    assert code == 0 and "cuda.driver-minor-compat" in out and "verdict: warn" in out


def test_check_bad_version_is_one_clear_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "matrix", "check", "--driver", "55O.54")
    assert code == 2
    assert err.strip().count("\n") == 0 and "--driver" in err and "Traceback" not in err


def test_resolve_json(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(
        capsys,
        "matrix",
        "resolve",
        "--gpu",
        "H100",
        "--framework",
        "torch==2.5.1",
        "--json",
        *AS_OF,
    )
    assert code == 0
    data = json.loads(out)
    assert data["frameworks"] == {"torch": "2.5.1+cu124"} and data["cuda"] == "12.4"
    assert set(data["driver"]) == {"branch", "min_version"}


def test_resolve_without_a_set_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "matrix", "resolve", "--gpu", "V100", "--cuda", "13.0", *AS_OF)
    assert code == 1 and "no compatible set" in out
    code, out, _ = _run(capsys, "matrix", "resolve", "--gpu", "V100", "--cuda", "13.0", "--json")
    assert code == 1 and json.loads(out)["explain"]


def test_resolve_json_names_the_data_it_answered_with(capsys: pytest.CaptureFixture[str]) -> None:
    """Every answer states the knowledge data's date and origin: a proposal and 'no set' alike."""
    code, out, _ = _run(capsys, "matrix", "resolve", "--gpu", "H100", "--json", *AS_OF)
    assert code == 0 and json.loads(out)["data"] == data_info()
    code, out, _ = _run(capsys, "matrix", "resolve", "--gpu", "V100", "--cuda", "13.0", "--json")
    assert code == 1 and json.loads(out)["data"] == data_info()


def test_resolve_text(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "matrix", "resolve", "--gpu", "T4", "--os", "debian-12", *AS_OF)
    assert code == 0 and out.startswith("driver:  R") and "debian-12" in out


def test_show(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "matrix", "show")
    assert code == 0 and "12.4" in out and "550.54.14" in out
    code, out, _ = _run(capsys, "matrix", "show", "--gpu", "NVIDIA A100-SXM4-80GB")
    assert code == 0 and "8.0" in out and "Ampere" in out
    code, out, _ = _run(capsys, "matrix", "show", "--gpu", "nope")
    assert code == 2  # bad input (was 1, as if the matrix had found a problem)


def test_validate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = _run(capsys, "matrix", "validate")
    assert code == 0 and "valid" in out
    bad = tmp_path / "m.yaml"
    bad.write_text("schema: 1\ncuda: {'12.4': {min_driver: '55O.54'}}\n")
    code, _, err = _run(capsys, "matrix", "validate", str(bad))
    assert (
        code == 2 and str(bad) in err and 'cuda.12.4.min_driver: "55O.54" is not a version' in err
    )


def test_render(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    target = tmp_path / "matrix.md"
    code, _, _ = _run(capsys, "matrix", "render", "-o", str(target))
    assert code == 0 and target.read_text().startswith("# Compatibility matrix")
    # a folder that does not exist is not made (as for every other output option)
    code, _, err = _run(capsys, "matrix", "render", "-o", str(tmp_path / "out" / "matrix.md"))
    assert code == 2 and f"folder {tmp_path / 'out'} does not exist" in err


def test_profile_verify(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, _ = _run(
        capsys, "matrix", "profile", "verify", "debian12-nonfree-535-security", "--json", *AS_OF
    )
    doc = json.loads(out)
    assert code == 0 and doc["verdict"] in ("ok", "warning")
    # the same top-level keys as matrix check --json, the data named by the one helper
    assert set(doc) == {"verdict", "findings", "security", "data"}
    assert doc["data"] == data_info()
    # compatible, but its driver and toolkit are older than NVIDIA's security fixes: the
    # exposure is its own answer, refused only with --fail-on security
    old = ("matrix", "profile", "verify", "nvidia-repo-550-cuda12.4", "--profiles", OLD_PROFILES)
    code, out, _ = _run(capsys, *old, "--json", *AS_OF)
    data = json.loads(out)
    assert code == 0 and data["verdict"] != "error"
    rules = {f["rule"] for f in data["security"]["advisories"] if f["severity"] == "error"}
    assert "security.driver" in rules  # 550.54.15: R550 fixed in 550.163.01
    assert not [f for f in data["findings"] if f["rule"].startswith("security.")]
    assert _run(capsys, *old, "--fail-on", "security", *AS_OF)[0] == 1
    code, out, _ = _run(
        capsys, "matrix", "profile", "verify", "debian12-nonfree-535-security", "--gpu", "B200"
    )
    assert code == 1
    code, _, err = _run(capsys, "matrix", "profile", "verify", "nope")
    assert code == 2 and "known:" in err
    code, _, err = _run(
        capsys, "matrix", "profile", "verify", "x", "--profiles", str(tmp_path / "absent.yaml")
    )
    assert code == 2 and "absent.yaml" in err
    code, out, _ = _run(capsys, "matrix", "profile", "list")
    assert code == 0 and "debian12-nonfree-535-security" in out


def test_bad_as_of(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "matrix", "check", "--as-of", "tomorrow")
    assert code == 2 and "--as-of" in err


@pytest.mark.parametrize("os_id", ["windows", "sles-15", "debian12"])
def test_resolve_os_gpuhost_cannot_provision_is_bad_input(capsys, os_id: str) -> None:
    """Any --os was accepted and answered 'install from a profile for it', though no profile or
    install path exists for it (SUSE has none)."""
    code, out, err = _run(capsys, "matrix", "resolve", "--gpu", "T4", "--os", os_id, *AS_OF)
    assert code == 2 and out == "" and err.count("\n") == 1
    assert f"--os {os_id!r}: not an OS gpuhost can provision" in err and "debian-12" in err


@pytest.mark.parametrize("os_id", ["rocky-9", "rhel-9", "almalinux-9", "ubuntu-24.04"])
def test_resolve_os_names_the_profiles_of_an_os_gpuhost_provisions(capsys, os_id: str) -> None:
    code, out, err = _run(capsys, "matrix", "resolve", "--gpu", "T4", "--os", os_id, *AS_OF)
    assert code == 0 and err == ""
    assert f"os {os_id}: provision it from a profile for {os_id}" in out


@pytest.mark.parametrize("value", ["", " ", "\t"])
@pytest.mark.parametrize(
    "argv",
    [
        ("matrix", "check", "--cuda", "13.0"),
        ("matrix", "resolve"),
        ("matrix", "show"),
        ("matrix", "profile", "verify", "nvidia-repo-580-cuda13.0"),
    ],
)
def test_an_empty_gpu_is_bad_input_everywhere(
    capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], value: str
) -> None:
    """An empty or blank --gpu names no GPU: one line naming the option, exit 2 (it used to be
    judged as an unknown GPU, a warning with exit 0, by all but ``matrix show``)."""
    code, out, err = _run(capsys, *argv, "--gpu", "H100", "--gpu", value)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("gpuhost: error: --gpu") and "empty" in err
