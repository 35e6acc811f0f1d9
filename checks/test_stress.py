"""The packaged checks :mod:`gpuhost.checks.test_stress`, collected here."""

from gpuhost.checks.test_stress import *  # noqa: F403
