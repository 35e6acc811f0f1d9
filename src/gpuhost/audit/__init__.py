"""The audit: judge HostFacts against the matrix and the pinned profile; fleet view; reports.

- ``rules``: the checks and their stable rule ids (``RULES``, ``RULE_IDS``)
- ``host``: ``audit_host(name, facts, host_data, settings) -> HostReport``
- ``fleet``: stack grouping, outliers, ``summarize`` (works on JSON host entries)
- ``report``: table, json (schema 1), junit and prom writers
"""
