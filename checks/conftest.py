"""``pytest checks --hosts=...`` / ``--inventory=...``: the checks shipped in the package.

The test modules here only re-export :mod:`gpuhost.checks` (one per packaged module, checked by
tests/checks/test_packaged.py); add a site's own checks as more ``test_*.py`` files here: they get
the same fixtures (``host``, ``facts``, ``expected``, ``inventory_data``, ``profile``).
"""

pytest_plugins = ["gpuhost.checks.plugin"]
