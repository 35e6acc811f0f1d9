"""The packaged checks :mod:`gpuhost.checks.test_gpu_health`, collected here."""

from gpuhost.checks.test_gpu_health import *  # noqa: F403
