"""The packaged checks :mod:`gpuhost.checks.test_cuda`, collected here."""

from gpuhost.checks.test_cuda import *  # noqa: F403
