"""The fleet summary's stack lines name the CUDA the host table names: a host with Debian's
nvidia-cuda-toolkit (no /usr/local/cuda default) shows its installed toolkit in both, not
'CUDA 11.8.89' in its row and 'CUDA -' in its stack (seen auditing two lab hosts)."""

from __future__ import annotations

from gpuhost.audit.report import table


def _stack(toolkits: str, default: str) -> dict[str, str]:
    # the stack of `gpuhost audit` on a lab host provisioned with debian12-nonfree-535-security
    return {
        "os": "debian 12",
        "kernel": "6.18.44-fc-v769",
        "gpus": "1x Tesla T4",
        "driver_loaded": "535.309.01",
        "driver_installed": "535.309.01",
        "kernel_module": "proprietary",
        "cuda_toolkits": toolkits,
        "cuda_default": default,
        "cudnn": "-",
        "container_toolkit": "-",
        "fabric_manager": "-",
        "frameworks": "-",
    }


def test_stack_line_names_the_installed_toolkit_when_there_is_no_default() -> None:
    summary = {
        "hosts": 3,
        "reachable": 3,
        "verdict": "warning",
        "stacks": [
            {"stack": _stack("11.8.89", "-"), "hosts": ["h1"], "count": 1},
            {"stack": _stack("12.4, 12.9", "12.9"), "hosts": ["h2"], "count": 1},
            {"stack": _stack("-", "-"), "hosts": ["h3"], "count": 1},
        ],
    }
    lines = table.fleet_text(summary).splitlines()
    assert "driver 535.309.01, CUDA 11.8.89, cuDNN -" in lines[1]
    assert "CUDA 12.9, cuDNN" in lines[2]
    assert "CUDA -, cuDNN" in lines[3]
