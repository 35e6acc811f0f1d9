"""The combined probe: valid POSIX sh, every section present, exact splitting, tolerant of
missing tools, and the framework probe never initialises CUDA."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from probe_text import capture, probe_output

from gpuhost.errors import ConfigError, ParseError
from gpuhost.facts.build import host_facts_from_text
from gpuhost.facts.local import run_probe_locally
from gpuhost.probe import SECTION_NAMES, build_probe, split_sections
from gpuhost.probe.script import MARK


def test_probe_is_valid_posix_sh():
    sh = shutil.which("dash") or shutil.which("sh")
    assert sh is not None
    proc = subprocess.run([sh, "-n", "-c", build_probe(["python3", "/opt/venv/bin/python"])],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


def test_probe_on_this_machine_has_every_section_and_exits_zero():
    probe = split_sections(run_probe_locally(pythons=[]))
    assert probe.truncated == ()
    missing = [name for name in SECTION_NAMES if name not in probe.sections]
    assert missing == []
    assert probe.sections["meta"].stdout.startswith("probe=1\n")
    # A tool that is not installed is a state (exit 127), not a failure of the probe.
    for name in ("rpm", "fabricmanager"):
        if shutil.which(name if name != "fabricmanager" else "nv-fabricmanager") is None:
            assert probe.sections[name].rc == 127


def test_splitter_keeps_output_byte_for_byte():
    text = probe_output({
        "a": ("no newline at end", "", 0),
        "b": ("two\n\nlines with a blank one\n", "warn\n", 3),
        "c": ("", "", 127),
    })
    probe = split_sections(text)
    assert probe.sections["a"].stdout == "no newline at end"
    assert probe.sections["b"].stdout == "two\n\nlines with a blank one\n"
    assert probe.sections["b"].stderr == "warn\n"
    assert probe.sections["b"].rc == 3
    assert probe.sections["c"].missing_tool


def test_splitter_reads_the_real_probe_framing_of_output_without_final_newline(tmp_path):
    script = build_probe([]).replace("cat /etc/os-release", "printf 'ID=x'; true ||")
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    assert split_sections(out).sections["os-release"].stdout == "ID=x"


def test_splitter_ignores_banners_and_reports_cut_off_sections():
    text = "Welcome to host!\n" + probe_output({"meta": "probe=1\n"}) + f"\n{MARK} begin dpkg\nnv"
    probe = split_sections(text)
    assert set(probe.sections) == {"meta"}
    assert probe.truncated == ("dpkg",)
    facts = host_facts_from_text(text)
    assert any("dpkg: output cut off" in p for p in facts.problems)


@pytest.mark.parametrize("text", ["", "hello\nworld\n", "\x00\x01binary"])
def test_splitter_rejects_what_is_not_probe_output(text):
    with pytest.raises(ParseError, match="gpuhost probe"):
        split_sections(text)


@pytest.mark.parametrize("bad", ["python3; rm -rf /", "$(reboot)", "py thon", ["ok", "a'b"]])
def test_interpreter_names_from_inventory_are_checked(bad):
    with pytest.raises(ConfigError, match="gpuhost_pythons"):
        build_probe(bad if isinstance(bad, list) else [bad])


def _stub(directory: Path, name: str, body: str) -> None:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def _run_with_stubs(stubs: Path, pythons: list[str] | None = None) -> str:
    env = dict(os.environ, PATH=f"{stubs}:{os.environ.get('PATH', '')}")
    return subprocess.run(["sh", "-c", build_probe(pythons if pythons is not None else [])],
                          capture_output=True, text=True, check=True, env=env).stdout


def test_nvidia_smi_exit_9_becomes_driver_not_loaded(tmp_path):
    message = ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
               "Make sure that the latest NVIDIA driver is installed and running.")
    _stub(tmp_path, "nvidia-smi", f'echo "{message}"\nexit 9\n')
    facts = host_facts_from_text(_run_with_stubs(tmp_path))
    assert facts.driver.smi_installed
    assert facts.driver.smi_rc == 9
    assert facts.driver.smi.state == "driver-not-loaded"


def test_real_xml_capture_is_read_through_the_probe(tmp_path):
    xml = capture("nvidia-smi-xml/telegraf__a100-sxm4-v12.xml")
    (tmp_path / "capture.xml").write_text(xml)
    _stub(tmp_path, "nvidia-smi", f"cat '{tmp_path / 'capture.xml'}'\n")
    facts = host_facts_from_text(_run_with_stubs(tmp_path))
    assert facts.driver.smi.state == "ok"
    assert facts.driver.smi.gpus and "A100" in (facts.driver.smi.gpus[0].name or "")
    # The XML was complete, so the -q text fallback did not run.
    assert split_sections(_run_with_stubs(tmp_path)).stdout("nvidia-smi-text") == ""


def test_broken_xml_falls_back_to_the_q_text(tmp_path):
    text = capture("nvidia-smi-q-text/thamada-gls__L4__550.90.07.txt")
    (tmp_path / "q.txt").write_text(text)
    _stub(tmp_path, "nvidia-smi",
          f'if [ "$2" = "-x" ]; then echo "<nvidia_smi_log><driver_ver"; exit 0; fi\n'
          f"cat '{tmp_path / 'q.txt'}'\n")
    facts = host_facts_from_text(_run_with_stubs(tmp_path))
    assert facts.driver.smi.state == "ok"
    assert facts.driver.smi.source != "xml"
    assert facts.driver.smi.gpus and "L4" in (facts.driver.smi.gpus[0].name or "")


def test_framework_probe_reads_torch_without_initialising_cuda():
    try:
        import torch  # noqa: F401
    except ImportError:
        pytest.skip("torch is not installed here (scripts/test installs a CPU build of it)")
    out = _run_with_stubs(Path("/nonexistent"), pythons=[sys.executable])
    line = split_sections(out).stdout("python.0").strip().splitlines()[-1]
    data = json.loads(line)
    assert data["torch"] == torch.__version__
    assert data["cuda_initialized"] is False
    facts = host_facts_from_text(out)
    assert facts.frameworks[0].torch_version == torch.__version__
    assert facts.frameworks[0].torch_cuda_initialized is False


def test_missing_interpreter_is_reported_as_not_found():
    facts = host_facts_from_text(_run_with_stubs(Path("/nonexistent"), ["/no/such/python"]))
    assert facts.frameworks[0].found is False


def test_cudnn_known_only_from_its_package_is_the_upstream_version():
    """cuDNN found only as an installed package (no header, no library readable) is reported
    with its upstream version: the Debian revision "-1" is not part of cuDNN's version."""
    from probe_text import host_with

    dpkg = "libcudnn9-cuda-12\t9.1.0.70-1\tii \n"
    facts = host_facts_from_text(host_with(dpkg=dpkg))
    assert facts.cudnn.version == "9.1.0.70"
    assert "libcudnn9-cuda-12" in facts.cudnn.source
