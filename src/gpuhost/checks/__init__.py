"""gpuhost's validation checks: a pytest-testinfra suite shipped inside the package.

Run them with ``gpuhost check [INVENTORY]``, or with pytest directly::

    pytest --pyargs gpuhost.checks --hosts=ssh://gpu1            # plain testinfra, default tier
    pytest -p gpuhost.checks.plugin --pyargs gpuhost.checks --inventory=inv.py --tier static

The hooks, options and fixtures live in :mod:`gpuhost.checks.plugin` (``conftest.py`` here only
registers it; pytest reads ``--tier``/``--inventory``/``--limit`` on the command line only when
the plugin is loaded before the arguments are parsed, hence ``-p gpuhost.checks.plugin``). The
top-level ``checks/`` folder of the source tree runs these same modules.
"""
