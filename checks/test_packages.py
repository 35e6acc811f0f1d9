"""The packaged checks :mod:`gpuhost.checks.test_packages`, collected here."""

from gpuhost.checks.test_packages import *  # noqa: F403
