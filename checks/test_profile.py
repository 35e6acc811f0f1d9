"""The packaged checks :mod:`gpuhost.checks.test_profile`, collected here."""

from gpuhost.checks.test_profile import *  # noqa: F403
