"""The packaged checks :mod:`gpuhost.checks.test_fabric`, collected here."""

from gpuhost.checks.test_fabric import *  # noqa: F403
