"""Inventories: the data contract (``contract``), the one loader and ``--limit`` (``loader``), the
profiles a host uses (``profiles``) and docs/inventory.md (``render``)."""
