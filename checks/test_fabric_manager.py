"""The packaged checks :mod:`gpuhost.checks.test_fabric_manager`, collected here."""

from gpuhost.checks.test_fabric_manager import *  # noqa: F403
