"""The packaged checks :mod:`gpuhost.checks.test_driver`, collected here."""

from gpuhost.checks.test_driver import *  # noqa: F403
