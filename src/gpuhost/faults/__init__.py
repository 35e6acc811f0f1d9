"""GPU faults: the catalog (``data/faults.yaml``: severity, action, drain policy and source per
fault), the parsers' results judged against it (``judge``) and the catalog as a documentation
table (``table``). Every GPU health judgement (audit, static checks, health tier, Prometheus
textfile) takes its actions from here."""
