"""Registers :mod:`gpuhost.checks.plugin` for a run that collects this package (``gpuhost check``,
``pytest --pyargs gpuhost.checks``). Loading it twice (also ``-p gpuhost.checks.plugin``) is a
no-op: pytest registers a plugin module once per name."""

pytest_plugins = ["gpuhost.checks.plugin"]
