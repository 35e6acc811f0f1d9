"""The one error hierarchy of gpuhost.

Library code raises these; only the CLI (``gpuhost.cli``) turns them into messages and exit codes.
Every message names where the problem is (file, host or field), what was found and what is expected.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1  # incompatible stack, failed checks, errors found on hosts
EXIT_USAGE = 2  # bad input: usage, configuration, matrix, inventory


class GpuhostError(Exception):
    """Base of every error gpuhost raises on purpose."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class ConfigError(GpuhostError):
    """A configuration file, inventory or profile is missing, malformed or inconsistent."""


class MatrixError(ConfigError):
    """The compatibility matrix data is malformed or inconsistent.

    ``problems`` holds one line per bad field, each starting with the field's path.
    """

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source = source
        self.problems = problems
        shown = "; ".join(problems[:10])
        more = f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""
        super().__init__(f"{source}: invalid compatibility matrix: {shown}{more}")


class VersionError(ConfigError):
    """A version string given by the user or found in data does not parse."""


class UnknownNameError(ConfigError):
    """A name (GPU, profile, framework) is not known; the message lists accepted values."""


class ParseError(GpuhostError):
    """Captured tool output could not be understood (malformed, truncated, binary)."""


class PackageIndexError(GpuhostError):
    """A Python package index (PyPI, or recorded answers) could not answer ``matrix sync``."""

    exit_code = EXIT_FINDINGS


class DataUpdateError(GpuhostError):
    """``gpuhost data update`` changed nothing: a source failed or gave data the loader refuses
    (the message says which, and which data stays in use)."""

    exit_code = EXIT_FINDINGS


class IncompatibleError(GpuhostError):
    """No compatible version set exists for what was asked."""

    exit_code = EXIT_FINDINGS


class HostError(GpuhostError):
    """Something went wrong on one host (unreachable, command failed)."""

    exit_code = EXIT_FINDINGS

    def __init__(self, host: str, message: str) -> None:
        self.host = host
        super().__init__(f"{host}: {message}")


class DeployError(HostError):
    """A deploy refused to change a host, or a change failed; the host was left as described."""


class LabError(GpuhostError):
    """The disposable test-host lab could not be brought up or down."""

    exit_code = EXIT_FINDINGS
