"""The packaged checks :mod:`gpuhost.checks.test_ssh`, collected here."""

from gpuhost.checks.test_ssh import *  # noqa: F403
