"""The packaged checks :mod:`gpuhost.checks.test_smoke`, collected here."""

from gpuhost.checks.test_smoke import *  # noqa: F403
